package sidebyside

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

var lookPath = exec.LookPath

// Limits on what is kept of a program's output while it streams through:
// the summary sits near the end of stdout, and a failure is explained by
// the end of stderr.
const (
	keepStdout    = 16 << 20
	keepStderr    = 64 << 10
	stderrLines   = 15
	noExitCode    = -1
	maxLineOutput = 400 // characters of one stderr line quoted in a warning
)

// tail keeps the last limit bytes written to it.
type tail struct {
	limit int
	buf   []byte
	cut   bool // something was dropped
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		t.cut = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// text is what was kept, starting at a line boundary once something was
// dropped.
func (t *tail) text() []byte {
	if t.cut {
		if i := bytes.IndexByte(t.buf, '\n'); i >= 0 {
			return t.buf[i+1:]
		}
	}
	return t.buf
}

// lastLines returns up to n non-empty last lines.
func (t *tail) lastLines(n int) []string {
	var out []string
	lines := strings.Split(string(t.text()), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		l := strings.TrimRight(lines[i], "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(l) > maxLineOutput {
			l = l[:maxLineOutput] + "..."
		}
		out = append(out, l)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// outcome is what one program's launch left behind.
type outcome struct {
	exitCode int    // noExitCode when it did not start or was killed
	failure  string // why it did not exit normally, if it did not
	stdout   tail
	stderr   tail
}

// execute runs c, streaming its stdout and stderr to epbench's while
// keeping their ends. SIGINT and SIGTERM reach the child (mpirun forwards
// them to the ranks) and epbench waits for it, so a hostfile is still
// removed; interrupted reports whether one arrived.
func execute(c Command, stdout, stderr io.Writer) (out *outcome, interrupted bool) {
	out = &outcome{exitCode: noExitCode, stdout: tail{limit: keepStdout}, stderr: tail{limit: keepStderr}}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = c.environ(os.Environ())
	cmd.Stdin = nil
	cmd.Stdout = io.MultiWriter(stdout, &out.stdout)
	cmd.Stderr = io.MultiWriter(stderr, &out.stderr)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		out.failure = fmt.Sprintf("did not start: %v", err)
		return out, false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	for waiting := true; waiting; {
		select {
		case s := <-sigs:
			interrupted = true
			cmd.Process.Signal(s)
		case err = <-done:
			waiting = false
		}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		out.exitCode = 0
	case errors.As(err, &ee):
		out.exitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.failure = fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
	default:
		out.failure = err.Error()
	}
	return out, interrupted
}
