package sidebyside

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/epbench/epbench/report"
)

// Schema names the layout of the --json file.
const Schema = "epbench-compare-run/1"

// ErrProgramFailed reports that at least one program exited non-zero or
// printed no summary (exit 1, after the table of the others). Its message
// keeps the word the command's help and the README use.
var ErrProgramFailed = errors.New("backend failed")

// ErrInterrupted reports a run stopped by SIGINT or SIGTERM.
var ErrInterrupted = errors.New("interrupted")

// Main runs "epbench compare --run" with args (the compare arguments,
// --run among them). Usage errors satisfy IsUsage; -h prints the help.
func Main(args []string, env Env) error {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	o, err := Parse(args, env)
	if errors.Is(err, ErrHelp) {
		_, err = io.WriteString(env.Stdout, Usage())
		return err
	}
	if err != nil {
		return fmt.Errorf("compare --run: %w", err)
	}
	if o.DryRun {
		return dryRun(o, env.Stdout)
	}
	return run(o, env)
}

func banner(w io.Writer, name string, c Command) {
	fmt.Fprintf(w, "\n########## ep-lib=%s ##########\n$ %s\n", name, c)
}

// dryRun prints what run would start.
func dryRun(o *Options, w io.Writer) error {
	hf := newHostfile(o, filepath.Join(os.TempDir(), "epbench-hostfile"))
	if hf != nil {
		fmt.Fprintf(w, "$ %s\n", hf)
	}
	for _, name := range o.Libs {
		banner(w, name, o.command(programs[name], hf, os.LookupEnv))
	}
	return nil
}

// result is one program's entry in the --json file.
type result struct {
	EPLib    string   `json:"ep_lib"`
	Env      []string `json:"env"`
	Argv     []string `json:"argv"`
	ExitCode int      `json:"exit_code"`
	OK       bool     `json:"ok"`
	// InTable: its summary is in the table (also when it failed after
	// printing it, marked there).
	InTable bool            `json:"in_table"`
	Error   string          `json:"error,omitempty"`
	Format  string          `json:"format,omitempty"`
	Config  *report.Config  `json:"config,omitempty"`
	Summary *report.Summary `json:"summary,omitempty"`
}

// runFile is the --json file.
type runFile struct {
	Schema       string   `json:"schema"`
	Problem      Problem  `json:"problem"`
	Nodes        []string `json:"nodes"`
	RanksPerNode int      `json:"ranks_per_node"`
	Ranks        int      `json:"ranks"`
	Results      []result `json:"results"`
}

func run(o *Options, env Env) error {
	var jsonFile *os.File
	if o.JSONPath != "" {
		// Opened first so a bad path fails before the benchmarks run.
		f, err := os.Create(o.JSONPath)
		if err != nil {
			return fmt.Errorf("compare --run: %w", usageErr("--json", "%v", err))
		}
		jsonFile = f
		defer f.Close()
	}
	hf := newHostfile(o, "")
	if hf != nil {
		if err := hf.write(); err != nil {
			return fmt.Errorf("compare --run: %w", err)
		}
		defer hf.remove()
		fmt.Fprintf(env.Stdout, "$ %s\n", hf)
	}

	var (
		parsed      []*report.Parsed
		notes       []string
		results     []result
		failed      []string
		interrupted bool
	)
	for _, name := range o.Libs {
		c := o.command(programs[name], hf, os.LookupEnv)
		banner(env.Stdout, name, c)
		fmt.Fprintln(env.Stdout)
		out, intr := execute(c, env.Stdout, env.Stderr)
		res := result{EPLib: name, Env: c.Env, Argv: c.Argv, ExitCode: out.exitCode}
		p, why := judge(out)
		res.OK, res.InTable = why == "", p != nil
		if why != "" {
			res.Error = why
			failed = append(failed, name)
			warn(env.Stderr, name, why, out, p != nil)
		}
		if p != nil {
			// As the seed driver does, a summary printed before a failure
			// is shown, marked.
			p.Label = name
			if why != "" {
				p.Label += "*"
				notes = append(notes, fmt.Sprintf("%s failed after printing its summary (%s)", p.Label, why))
			}
			parsed = append(parsed, p)
			res.Format = p.Format.String()
			res.Config = p.Config
			s := p.Summary
			res.Summary = &s
		}
		results = append(results, res)
		if intr {
			interrupted = true
			break
		}
	}

	if len(parsed) > 0 {
		err := report.WriteCompare(env.Stdout, parsed, report.CompareOptions{KernelOnly: o.KernelOnly, Notes: notes})
		if err != nil {
			return fmt.Errorf("compare --run: %w", err)
		}
	}
	if jsonFile != nil {
		if err := writeJSON(jsonFile, o, results); err != nil {
			return fmt.Errorf("compare --run: --json %s: %w", o.JSONPath, err)
		}
	}
	switch {
	case interrupted:
		return fmt.Errorf("compare --run: %w after %s", ErrInterrupted, strings.Join(o.Libs[:len(results)], ", "))
	case len(failed) > 0:
		return fmt.Errorf("compare --run: %w: %s (%d of %d)", ErrProgramFailed, strings.Join(failed, ", "), len(failed), len(o.Libs))
	}
	return nil
}

// judge parses a program's stdout and says why it failed, or "" when it
// exited 0 with a summary. A summary is returned whenever one was found,
// also from a program that failed after printing it.
func judge(out *outcome) (*report.Parsed, string) {
	p, perr := report.ParseSummary(bytes.NewReader(out.stdout.text()))
	if perr != nil {
		p = nil
	}
	switch {
	case out.failure != "":
		return p, out.failure
	case out.exitCode != 0:
		return p, fmt.Sprintf("exit code %d", out.exitCode)
	case perr != nil:
		return nil, fmt.Sprintf("exit code 0 but no usable summary: %v", perr)
	}
	return p, ""
}

// warn explains a failed program on stderr, with the end of its stderr.
func warn(w io.Writer, name, why string, out *outcome, inTable bool) {
	if inTable {
		fmt.Fprintf(w, "epbench: warning: ep-lib=%s failed (%s) after printing its summary; in the table as %s*\n", name, why, name)
	} else {
		fmt.Fprintf(w, "epbench: warning: ep-lib=%s failed (%s); left out of the table\n", name, why)
	}
	lines := out.stderr.lastLines(stderrLines)
	if len(lines) == 0 {
		fmt.Fprintf(w, "epbench: warning: ep-lib=%s wrote nothing to stderr\n", name)
		return
	}
	fmt.Fprintf(w, "epbench: warning: last lines of its stderr:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "  | %s\n", l)
	}
}

// writeJSON writes every program's result. A summary holding numbers JSON
// cannot carry (a parsed "nan") is left out with a note.
func writeJSON(w io.Writer, o *Options, results []result) error {
	for i := range results {
		if results[i].Summary == nil {
			continue
		}
		if _, err := json.Marshal(results[i].Summary); err != nil {
			results[i].Summary = nil
			note := "summary left out: it holds numbers JSON cannot carry"
			if results[i].Error != "" {
				note = results[i].Error + "; " + note
			}
			results[i].Error = note
		}
	}
	nodes := o.Nodes
	if nodes == nil {
		nodes = []string{}
	}
	b, err := json.MarshalIndent(runFile{Schema: Schema, Problem: o.Problem, Nodes: nodes,
		RanksPerNode: o.RanksPerNode, Ranks: o.Ranks(), Results: results}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
