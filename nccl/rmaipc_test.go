package nccl

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRMAPluginBuilds compiles the one-node RMA plugin (testdata/rmaipc, the
// stand-in network that lets NCCL's proxy GIN run without an RDMA NIC) with
// scripts/rma-plugin.sh, as a GPU node would, and checks that it exports the
// table NCCL looks up. The plugin only runs on GPU nodes; this keeps it
// compiling, warning-free, everywhere else.
func TestRMAPluginBuilds(t *testing.T) {
	home := cudaHomeFromCgo(t)
	out := filepath.Join(t.TempDir(), "librma-ipc.so")
	cmd := exec.Command(filepath.Join("..", "scripts", "rma-plugin.sh"), out)
	cmd.Env = append(os.Environ(), "CUDA_HOME="+home)
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("scripts/rma-plugin.sh %s with CUDA_HOME=%s: %v\n%s", out, home, err, stderr)
	}
	if want := "export NCCL_RMA_PLUGIN=" + out + "\n"; string(stdout) != want {
		t.Errorf("scripts/rma-plugin.sh printed %q; want %q", stdout, want)
	}

	syms, err := exec.Command("nm", "-D", "--defined-only", out).CombinedOutput()
	if err != nil {
		t.Fatalf("nm -D %s: %v\n%s", out, err, syms)
	}
	for _, line := range strings.Split(string(syms), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "ncclRmaPlugin_v14" {
			if f[1] != "D" && f[1] != "R" {
				t.Fatalf("ncclRmaPlugin_v14 has symbol type %s; want a data object (D or R)", f[1])
			}
			return
		}
	}
	t.Fatalf("%s does not export ncclRmaPlugin_v14; nm -D --defined-only:\n%s", out, syms)
}

// TestRMAPluginBehaviours runs testdata/rmaipc/plugin_check.c: the plugin
// built with a host-memory stand-in for the CUDA driver calls it makes, one
// rank putting to itself. It checks the behaviours the kernels' ordering is
// tested against (an unsignalled put held back for exactly the delay's
// progress passes, held puts run newest first, run before a strong signal or
// a signal without data and not before a weak signal with its own put), and
// that deregistering a window runs the puts held into or out of it (or fails
// them where it cannot), so that none runs after its owner freed it (which
// crashes the check).
func TestRMAPluginBehaviours(t *testing.T) {
	home := cudaHomeFromCgo(t)
	bin := filepath.Join(t.TempDir(), "plugin_check")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	build := exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-I"+filepath.Join(home, "include"),
		filepath.Join("testdata", "rmaipc", "plugin_check.c"), "-o", bin, "-lpthread")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	// stdout says ok or what failed; the plugin's warnings go to stderr. A
	// plugin that deadlocks (its progress thread against a deregistration)
	// fails here instead of holding the test run.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, bin)
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if ctx.Err() != nil {
		t.Fatalf("plugin_check did not finish within 60 s (a deadlock?)\n%s\nstderr:\n%s", out, stderr.String())
	}
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("plugin_check: %v\n%s\nstderr:\n%s", err, out, stderr.String())
	}
}

// cudaHomeFromCgo returns the CUDA tree of the first -I directory in
// CGO_CFLAGS that holds cuda.h with the link stub beside it
// (../lib64/stubs/libcuda.so), as the Makefile sets them up. It skips the
// test when no include directory has cuda.h.
func cudaHomeFromCgo(t *testing.T) string {
	t.Helper()
	flags := strings.Fields(os.Getenv("CGO_CFLAGS"))
	var headers []string
	for i, f := range flags {
		dir, ok := strings.CutPrefix(f, "-I")
		if ok && dir == "" && i+1 < len(flags) {
			dir = flags[i+1]
		}
		if !ok || dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cuda.h")); err != nil {
			continue
		}
		headers = append(headers, dir)
		home := filepath.Dir(filepath.Clean(dir))
		if _, err := os.Stat(filepath.Join(home, "lib64", "stubs", "libcuda.so")); err == nil {
			return home
		}
	}
	if len(headers) == 0 {
		t.Skipf("SKIPPED: no cuda.h in the include directories of CGO_CFLAGS=%q: the RMA plugin was not compiled "+
			"(make test sets CGO_CFLAGS; `make deps` extracts the CUDA headers)", os.Getenv("CGO_CFLAGS"))
	}
	t.Fatalf("cuda.h found in %s, but none has lib64/stubs/libcuda.so beside it to link the RMA plugin against",
		strings.Join(headers, ", "))
	return ""
}
