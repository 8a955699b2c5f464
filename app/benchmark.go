package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/cpuref"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/stats"
)

// Platform is one rank's backend with what surrounds it: kernel timing, the
// profiler region, the topology block and the GPU memory readings.
type Platform struct {
	Backend     bench.Backend
	Kernel      bench.KernelTimer // nil: KernelNote says why
	KernelNote  string
	BeforeTimed func() error
	AfterTimed  func() error
	Topology    []string              // lines printed after the header (rank 0's)
	GroupMs     float64               // peer exchange time inside the set-up
	Memory      func() *report.Memory // nil on the CPU
	NumBlocks   int                   // grid size actually used (0 = not applicable)
}

// GPUPlatform is what the CUDA executable adds for the benchmark.
type GPUPlatform interface {
	Platform(w *World, cfg *config.Config) (*Platform, error)
}

// benchmark runs the measurement with the chosen backend.
func benchmark(args []string, opts Options) error {
	cfg, done, err := parseRun(args)
	if done || err != nil {
		return err
	}
	backend, err := chooseBackend(cfg, opts, args)
	if err != nil {
		return err
	}

	t0 := time.Now()
	w, err := startMPI()
	if err != nil {
		return err
	}
	mpiMs := float64(time.Since(t0).Microseconds()) / 1000
	return finishMPI(w, cfg.Timeout(), measure(w, cfg, backend, opts, mpiMs))
}

// chooseBackend resolves --backend auto (cuda where a GPU is usable) and, for
// cuda in bin/epbench, hands the process over to the CUDA executable with
// argv (it returns only if that fails).
func chooseBackend(cfg *config.Config, opts Options, argv []string) (config.Compute, error) {
	backend := cfg.Compute
	if backend == config.ComputeAuto {
		backend = config.ComputeCPU
		if opts.CUDA != nil || gpuCount() > 0 {
			backend = config.ComputeCUDA
		}
	}
	if backend == config.ComputeCPU && cfg.CUDAGraph {
		return "", Usage(&config.UsageError{Flag: "--cuda-graph", Why: "needs the CUDA backend, and no GPU is usable here"})
	}
	if backend == config.ComputeCUDA && opts.CUDA == nil {
		return "", handOver(argv)
	}
	return backend, nil
}

// finishMPI ends MPI after a run that returned err, by the exit policy:
// verdicts every rank reached together end normally; timeouts wait for the
// other ranks to time out too; anything else aborts the job, since the other
// ranks may be waiting for this one.
func finishMPI(w *World, timeout time.Duration, err error) error {
	switch code := CodeOf(err); {
	case err == nil, code == ExitUsage, code == ExitValidation:
	case code == ExitTimeout:
		endAfterTimeout(w, timeout, err)
	default:
		var pt bench.PeerTimeout
		if errors.As(err, &pt) && pt.PeerTimeout() {
			code = ExitTimeout
		}
		abortMPI(w, code, err)
	}
	stopMPI(w)
	return err
}

// loopError gives an error of the measurement loop its exit code: a check
// that failed during the run (3, reached by every rank together), a peer
// that did not arrive (4), anything else (1).
func loopError(err error) error {
	var ve *bench.ValidationError
	if errors.As(err, &ve) {
		return &ExitError{Code: ExitValidation, Err: err}
	}
	var pt bench.PeerTimeout
	if errors.As(err, &pt) && pt.PeerTimeout() {
		return &ExitError{Code: ExitTimeout, Err: err}
	}
	return Runtime(err)
}

