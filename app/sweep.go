package app

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/epbench/epbench/bench"
	"github.com/epbench/epbench/config"
	"github.com/epbench/epbench/report"
	"github.com/epbench/epbench/routing"
	"github.com/epbench/epbench/stats"
	"github.com/epbench/epbench/validate"
)

// sweepSpec is a sweep's command line: one list-valued flag and the rest.
type sweepSpec struct {
	varying string   // "tokens", "top_k" or "experts"
	long    string   // the flag's long name
	values  []int    // in the order given
	base    []string // every other argument, for config.Parse
	csv     string
}

var sweepFlags = []struct {
	varying, long string
	names         []string
}{
	{"tokens", "--num-tokens", []string{"-t", "--num-tokens", "--tokens"}},
	{"top_k", "--num-topk", []string{"-k", "--num-topk", "--top-k"}},
	{"experts", "--num-experts", []string{"-e", "--num-experts", "--experts"}},
}

const sweepUsage = `usage: mpirun -np N epbench sweep -t 1,2,4,8,16,32,64,128,256 [flags] [--csv FILE] [--json FILE]

Runs the full paired measurement (warm-up, timed loop, kernel timing,
reductions) once per value of one list-valued flag: -t (tokens per rank; the
buffers are set up once, for the largest), -k or -e. Rank 0 prints one line
per value; --csv and --json save every number (per-rank values in JSON).
Every other flag is the benchmark's (see epbench --help).
`

// parseSweep splits args into the list flag and the rest.
func parseSweep(args []string) (*sweepSpec, error) {
	sp := &sweepSpec{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--csv" || strings.HasPrefix(a, "--csv=") {
			v, next, err := flagValue(args, i, "--csv")
			if err != nil {
				return nil, err
			}
			sp.csv, i = v, next
			continue
		}
		matched := false
		for _, f := range sweepFlags {
			for _, n := range f.names {
				v, ok := "", false
				switch {
				case a == n:
					if i+1 >= len(args) {
						return nil, Usagef("%s: needs a value", f.long)
					}
					v, ok = args[i+1], true
				case strings.HasPrefix(a, n+"=") && strings.HasPrefix(n, "--"):
					v, ok = a[len(n)+1:], true
				case len(n) == 2 && strings.HasPrefix(a, n) && len(a) > 2 && !strings.HasPrefix(a, "--"):
					v, ok = a[2:], true
				}
				if !ok {
					continue
				}
				matched = true
				step := 0
				if a == n {
					step = 1
				}
				if !strings.Contains(v, ",") {
					sp.base = append(sp.base, args[i:i+1+step]...)
					i += step
					break
				}
				if sp.varying != "" {
					return nil, Usagef("sweep: only one of -t, -k, -e may take a list")
				}
				sp.varying, sp.long = f.varying, f.long
				for _, s := range strings.Split(v, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(s))
					if err != nil || n <= 0 {
						return nil, Usagef("%s: %q is not a positive integer", f.long, s)
					}
					if slices.Contains(sp.values, n) {
						return nil, Usagef("%s: %d is listed twice", f.long, n)
					}
					sp.values = append(sp.values, n)
				}
				i += step
				break
			}
			if matched {
				break
			}
		}
		if !matched {
			sp.base = append(sp.base, a)
		}
	}
	if sp.varying == "" {
		return nil, Usagef("sweep: give a comma-separated list to -t, -k or -e (see epbench sweep --help)")
	}
	return sp, nil
}

func flagValue(args []string, i int, name string) (string, int, error) {
	if v, ok := strings.CutPrefix(args[i], name+"="); ok {
		if v == "" {
			return "", i, Usagef("%s: needs a file name", name)
		}
		return v, i, nil
	}
	if i+1 >= len(args) || args[i+1] == "" {
		return "", i, Usagef("%s: needs a file name", name)
	}
	return args[i+1], i + 1, nil
}

// configs parses the configuration of every point; every one is checked
// before anything runs.
func (sp *sweepSpec) configs() ([]*config.Config, error) {
	var out []*config.Config
	for _, v := range sp.values {
		args := append(slices.Clone(sp.base), fmt.Sprintf("%s=%d", sp.long, v))
		cfg, err := config.Parse(args, os.Getenv)
		if err != nil {
			return nil, Usage(err)
		}
		out = append(out, cfg)
	}
	return out, nil
}

// sweepCmd runs `epbench sweep`.
func sweepCmd(args []string, opts Options) error {
	if slices.Contains(args, "-h") || slices.Contains(args, "--help") {
		if launcherRank() == 0 {
			fmt.Print(sweepUsage)
		}
		return nil
	}
	sp, err := parseSweep(args)
	if err != nil {
		return err
	}
	cfgs, err := sp.configs()
	if err != nil {
		return err
	}
	base := cfgs[0]
	if n := launcherSize(); n > 0 {
		for _, c := range cfgs {
			if err := c.CheckRanks(n); err != nil {
				return Usage(err)
			}
		}
	}
	backend, err := chooseBackend(base, opts, append([]string{"sweep"}, args...))
	if err != nil {
		return err
	}
	w, err := startMPI()
	if err != nil {
		return err
	}
	return finishMPI(w, base.Timeout(), sweep(w, sp, cfgs, backend, opts))
}

// tokenResizer is a backend that can re-target its set-up at fewer tokens.
type tokenResizer interface{ SetTokens(t int) error }

