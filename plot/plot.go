// Package plot draws latency against tokens per rank from sweep results and
// single summaries (epbench's or ep_bench's), with gonum.org/v1/plot.
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/epbench/epbench/report"
)

// Point is one measured size.
type Point struct {
	Tokens int
	// Host and kernel averages in microseconds; NaN when absent.
	HostDispatch, HostCombine, KernelDispatch, KernelCombine float64
}

// Series is one input: a sweep (several points) or a single summary.
type Series struct {
	Label  string
	Points []Point
}

// ErrUsage marks errors in the command line or the inputs (exit 2).
var ErrUsage = errors.New("plot")

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// metric is one of the four latency curves of an input.
type metric struct {
	name   string
	get    func(Point) float64
	dashes []vg.Length
}

var metrics = []metric{
	{"host dispatch", func(p Point) float64 { return p.HostDispatch }, nil},
	{"host combine", func(p Point) float64 { return p.HostCombine }, []vg.Length{vg.Points(6), vg.Points(3)}},
	{"kernel dispatch", func(p Point) float64 { return p.KernelDispatch }, []vg.Length{vg.Points(2), vg.Points(2)}},
	{"kernel combine", func(p Point) float64 { return p.KernelCombine }, []vg.Length{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}},
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// powersOfTwo labels the tokens axis at the powers of two in its range.
type powersOfTwo struct{}

func (powersOfTwo) Ticks(min, max float64) []gplot.Tick {
	var ticks []gplot.Tick
	for v := 1.0; v <= max*1.0001; v *= 2 {
		if v >= min*0.9999 {
			ticks = append(ticks, gplot.Tick{Value: v, Label: fmt.Sprintf("%d", int(v))})
		}
	}
	return ticks
}

// Latency writes the latency-against-tokens plot of the inputs to out
// (.svg or .png).
func Latency(inputs []Series, title, out string) error {
	ext := strings.ToLower(filepath.Ext(out))
	if ext != ".svg" && ext != ".png" {
		return usagef("-o %s: the plot is written as .svg or .png", out)
	}
	if len(inputs) == 0 {
		return usagef("nothing to plot")
	}
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = "tokens per rank"
	p.Y.Label.Text = "latency (us)"
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = powersOfTwo{}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())
	xmin, xmax, ymax := math.Inf(1), 0.0, 0.0
	for i, in := range inputs {
		col := palette[i%len(palette)]
		pts := append([]Point(nil), in.Points...)
		sort.Slice(pts, func(a, b int) bool { return pts[a].Tokens < pts[b].Tokens })
		for mi, m := range metrics {
			var xys plotter.XYs
			for _, pt := range pts {
				v := m.get(pt)
				if pt.Tokens <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(pt.Tokens), Y: v})
				xmin, xmax, ymax = math.Min(xmin, float64(pt.Tokens)), math.Max(xmax, float64(pt.Tokens)), math.Max(ymax, v)
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color = col
			sc.GlyphStyle.Radius = vg.Points(3)
			sc.GlyphStyle.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}[mi]
			name := in.Label + " " + m.name
			if len(xys) > 1 {
				ln, err := plotter.NewLine(xys)
				if err != nil {
					return err
				}
				ln.Color = col
				ln.Width = vg.Points(1.5)
				ln.Dashes = m.dashes
				p.Add(ln, sc)
				p.Legend.Add(name, ln, sc)
			} else {
				p.Add(sc)
				p.Legend.Add(name, sc)
			}
		}
	}
	if xmax == 0 {
		return usagef("no latency numbers in the inputs")
	}
	// Room around single sizes on the log axis, and above the highest curve
	// for the legend.
	p.X.Min, p.X.Max = math.Max(0.5, xmin/1.5), xmax*1.5
	p.Y.Max = ymax * 1.45
	return p.Save(8*vg.Inch, 5*vg.Inch, out)
}

// Load reads one input: a sweep JSON, or a single summary that report
// parses (epbench text or JSON, ep_bench outputs, the Python benchmark's).
func Load(path string) (Series, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Series{}, usagef("%v", err)
	}
	label := report.LabelFromPath(path)
	if sw, err := report.ParseSweep(strings.NewReader(string(b))); err == nil {
		s := Series{Label: label}
		for _, pt := range sw.Points {
			s.Points = append(s.Points, pointOf(pt.Tokens, pt.Result.Summary))
		}
		return s, nil
	}
	p, err := report.ParseSummary(strings.NewReader(string(b)))
	if err != nil {
		return Series{}, usagef("%s: %v", path, err)
	}
	if p.Config == nil || p.Config.Tokens <= 0 {
		return Series{}, usagef("%s: the summary does not say how many tokens it ran", path)
	}
	return Series{Label: label, Points: []Point{pointOf(p.Config.Tokens, p.Summary)}}, nil
}

func pointOf(tokens int, s report.Summary) Point {
	pt := Point{Tokens: tokens, HostDispatch: s.Host.Dispatch.LatencyUS.Avg, HostCombine: s.Host.Combine.LatencyUS.Avg,
		KernelDispatch: math.NaN(), KernelCombine: math.NaN()}
	if s.Kernel != nil {
		pt.KernelDispatch, pt.KernelCombine = s.Kernel.Dispatch.LatencyUS.Avg, s.Kernel.Combine.LatencyUS.Avg
	}
	return pt
}

const usage = `usage: epbench plot INPUT [INPUT ...] -o latency.svg|latency.png [--title T] [--label NAME ...]

Draws latency (us) against tokens per rank: host and kernel dispatch and
combine, one colour per input. Inputs: epbench sweep --json files (curves), and
single summaries (points): epbench text or --json output, ep_bench outputs.
--label names the inputs in order (default: file name without extension).
`

// Main runs `epbench plot`.
func Main(args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("plot", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.StringP("output", "o", "", "")
	title := fs.String("title", "EP low-latency dispatch and combine", "")
	labels := fs.StringArray("label", nil, "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	if *help {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if *out == "" {
		return usagef("-o FILE is required (.svg or .png)")
	}
	if fs.NArg() == 0 {
		return usagef("no inputs (see epbench plot --help)")
	}
	if len(*labels) > fs.NArg() {
		return usagef("--label given %d times for %d inputs", len(*labels), fs.NArg())
	}
	var series []Series
	for i, path := range fs.Args() {
		s, err := Load(path)
		if err != nil {
			return err
		}
		if i < len(*labels) {
			s.Label = (*labels)[i]
		}
		series = appendSeries(series, s)
	}
	if err := Latency(series, *title, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

// appendSeries adds s, merging it into an earlier input of the same label
// (several single-size outputs of one tool make one series).
func appendSeries(all []Series, s Series) []Series {
	for i := range all {
		if all[i].Label == s.Label {
			all[i].Points = append(all[i].Points, s.Points...)
			return all
		}
	}
	return append(all, s)
}
