package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gplot "gonum.org/v1/plot"

	"github.com/epbench/epbench/report"
)

var keep = flag.String("keep", "", "also write the test pictures into this directory, to look at them")

// outDir is where a test writes its pictures: -keep's directory, or the
// test's own.
func outDir(t *testing.T) string {
	t.Helper()
	if *keep != "" {
		return *keep
	}
	return t.TempDir()
}

// sweepSeries is a 9-point sweep shaped like LL on two H200s.
func sweepSeries(label string, scale float64) Series {
	s := Series{Label: label, Sweep: true}
	for _, t := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		f := float64(t)
		s.Points = append(s.Points, Point{Tokens: t,
			HostDispatch: scale * (18 + f/8), HostCombine: scale * (17 + f/10),
			KernelDispatch: scale * (8.5 + f/10), KernelCombine: scale * (9 + f/12)})
	}
	return s
}

func loadRefs(t *testing.T, label string) Series {
	t.Helper()
	var all []Series
	for _, name := range []string{"ll_t1_i50.ep_bench.out", "ll_t32_i50.ep_bench.out", "ll_t128_i50.ep_bench.out"} {
		s, err := Load(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		s.Label = label
		all = appendSeries(all, s)
	}
	if len(all) != 1 || len(all[0].Points) != 3 || all[0].Sweep {
		t.Fatalf("three ep_bench outputs of one label should make one series of points: %+v", all)
	}
	return all[0]
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

func count(texts []string, s string) int {
	n := 0
	for _, t := range texts {
		if t == s {
			n++
		}
	}
	return n
}

func TestLoadEpBenchOutput(t *testing.T) {
	ref, err := Load("testdata/ll_t128_i50.ep_bench.out")
	if err != nil {
		t.Fatal(err)
	}
	want := Point{Tokens: 128, HostDispatch: 40.40, HostCombine: 49.14, KernelDispatch: 32.06, KernelCombine: 41.67}
	if ref.Label != "ll_t128_i50.ep_bench" || ref.Sweep || len(ref.Points) != 1 || ref.Points[0] != want {
		t.Fatalf("Load = %+v, want one point %+v", ref, want)
	}
}

func TestLoadSweepJSON(t *testing.T) {
	sw := &report.Sweep{Varying: report.VaryTokens}
	for i, tok := range []int{1, 8} {
		r := &report.Result{Config: report.Config{Tokens: tok, TopK: 8, Experts: 256}}
		r.Summary.Host.Dispatch.LatencyUS.Avg = 20 + float64(i)
		r.Summary.Host.Combine.LatencyUS.Avg = 30 + float64(i)
		if i == 1 {
			r.Summary.Kernel = &report.KernelPerf{}
			r.Summary.Kernel.Dispatch.LatencyUS.Avg, r.Summary.Kernel.Combine.LatencyUS.Avg = 9, 10
		}
		sw.Points = append(sw.Points, report.SweepPoint{Tokens: tok, TopK: 8, Experts: 256, Result: r})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ep2.json")
	var b bytes.Buffer
	if err := report.WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Label != "ep2" || !s.Sweep || len(s.Points) != 2 || s.Points[1].Tokens != 8 || s.Points[1].KernelCombine != 10 ||
		s.Points[0].HostCombine != 30 || !math.IsNaN(s.Points[0].KernelDispatch) {
		t.Fatalf("Load = %+v", s)
	}

	sw.Varying = report.VaryTopK
	b.Reset()
	if err := report.WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "sweep over top_k") {
		t.Errorf("a top-k sweep: %v, want a usage error", err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"schema": "epbench.sweep/v1", "varying": "tokens", "points": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(broken); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "no points") {
		t.Errorf("a sweep without points: %v, want a usage error saying so", err)
	}
}

// The picture of the README: a sweep with kernel numbers, one without, and
// ep_bench's single sizes as points. Run with -keep DIR to look at it.
func TestLatencySVGHasEverySeries(t *testing.T) {
	dir := outDir(t)
	noKernel := sweepSeries("cpu", 1.3)
	for i := range noKernel.Points {
		noKernel.Points[i].KernelDispatch, noKernel.Points[i].KernelCombine = math.NaN(), math.NaN()
	}
	inputs := []Series{sweepSeries("epbench", 1), noKernel, loadRefs(t, "ep_bench")}
	for _, name := range []string{"latency.svg", "latency.png"} {
		if err := Latency(inputs, "EP2 test plot", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	texts := svgTexts(t, filepath.Join(dir, "latency.svg"))
	for _, want := range []string{"EP2 test plot", "tokens per rank", "latency (us)",
		"epbench host dispatch", "epbench host combine", "epbench kernel dispatch", "epbench kernel combine",
		"cpu host dispatch", "cpu host combine",
		"ep_bench host dispatch", "ep_bench host combine", "ep_bench kernel dispatch", "ep_bench kernel combine",
		"1", "2", "4", "8", "16", "32", "64", "128", "256"} {
		if count(texts, want) != 1 {
			t.Errorf("SVG has %q %d times, want once", want, count(texts, want))
		}
	}
	for _, absent := range []string{"cpu kernel dispatch", "cpu kernel combine", "512"} {
		if count(texts, absent) != 0 {
			t.Errorf("SVG has %q", absent)
		}
	}
}

func TestLatencyPNG(t *testing.T) {
	dir := outDir(t)
	out := filepath.Join(dir, "sweep.png")
	if err := Latency([]Series{sweepSeries("epbench", 1)}, "png", out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 700 || b.Dx() > 900 || b.Dy() < 400 {
		t.Errorf("PNG of %dx%d pixels, want about 770x480", b.Dx(), b.Dy())
	}
}

// Latencies over more than logRatio get a logarithmic axis, labelled at
// powers of ten; token counts that are not powers of two label themselves.
func TestLatencyWideRange(t *testing.T) {
	dir := outDir(t)
	wide := Series{Label: "cpu", Sweep: true, Points: []Point{
		{Tokens: 3, HostDispatch: 40, HostCombine: 50, KernelDispatch: math.NaN(), KernelCombine: math.NaN()},
		{Tokens: 24, HostDispatch: 900, HostCombine: 1000, KernelDispatch: math.NaN(), KernelCombine: math.NaN()},
		{Tokens: 200, HostDispatch: 9000, HostCombine: 12000, KernelDispatch: math.NaN(), KernelCombine: math.NaN()},
	}}
	out := filepath.Join(dir, "wide.svg")
	for _, o := range []string{out, filepath.Join(dir, "wide.png")} {
		if err := Latency([]Series{wide}, "wide", o); err != nil {
			t.Fatal(err)
		}
	}
	texts := svgTexts(t, out)
	for _, want := range []string{"100", "1000", "10000", "3", "24", "200"} {
		if count(texts, want) == 0 {
			t.Errorf("SVG lacks the tick label %q", want)
		}
	}
	if count(texts, "64") != 0 {
		t.Error("token counts that are not powers of two should not get power-of-two ticks")
	}
	if count(texts, "0") != 0 {
		t.Error("a logarithmic axis has no 0")
	}
}

// Many inputs put the legend beside the plot; every entry is still there.
func TestLatencyManyInputs(t *testing.T) {
	dir := outDir(t)
	var inputs []Series
	for i := range 8 {
		inputs = append(inputs, sweepSeries(string(rune('a'+i)), 1+float64(i)/10))
	}
	out := filepath.Join(dir, "many.svg")
	for _, o := range []string{out, filepath.Join(dir, "many.png")} {
		if err := Latency(inputs, "many", o); err != nil {
			t.Fatal(err)
		}
	}
	texts := svgTexts(t, out)
	for i := range 8 {
		if n := count(texts, string(rune('a'+i))+" kernel combine"); n != 1 {
			t.Errorf("input %d's kernel combine in the legend %d times", i, n)
		}
	}
}

func TestTicks(t *testing.T) {
	labels := func(ts []gplot.Tick) string {
		var s []string
		for _, t := range ts {
			if t.Label != "" {
				s = append(s, t.Label)
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		name string
		got  []gplot.Tick
		want string
	}{
		{"powers of two", tokenTicks{present: []float64{1, 128}}.Ticks(0.7, 180), "1 2 4 8 16 32 64 128"},
		{"counts present", tokenTicks{present: []float64{3, 24, 25, 200}}.Ticks(2, 280), "3 24 200"},
		{"linear", linearTicks{}.Ticks(0, 62), "0 10 20 30 40 50 60"},
		{"linear small", linearTicks{}.Ticks(0, 0.9), "0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9"},
		{"linear empty", linearTicks{}.Ticks(5, 5), ""},
		{"log dense", logTicks{}.Ticks(8, 120), "10 20 50 100"},
		{"log sparse", logTicks{}.Ticks(3, 2e5), "10 100 1000 10000 100000"},
		{"log empty", logTicks{}.Ticks(0, 10), ""},
	} {
		if got := labels(tc.got); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLatencyRejects(t *testing.T) {
	dir := t.TempDir()
	nan := Series{Label: "x", Points: []Point{{Tokens: 4, HostDispatch: math.NaN(), HostCombine: math.NaN(), KernelDispatch: math.NaN(), KernelCombine: math.NaN()}}}
	for _, tc := range []struct {
		name   string
		inputs []Series
		out    string
		msg    string
	}{
		{"jpg", []Series{sweepSeries("a", 1)}, "x.jpg", "written as .svg or .png"},
		{"no extension", []Series{sweepSeries("a", 1)}, "x", "written as .svg or .png"},
		{"no inputs", nil, "x.svg", "nothing to plot"},
		{"no numbers", []Series{nan}, "x.svg", "no latency numbers"},
		{"no points", []Series{{Label: "empty"}}, "x.png", "no latency numbers"},
	} {
		out := filepath.Join(dir, tc.out)
		err := Latency(tc.inputs, "", out)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want a usage error saying %q", tc.name, err, tc.msg)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%s: %s was written", tc.name, tc.out)
		}
	}
	missing := filepath.Join(dir, "missing", "x.svg")
	err := Latency([]Series{sweepSeries("a", 1)}, "", missing)
	if err == nil || errors.Is(err, ErrUsage) || err.Error() != "plot: open "+missing+": no such file or directory" {
		t.Errorf("unwritable output: %v, want a runtime error with the plot: prefix", err)
	}
}

// -o is checked before any input is read: a typo in it is found at once,
// whatever the inputs.
func TestMainChecksOutputFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "p.svg")
	for _, args := range [][]string{
		{"testdata/ll_t32_i50.ep_bench.out", "-o", missing},
		{filepath.Join(dir, "no-such-input.out"), "-o", missing},
	} {
		err := Main(args, io.Discard)
		want := "plot: -o: cannot create " + missing + ": no folder " + filepath.Dir(missing)
		if !errors.Is(err, ErrUsage) || err.Error() != want {
			t.Errorf("Main(%q) = %v, want %q", args, err, want)
		}
	}
	if err := Main([]string{"testdata/ll_t32_i50.ep_bench.out", "-o", dir}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "written as .svg or .png") {
		t.Errorf("a folder as -o: %v", err)
	}
}

// Impossible numbers are refused, naming the file and the line or the
// sweep point, instead of the series being left out of the picture.
func TestLoadRejectsImpossibleNumbers(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/ll_t32_i50.ep_bench.out")
	if err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "nan.out")
	if err := os.WriteFile(text, bytes.Replace(src, []byte("avg=30.56 us"), []byte("avg=nan us"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(text); !errors.Is(err, ErrUsage) || !strings.HasPrefix(fmt.Sprint(err), "plot: "+text+": report: malformed summary: line ") ||
		!strings.Contains(fmt.Sprint(err), `impossible value "nan"`) {
		t.Errorf("nan in a summary: %v", err)
	}

	sw := &report.Sweep{Varying: report.VaryTokens}
	for i, tok := range []int{1, 8} {
		r := &report.Result{Config: report.Config{Tokens: tok, TopK: 8, Experts: 256}}
		r.Summary.Host.Dispatch.LatencyUS.Avg = 20
		r.Summary.Host.Combine.LatencyUS.Avg = 30 - 40*float64(i)
		sw.Points = append(sw.Points, report.SweepPoint{Tokens: tok, TopK: 8, Experts: 256, Result: r})
	}
	var b bytes.Buffer
	if err := report.WriteSweepJSON(&b, sw); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "neg.json")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	want := "plot: " + path + ": point 2 (tokens 8): host.combine.latency_us.avg = -10: impossible value"
	if !errors.Is(err, ErrUsage) || fmt.Sprint(err) != want {
		t.Errorf("a negative time in a sweep: %v, want %q", err, want)
	}
	if err := Main([]string{path, "-o", filepath.Join(dir, "p.svg")}, io.Discard); fmt.Sprint(err) != want {
		t.Errorf("Main: %v, want %q", err, want)
	}
}

func TestMain(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "p.svg")
	var stdout bytes.Buffer
	err := Main([]string{"testdata/ll_t128_i50.ep_bench.out", "testdata/ll_t32_i50.ep_bench.out",
		"--label", "ep_bench", "--label", "ep_bench", "-o", out, "--title", "two sizes"}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "wrote "+out+"\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	texts := svgTexts(t, out)
	if count(texts, "ep_bench host dispatch") != 1 || count(texts, "two sizes") != 1 {
		t.Errorf("inputs of one label should make one series:\n%s", texts)
	}
	stdout.Reset()
	if err := Main([]string{"--help"}, &stdout); err != nil || !strings.Contains(stdout.String(), "usage: epbench plot") {
		t.Errorf("--help: %v, %q", err, stdout.String())
	}

	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("no summary"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"testdata/ll_t32_i50.ep_bench.out"}, "-o FILE is required"},
		{[]string{"-o", out}, "no inputs"},
		{[]string{junk, "-o", out}, "junk.txt"},
		{[]string{filepath.Join(dir, "missing"), "-o", out}, "no such file"},
		{[]string{"--bogus", "-o", out}, "unknown flag: --bogus"},
		{[]string{"--label", "a", "--label", "b", "testdata/ll_t32_i50.ep_bench.out", "-o", out}, "--label given 2 times for 1 inputs"},
		{[]string{"--label", "", "testdata/ll_t32_i50.ep_bench.out", "-o", out}, "empty --label"},
		{[]string{"testdata/ll_t32_i50.ep_bench.out", "-o", filepath.Join(dir, "p.pdf")}, "written as .svg or .png"},
	} {
		if err := Main(tc.args, io.Discard); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Main(%q) = %v, want a usage error saying %q", tc.args, err, tc.msg)
		}
	}
}
