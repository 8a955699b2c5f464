package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseSummary feeds arbitrary bytes to the parser: it must return a
// result or one of its errors, never panic, and whatever it accepts must be
// printable as a summary.
func FuzzParseSummary(f *testing.F) {
	for _, dir := range []string{"reference", "formats"} {
		paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.out"))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseSummary(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrNoSummary) && !errors.Is(err, ErrBadSummary) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if p.Summary.Kernel == nil && p.Summary.KernelNote == "" {
			p.Summary.KernelNote = "none"
		}
		var b bytes.Buffer
		if err := WriteSummary(&b, p.Summary); err != nil {
			t.Fatalf("accepted input cannot be printed: %v", err)
		}
		if err := WriteCompare(&b, []*Parsed{p, p}, CompareOptions{KernelOnly: true}); err != nil {
			t.Fatalf("accepted input cannot be compared: %v", err)
		}
	})
}
