package report

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// ErrCompareUsage marks errors of `epbench compare`'s command line or
// inputs (exit 2); the message starts "compare: ".
var ErrCompareUsage = errors.New("compare")

const compareUsage = `usage: epbench compare [--kernel-only] [--label NAME ...] FILE [FILE ...]

Reads the summaries of ep_bench (NCCL-EP and nccl-extensions formats), of the
Python ep_bench_ll benchmark and of epbench (text or --json output), and prints
one table: host-observed avg/min/max per phase, and kernel rows when every
input has them. For two inputs it adds "Host D+C ratio a/b".

  --kernel-only   lead with the kernel-only rows, then the seed driver's
                  "representative" kernel rows (the minimum over ranks)
  --label NAME    label of the next input, in order; repeat per input (default:
                  the file name without its extension, with the folders or the
                  extension it takes to tell the inputs apart, and without a
                  ".suffix" every name ends with)

epbench compare --run --ep-lib epbench,nccl-ep ... runs the benchmarks on one
problem and compares their outputs (see epbench compare --run --help).
`

// compareUsagef formats an ErrCompareUsage error; %w in format keeps the
// cause reachable with errors.Is.
func compareUsagef(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCompareUsage}, a...)...)
}

// CompareCommand is `epbench compare FILE...`: it reads the summary files
// and prints their table on stdout.
func CompareCommand(args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kernelOnly := fs.Bool("kernel-only", false, "")
	labels := fs.StringArray("label", nil, "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return compareUsagef("%v", err)
	}
	if *help {
		_, err := fmt.Fprint(stdout, compareUsage)
		return err
	}
	files := fs.Args()
	if len(files) < 1 {
		return compareUsagef("need at least one summary file (see epbench compare --help)")
	}
	if len(*labels) > len(files) {
		return compareUsagef("--label given %d times for %d inputs", len(*labels), len(files))
	}
	names := Labels(files)
	var inputs []*Parsed
	for i, f := range files {
		p, err := ParseFile(f)
		if err != nil {
			return compareUsagef("%w", err)
		}
		p.Label = names[i]
		if i < len(*labels) {
			p.Label = (*labels)[i]
		}
		inputs = append(inputs, p)
	}
	if err := WriteCompare(stdout, inputs, CompareOptions{KernelOnly: *kernelOnly}); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}