// measure is the run on an initialised MPI world; every rank returns the
// same usage and validation verdicts.
func measure(w *World, cfg *config.Config, backend config.Compute, opts Options, mpiMs float64) error {
	if err := cfg.CheckRanks(w.Size); err != nil {
		return Usage(err)
	}
	t0 := time.Now()
	plat, err := openPlatform(w, cfg, backend, opts)
	if err != nil {
		return Runtime(err)
	}
	defer plat.Backend.Close()
	setupMs := float64(time.Since(t0).Microseconds()) / 1000

	res, failed, err := measurePoint(w, cfg, backend, plat)
	if err != nil {
		return err
	}
	res.Topology = plat.Topology
	c := bench.StatsComm(w.Comm)
	group, err := stats.Reduce(c, stats.KernelOnly, stats.Local{Sample: stats.Sample{Avg: mpiMs + plat.GroupMs, N: 1}})
	if err != nil {
		return Runtime(err)
	}
	handle, err := stats.Reduce(c, stats.KernelOnly, stats.Local{Sample: stats.Sample{Avg: setupMs - plat.GroupMs, N: 1}})
	if err != nil {
		return Runtime(err)
	}
	res.Setup = &report.Setup{Ranks: w.Size, GroupCreationMS: report.StatFrom(group), HandleCreationMS: report.StatFrom(handle)}
	if plat.Memory != nil {
		res.Memory = plat.Memory()
	}
	if w.Rank == 0 {
		if err := writeResult(os.Stdout, cfg, res); err != nil {
			return Runtime(err)
		}
	}
	if failed {
		return &ExitError{Code: ExitValidation, Err: errors.New("validation failed (see the Data Validation block)")}
	}
	return nil
}

// openPlatform sets this rank's backend up: the GPU platform of the CUDA
// executable, or the CPU reference.
func openPlatform(w *World, cfg *config.Config, backend config.Compute, opts Options) (*Platform, error) {
	if backend == config.ComputeCUDA {
		return opts.CUDA.Platform(w, cfg)
	}
	b, err := cpuref.New(w.Comm, bench.ShapeOf(cfg, w.Rank, w.Size), cfg)
	if err != nil {
		return nil, err
	}
	return &Platform{Backend: b, KernelNote: report.NoteCPUBackend}, nil
}

func failureDetail(c *bench.Check, dispatch bool) string {
	if (dispatch && c.DispatchOK) || (!dispatch && c.CombineOK) {
		return ""
	}
	return c.Detail
}

func writeResult(out io.Writer, cfg *config.Config, res *report.Result) error {
	if err := report.WriteText(out, res); err != nil {
		return err
	}
	if cfg.JSONPath == "" {
		return nil
	}
	f, err := os.Create(cfg.JSONPath)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := report.WriteJSON(f, res); err != nil {
		f.Close()
		return fmt.Errorf("--json: %w", err)
	}
	return f.Close()
}

func dtypeOf(cfg *config.Config) stats.DType {
	if cfg.DispatchDtype == config.DtypeFP8E4M3 {
		return stats.FP8E4M3
	}
	return stats.BF16
}

func reportConfig(cfg *config.Config, ranks int, backend config.Compute, plat *Platform) report.Config {
	cupti := "enabled (kernel-level GPU timing available)"
	switch {
	case backend == config.ComputeCPU:
		cupti = "not applicable (cpu backend)"
	case !cfg.KernelTiming:
		cupti = "disabled (--no-kernel-timing)"
	case cfg.CUPTIRegion:
		cupti = "disabled (--cupti-region: external profiler)"
	case plat.Kernel == nil:
		cupti = "unavailable"
	}
	return report.Config{
		Algorithm: cfg.Algorithm.String(), Layout: cfg.Layout.String(), Ranks: ranks,
		NumBlocks: cfg.NumBlocks, Tokens: cfg.Tokens, Hidden: cfg.Hidden, TopK: cfg.TopK,
		Experts: cfg.Experts, LocalExperts: cfg.LocalExperts(ranks), Warmup: cfg.Warmup, Iters: cfg.Iters,
		DispatchDType: cfg.DispatchDtype.String(), ProfileMode: cfg.CUPTIRegion, NVLink: backend == config.ComputeCUDA,
		Validate: cfg.Validate, CUPTI: cupti, Backend: string(backend), CombineMode: cfg.CombineMode.String(),
	}
}
