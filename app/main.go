// Package app is the epbench command: subcommands, backend choice, the
// hand-over to the CUDA executable, MPI start and stop, and exit codes.
// Both executables run it; only bin/epbench-cuda passes a CUDA implementation.
package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/mpi"
	"github.com/epbench/epbench/report"
)

// CUDA is what the CUDA executable adds to the common command.
type CUDA interface {
	// Devices prints each rank's GPU and peer reachability (rank 0 writes).
	Devices(w *bench.World, out io.Writer) error
	// Platform sets this rank up for the benchmark on its GPU.
	Platform(w *bench.World, cfg *config.Config) (*bench.Platform, error)
}

// Options configures Main.
type Options struct {
	CUDA CUDA // nil in bin/epbench
}

// Main runs the command line args (without the program name) and returns the
// process exit code. Errors are printed here, once.
func Main(args []string, opts Options) int {
	err := dispatch(args, opts)
	var ee *ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Code == ExitUsage:
		reportUsage(err)
	default:
		Report(os.Stderr, err)
	}
	return CodeOf(err)
}

// reportUsage prints a usage error once: under an MPI launcher every rank
// meets the same one (they parse the same arguments) and rank 0 prints it.
// Where the error came before MPI started, the ranks then wait for each
// other, bounded, before they exit: a rank that exits early makes mpirun end
// the job, which could cut rank 0 off before its line is out.
func reportUsage(err error) {
	if mpi.LauncherRank() == 0 {
		Report(os.Stderr, err)
	}
	if mpi.LauncherSize() <= 1 || mpi.Initialized() {
		return
	}
	w, werr := startMPI()
	if werr != nil {
		return
	}
	if !w.AllArrive(usageSettle) {
		mpi.Abort(ExitUsage)
	}
	w.Leave()
}

// usageSettle bounds how long the ranks wait for each other after a usage
// error (they normally meet within milliseconds of MPI starting).
const usageSettle = 10 * time.Second

func dispatch(args []string, opts Options) error {
	sub, rest := config.Subcommand(args)
	switch sub {
	case "version":
		return printVersion()
	case "devices":
		return devices(rest, opts)
	case "routing":
		return routingCmd(rest, os.Stdout)
	case "compare":
		return compareCmd(rest, os.Stdout)
	case "sweep":
		return sweepCmd(rest, opts)
	case "plot":
		return plotCmd(rest)
	}
	switch {
	case len(args) > 0 && args[0] == "help": // "help [COMMAND]" is "[COMMAND] --help"
		return dispatch(append(args[1:len(args):len(args)], "--help"), opts)
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		return Usagef("%q: unknown command (commands: help, %s; flags alone run the benchmark)", args[0], strings.Join(config.Subcommands, ", "))
	}
	return benchmark(args, opts)
}

// parseRun parses the benchmark's flags, handling --help and --version.
func parseRun(args []string) (*config.Config, bool, error) {
	cfg, err := config.Parse(args, os.Getenv)
	if errors.Is(err, config.ErrHelp) {
		if mpi.LauncherRank() == 0 {
			fmt.Print(config.Usage())
		}
		return nil, true, nil
	}
	if err != nil {
		return nil, false, Usage(err)
	}
	if cfg.ShowVersion {
		return nil, true, printVersion()
	}
	if n := mpi.LauncherSize(); n > 0 {
		if err := cfg.CheckRanks(n); err != nil {
			return nil, false, Usage(err)
		}
	}
	if err := report.CheckOutputs(map[string]string{"--json": cfg.JSONPath}); err != nil {
		return nil, false, Usage(err)
	}
	return cfg, false, nil
}

// printVersion prints the version (rank 0 alone under a launcher).
func printVersion() error {
	if mpi.LauncherRank() == 0 {
		fmt.Printf("epbench %s\n", Version)
	}
	return nil
}

const devicesUsage = `usage: mpirun -np N epbench devices

Prints each rank's GPU (name, PCI bus id, memory) and whether each peer GPU is reachable by P2P.
`

// devices runs the GPU check; in bin/epbench it hands over to the CUDA
// executable, or says that this node has no GPU.
func devices(args []string, opts Options) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Print(devicesUsage)
		return nil
	}
	if len(args) > 0 {
		return Usagef("devices: unexpected argument %q", args[0])
	}
	if opts.CUDA == nil {
		if gpuCount() == 0 {
			return Runtimef("devices: no NVIDIA GPU on this node (NVML reports none)")
		}
		return handOver(append([]string{"devices"}, args...))
	}
	w, err := startMPI()
	if err != nil {
		return err
	}
	if err := opts.CUDA.Devices(w, os.Stdout); err != nil {
		abortMPI(w, CodeOf(err), err)
		w.Leave()
		return err
	}
	w.Leave()
	return nil
}
