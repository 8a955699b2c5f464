package app

import (
	"os"
	"strconv"
)

// launcherRank is this process's world rank as the MPI launcher announced it
// in the environment, or 0 outside a launcher. It lets usage errors be printed
// by rank 0 alone without initialising MPI.
func launcherRank() int { return envInt(0, "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK") }

// launcherSize is the world size the launcher announced, or 0 when unknown.
func launcherSize() int { return envInt(0, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE") }

// underLauncher reports whether an MPI launcher started this process.
func underLauncher() bool { return launcherSize() > 0 }

func envInt(def int, names ...string) int {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			if i, err := strconv.Atoi(v); err == nil {
				return i
			}
		}
	}
	return def
}