func sweep(w *World, sp *sweepSpec, cfgs []*config.Config, backend config.Compute, opts Options) error {
	for _, c := range cfgs {
		if err := c.CheckRanks(w.Size); err != nil {
			return Usage(err)
		}
	}
	open := func(cfg *config.Config) (*Platform, error) { return openPlatform(w, cfg, backend, opts) }
	// A token sweep sets up once, for the largest size, when the backend can
	// be re-targeted; otherwise every point sets up its own.
	var shared *Platform
	if sp.varying == "tokens" {
		largest := cfgs[0]
		for _, c := range cfgs {
			if c.Tokens > largest.Tokens {
				largest = c
			}
		}
		p, err := open(largest)
		if err != nil {
			return Runtime(err)
		}
		if _, ok := p.Backend.(tokenResizer); ok {
			shared = p
			defer shared.Backend.Close()
		} else {
			p.Backend.Close()
		}
	}

	sw := &report.Sweep{Varying: sp.varying}
	failed := false
	for i, cfg := range cfgs {
		plat := shared
		if plat == nil {
			var err error
			if plat, err = open(cfg); err != nil {
				return Runtime(err)
			}
		} else if err := plat.Backend.(tokenResizer).SetTokens(cfg.Tokens); err != nil {
			return Runtime(err)
		}
		res, bad, err := measurePoint(w, cfg, backend, plat)
		if plat != shared {
			plat.Backend.Close()
		}
		if err != nil {
			return err
		}
		failed = failed || bad
		if i == 0 {
			sw.Config = res.Config
		}
		pt := report.SweepPoint{Tokens: cfg.Tokens, TopK: cfg.TopK, Experts: cfg.Experts, Result: res}
		sw.Points = append(sw.Points, pt)
		if w.Rank == 0 {
			if i == 0 {
				if err := report.WriteSweepHeader(os.Stdout, sw); err != nil {
					return Runtime(err)
				}
			}
			if err := report.WriteSweepRow(os.Stdout, sw, pt); err != nil {
				return Runtime(err)
			}
			if isTerminal(os.Stderr) {
				fmt.Fprintf(os.Stderr, "epbench: sweep %d/%d done (%s=%d)\n", i+1, len(cfgs), sp.varying, sp.values[i])
			}
		}
	}
	if w.Rank == 0 {
		if err := writeSweepFiles(sw, sp.csv, cfgs[0].JSONPath); err != nil {
			return Runtime(err)
		}
	}
	if failed {
		return &ExitError{Code: ExitValidation, Err: errors.New("validation failed at some sweep point")}
	}
	return nil
}

func writeSweepFiles(sw *report.Sweep, csv, js string) error {
	for _, f := range []struct {
		path  string
		write func(*os.File) error
	}{
		{csv, func(f *os.File) error { return report.WriteSweepCSV(f, sw) }},
		{js, func(f *os.File) error { return report.WriteSweepJSON(f, sw) }},
	} {
		if f.path == "" {
			continue
		}
		out, err := os.Create(f.path)
		if err != nil {
			return err
		}
		if err := f.write(out); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// measurePoint is one full measurement on a set-up platform: the paired
// loop, the reductions, validation when asked. It returns the result (the
// same on every rank) and whether validation failed anywhere.
func measurePoint(w *World, cfg *config.Config, backend config.Compute, plat *Platform) (*report.Result, bool, error) {
	shape := bench.ShapeOf(cfg, w.Rank, w.Size)
	idx0, err := routing.TopK(cfg.Tokens, cfg.Experts, cfg.TopK, routing.GenSeed(cfg.Seed, w.Rank, w.Size, 0))
	if err != nil {
		return nil, false, Runtime(err)
	}
	sel := stats.Selections(idx0)
	run := &bench.Run{
		Cfg: cfg, Comm: w.Comm, Backend: plat.Backend,
		Kernel: plat.Kernel, KernelNote: plat.KernelNote,
		BeforeTimed: plat.BeforeTimed, AfterTimed: plat.AfterTimed,
		Selections:    sel,
		DispatchBytes: stats.DispatchBytes(sel, cfg.Hidden, dtypeOf(cfg)),
		CombineBytes:  stats.CombineBytes(sel, cfg.Hidden),
	}
	if cfg.Validate || cfg.ValidateEvery > 0 {
		run.Validate = validate.Validator(shape, cfg)
	}
	m, err := run.Loop()
	if err != nil {
		return nil, false, loopError(err)
	}
	sum, per, err := run.Summarize(m)
	if err != nil {
		return nil, false, Runtime(err)
	}
	res := &report.Result{Config: reportConfig(cfg, w.Size, backend, plat), Summary: sum, PerRank: per}
	for _, d := range m.KernelTimerDoubts(w.Rank) {
		fmt.Fprintf(os.Stderr, "epbench: kernel timer: %s\n", d)
	}
	bad := false
	if m.Check != nil {
		gd, gc, err := validate.Global(w.Comm, validate.Report{DispatchOK: m.Check.DispatchOK, CombineOK: m.Check.CombineOK})
		if err != nil {
			return nil, false, Runtime(err)
		}
		res.Validation = &report.Validation{
			Dispatch:       report.Check{Passed: m.Check.DispatchOK, Detail: failureDetail(m.Check, true)},
			Combine:        report.Check{Passed: m.Check.CombineOK, Detail: failureDetail(m.Check, false)},
			CalcDiff:       m.Check.CalcDiff,
			GlobalDispatch: gd,
			GlobalCombine:  gc,
		}
		bad = !gd || !gc
		if m.Check.Detail != "" {
			fmt.Fprintf(os.Stderr, "epbench: validation: %s\n", m.Check.Detail)
		}
	}
	return res, bad, nil
}
