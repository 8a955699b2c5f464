package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sweepSeries() Series {
	s := Series{Label: "epbench"}
	for _, t := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		f := float64(t)
		s.Points = append(s.Points, Point{Tokens: t, HostDispatch: 15 + f/10, HostCombine: 14 + f/12,
			KernelDispatch: 9 + f/10, KernelCombine: 8 + f/12})
	}
	return s
}

// svgTexts returns every text node of an SVG document, failing on invalid XML.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	sawSVG := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not valid XML: %v", path, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			sawSVG = sawSVG || v.Name.Local == "svg"
		case xml.CharData:
			if s := strings.TrimSpace(string(v)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if !sawSVG {
		t.Fatalf("%s has no <svg> element", path)
	}
	return texts
}

func TestLatencySVGHasEverySeries(t *testing.T) {
	ref, err := Load("testdata/ll_t128_i50.ep_bench.out")
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Points) != 1 || ref.Points[0].Tokens != 128 || ref.Points[0].KernelCombine != 41.67 {
		t.Fatalf("reference point: %+v", ref.Points)
	}
	out := filepath.Join(t.TempDir(), "latency.svg")
	if err := Latency([]Series{sweepSeries(), ref}, "test plot", out); err != nil {
		t.Fatal(err)
	}
	texts := strings.Join(svgTexts(t, out), "\n")
	for _, want := range []string{"test plot", "tokens per rank", "latency (us)",
		"epbench host dispatch", "epbench host combine", "epbench kernel dispatch", "epbench kernel combine",
		ref.Label + " host dispatch", ref.Label + " kernel combine", "256"} {
		if !strings.Contains(texts, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestLatencyPNG(t *testing.T) {
	out := filepath.Join(t.TempDir(), "latency.png")
	if err := Latency([]Series{sweepSeries()}, "png", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
		t.Fatalf("not a PNG (%d bytes)", len(b))
	}
}

func TestLatencyRejects(t *testing.T) {
	dir := t.TempDir()
	if err := Latency([]Series{sweepSeries()}, "", filepath.Join(dir, "x.jpg")); !errors.Is(err, ErrUsage) {
		t.Errorf(".jpg accepted: %v", err)
	}
	if err := Latency(nil, "", filepath.Join(dir, "x.svg")); !errors.Is(err, ErrUsage) {
		t.Errorf("no inputs accepted: %v", err)
	}
	nan := Series{Label: "x", Points: []Point{{Tokens: 4, HostDispatch: math.NaN(), HostCombine: math.NaN(), KernelDispatch: math.NaN(), KernelCombine: math.NaN()}}}
	if err := Latency([]Series{nan}, "", filepath.Join(dir, "x.svg")); !errors.Is(err, ErrUsage) {
		t.Errorf("input without numbers accepted: %v", err)
	}
}

func TestMain(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "p.svg")
	var stdout bytes.Buffer
	err := Main([]string{"testdata/ll_t128_i50.ep_bench.out", "testdata/ll_t32_i50.ep_bench.out",
		"--label", "ep_bench", "--label", "ep_bench", "-o", out}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Join(svgTexts(t, out), "\n")
	if strings.Count(texts, "ep_bench host dispatch") != 1 {
		t.Errorf("inputs of one label should make one series:\n%s", texts)
	}
	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("no summary"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"testdata/ll_t32_i50.ep_bench.out"},
		{"-o", out},
		{junk, "-o", out},
		{filepath.Join(dir, "missing"), "-o", out},
		{"--bogus", "-o", out},
		{"--label", "a", "--label", "b", "testdata/ll_t32_i50.ep_bench.out", "-o", out},
	} {
		if err := Main(args, io.Discard); !errors.Is(err, ErrUsage) {
			t.Errorf("Main(%q) = %v, want a usage error", args, err)
		}
	}
}
