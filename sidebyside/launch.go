package sidebyside

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// isRoot reports whether mpirun needs --allow-run-as-root.
var isRoot = func() bool { return os.Geteuid() == 0 }

// hostfile is the Open MPI hostfile of a run on named nodes: one line per
// node with its slots.
type hostfile struct {
	path  string
	lines []string
}

func newHostfile(o *Options, path string) *hostfile {
	if len(o.Nodes) == 0 {
		return nil
	}
	h := &hostfile{path: path}
	for _, n := range o.Nodes {
		h.lines = append(h.lines, fmt.Sprintf("%s slots=%d", n, o.RanksPerNode))
	}
	return h
}

// String is a shell command that writes the hostfile, for --dry-run and
// for the log of a real run.
func (h *hostfile) String() string {
	words := []string{"printf", shellQuote(`%s\n`)}
	for _, l := range h.lines {
		words = append(words, shellQuote(l))
	}
	return strings.Join(words, " ") + " > " + shellQuote(h.path)
}

// write creates the hostfile at a fresh temporary path.
func (h *hostfile) write() error {
	f, err := os.CreateTemp("", "epbench-hostfile-*")
	if err != nil {
		return fmt.Errorf("hostfile: %w", err)
	}
	h.path = f.Name()
	_, err = f.WriteString(strings.Join(h.lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(h.path)
		return fmt.Errorf("hostfile: %w", err)
	}
	return nil
}

func (h *hostfile) remove() { os.Remove(h.path) }

// hpcxEnv is what HPC-X's hpcx_load sets for Open MPI and UCX, without
// sourcing its script: OPAL_PREFIX, then its bin and lib folders that exist
// in front of PATH and LD_LIBRARY_PATH.
func hpcxEnv(env *environment, dir string) {
	existing := func(rels ...string) []string {
		var out []string
		for _, r := range rels {
			p := filepath.Join(dir, r)
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				out = append(out, p)
			}
		}
		return out
	}
	env.set("OPAL_PREFIX", filepath.Join(dir, "ompi"))
	env.prepend("PATH", existing("ompi/bin", "ucx/bin", "ucc/bin", "hcoll/bin", "sharp/bin")...)
	env.prepend("LD_LIBRARY_PATH", existing("ompi/lib", "ucx/lib", "ucx/lib/ucx", "ucc/lib", "ucc/lib/ucc",
		"hcoll/lib", "sharp/lib")...)
}

// command builds the launch of program p: mpirun with the seed driver's
// options (one rank per slot, no binding, ob1 over shared memory and TCP,
// no HCOLL or UCC collectives), -x for every variable the ranks need, then
// the argv of every rank. hf is nil on this node alone.
// A standalone program's command is its own launch with the same
// NCCL_NVLS_ENABLE=0, without mpirun or HPC-X.
func (o *Options) command(p Program, hf *hostfile, lookup func(string) (string, bool)) Command {
	env := newEnvironment(lookup)
	if s, ok := p.(standalone); ok {
		env.set("NCCL_NVLS_ENABLE", "0")
		argv := s.Launch(o, env)
		return Command{Env: env.assignments(), Argv: argv}
	}
	if o.HPCX != "" {
		hpcxEnv(env, o.HPCX)
	}
	env.set("NCCL_NVLS_ENABLE", "0")
	rank := p.Rank(o, env)

	argv := []string{o.MPIRun}
	if isRoot() {
		argv = append(argv, "--allow-run-as-root")
	}
	argv = append(argv, "-np", strconv.Itoa(o.Ranks()))
	if hf != nil {
		argv = append(argv, "--hostfile", hf.path)
	}
	argv = append(argv,
		"--map-by", "ppr:"+strconv.Itoa(o.RanksPerNode)+":node",
		"--bind-to", "none",
		"-mca", "pml", "ob1",
		"-mca", "btl", "self,vader,tcp")
	if o.Iface != "" {
		argv = append(argv, "-mca", "btl_tcp_if_include", o.Iface)
	}
	argv = append(argv,
		"-mca", "coll_hcoll_enable", "0",
		"-mca", "coll_ucc_enable", "0")
	argv = append(argv, o.MPIRunArgs...)

	forward := []string{}
	seen := map[string]bool{}
	for _, n := range append([]string{"LD_LIBRARY_PATH", "PATH"}, env.names...) {
		if _, ok := env.get(n); ok && !seen[n] {
			seen[n] = true
			forward = append(forward, n)
		}
	}
	for _, n := range forward {
		argv = append(argv, "-x", n)
	}
	argv = append(argv, rank...)
	return Command{Env: env.assignments(), Argv: argv}
}
