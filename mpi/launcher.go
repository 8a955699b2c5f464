package mpi

import (
	"os"
	"strconv"
)

// LauncherRank is this process's world rank as the MPI launcher announced
// it in the environment, or 0 outside a launcher. It needs no MPI_Init, so
// usage errors can be printed by rank 0 alone before MPI starts.
func LauncherRank() int { return envInt("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK") }

// LauncherSize is the world size the launcher announced, or 0 outside a
// launcher.
func LauncherSize() int { return envInt("OMPI_COMM_WORLD_SIZE", "PMI_SIZE") }

// UnderLauncher reports whether an MPI launcher started this process.
func UnderLauncher() bool {
	for _, n := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if _, ok := os.LookupEnv(n); ok {
			return true
		}
	}
	return false
}

func envInt(names ...string) int {
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			if i, err := strconv.Atoi(v); err == nil {
				return i
			}
		}
	}
	return 0
}
