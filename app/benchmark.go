package app

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/cpuref"
	"github.com/epbench/epbench/report"
)

// benchmark runs the measurement with the chosen backend.
func benchmark(args []string, opts Options) error {
	cfg, done, err := parseRun(args)
	if done || err != nil {
		return err
	}
	compute, err := chooseCompute(cfg, opts, args)
	if err != nil {
		return err
	}
	t0 := time.Now()
	w, err := startMPI()
	if err != nil {
		return err
	}
	mpiMs := float64(time.Since(t0).Microseconds()) / 1000
	res, err := bench.Benchmark(w, cfg, opener(w, compute, opts), mpiMs)
	if err == nil && w.Rank == 0 {
		err = writeResult(os.Stdout, cfg.JSONPath, res)
	}
	if err == nil && res.Failed() {
		err = &ExitError{Code: ExitValidation, Err: errors.New(res.Failure())}
	}
	return finishMPI(w, cfg.Timeout(), runError(err))
}

// chooseCompute resolves --backend auto (cuda where a GPU is usable) and, for
// cuda in bin/epbench, hands the process over to the CUDA executable with
// argv (it returns only if that fails).
func chooseCompute(cfg *config.Config, opts Options, argv []string) (config.Compute, error) {
	compute := cfg.Compute
	if compute == config.ComputeAuto {
		compute = config.ComputeCPU
		if opts.CUDA != nil || gpuCount() > 0 {
			compute = config.ComputeCUDA
		}
	}
	if err := cfg.CheckCompute(compute); err != nil {
		return "", Usage(err)
	}
	if compute == config.ComputeCUDA && opts.CUDA == nil {
		return "", handOver(argv)
	}
	return compute, nil
}

// opener sets this rank's platform up: the GPU platform of the CUDA
// executable, or the CPU reference.
func opener(w *bench.World, compute config.Compute, opts Options) bench.Opener {
	if compute == config.ComputeCUDA {
		return func(cfg *config.Config) (*bench.Platform, error) { return opts.CUDA.Platform(w, cfg) }
	}
	return func(cfg *config.Config) (*bench.Platform, error) { return cpuref.Platform(w, cfg) }
}

// finishMPI ends MPI after a run that returned err, by the exit policy:
// verdicts every rank reached together end normally; timeouts wait for the
// other ranks to time out too; anything else aborts the job, since the other
// ranks may be waiting for this one.
func finishMPI(w *bench.World, timeout time.Duration, err error) error {
	switch code := CodeOf(err); {
	case err == nil, code == ExitUsage, code == ExitValidation:
	case code == ExitTimeout:
		endAfterTimeout(w, timeout, err)
	default:
		abortMPI(w, code, err)
	}
	w.Leave()
	return err
}

// runError gives an error of a measurement its exit code: a usage error
// found at set-up (2), a check that failed during the run (3, reached by
// every rank together), a peer that did not arrive (4), anything else (1).
func runError(err error) error {
	var ee *ExitError
	var ue *config.UsageError
	var ve *bench.ValidationError
	var pt bench.PeerTimeout
	switch {
	case err == nil || errors.As(err, &ee):
		return err
	case errors.As(err, &ue):
		return Usage(err)
	case errors.As(err, &ve):
		return &ExitError{Code: ExitValidation, Err: err}
	case errors.As(err, &pt) && pt.PeerTimeout():
		return &ExitError{Code: ExitTimeout, Err: err}
	}
	return Runtime(err)
}

func writeResult(out io.Writer, jsonPath string, res *report.Result) error {
	if err := report.WriteText(out, res); err != nil || jsonPath == "" {
		return err
	}
	return report.SaveJSON(jsonPath, res)
}
