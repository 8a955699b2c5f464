// Package plot draws latency against tokens per rank from sweep results and
// single summaries (epbench's or ep_bench's), with gonum.org/v1/plot.
package plot

import (
	"bytes"
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
	// Host and kernel averages over ranks in microseconds; NaN when absent.
	HostDispatch, HostCombine, KernelDispatch, KernelCombine float64
}

// Series is one input: the points of a sweep, drawn joined by lines, or
// single summaries, drawn as points.
type Series struct {
	Label  string
	Sweep  bool
	Points []Point
}

// ErrUsage marks errors in the command line or the inputs (exit 2).
var ErrUsage = errors.New("plot")

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Size of the picture: about 770 x 480 pixels as PNG, legible when shown at
// that width.
const (
	width  = 8 * vg.Inch
	height = 5 * vg.Inch
)

// logRatio is the largest/smallest latency above which the latency axis is
// logarithmic. LL dispatch and combine on GPUs stay within one decade from 1
// to a few hundred tokens, and a linear axis from zero shows their ratios
// honestly; the CPU backend, or inputs from very different systems, span
// more, and a linear axis would flatten the fast curves onto zero.
const logRatio = 20

// metric is one of the four latency curves of an input.
type metric struct {
	name   string
	get    func(Point) float64
	dashes []vg.Length
	glyph  draw.GlyphDrawer
}

var metrics = []metric{
	{"host dispatch", func(p Point) float64 { return p.HostDispatch }, nil, draw.CircleGlyph{}},
	{"host combine", func(p Point) float64 { return p.HostCombine }, []vg.Length{vg.Points(6), vg.Points(3)}, draw.BoxGlyph{}},
	{"kernel dispatch", func(p Point) float64 { return p.KernelDispatch }, []vg.Length{vg.Points(1.5), vg.Points(2)}, draw.TriangleGlyph{}},
	{"kernel combine", func(p Point) float64 { return p.KernelCombine },
		[]vg.Length{vg.Points(8), vg.Points(3), vg.Points(1.5), vg.Points(3)}, draw.CrossGlyph{}},
}

// palette is a qualitative palette that stays apart for the colour-blind
// (the first ones matter most: most plots have two or three inputs).
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
}

// tokenTicks labels the tokens axis at the powers of two in its range, or,
// when some token counts are not powers of two, at the counts present.
type tokenTicks struct{ present []float64 }

func (t tokenTicks) Ticks(min, max float64) []gplot.Tick {
	var ticks []gplot.Tick
	pow2 := true
	for _, v := range t.present {
		pow2 = pow2 && v == math.Exp2(math.Round(math.Log2(v)))
	}
	if pow2 {
		for v := 1.0; v <= max; v *= 2 {
			if v >= min {
				ticks = append(ticks, gplot.Tick{Value: v, Label: fmt.Sprintf("%d", int64(v))})
			}
		}
		return ticks
	}
	last := 0.0
	for _, v := range t.present {
		if last == 0 || v/last >= 1.15 { // keep labels of close counts apart
			ticks = append(ticks, gplot.Tick{Value: v, Label: fmt.Sprintf("%d", int64(v))})
			last = v
		}
	}
	return ticks
}

// linearTicks labels a linear axis every 1, 2 or 5 × 10^n, six to ten times.
type linearTicks struct{}

func (linearTicks) Ticks(min, max float64) []gplot.Tick {
	if !(max > min) {
		return nil
	}
	raw := (max - min) / 10
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	var ticks []gplot.Tick
	for i := math.Ceil(min / step); i*step <= max+step*1e-9; i++ {
		v := i * step
		ticks = append(ticks, gplot.Tick{Value: v, Label: trimNum(v)})
	}
	return ticks
}

// logTicks labels a logarithmic axis at 1, 2 and 5 × 10^n; over more than
// three decades the 2s and 5s stay unlabelled.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []gplot.Tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	dense := math.Log10(max/min) <= 3
	var ticks []gplot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			t := gplot.Tick{Value: v}
			if m == 1 || dense {
				t.Label = trimNum(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

func trimNum(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// curve is one metric of one input, ready to draw.
type curve struct {
	name   string
	colour color.Color
	m      metric
	xys    plotter.XYs
	joined bool
}

// Latency writes the plot of latency against tokens per rank of the inputs
// to out, as SVG or PNG by its extension. Each input gets a colour, each of
// its metrics (host and kernel dispatch and combine) a dash pattern and a
// glyph; absent or non-positive numbers are left out. The tokens axis is
// logarithmic; the latency axis is linear from zero unless the largest
// latency is more than logRatio times the smallest, and logarithmic then.
func Latency(inputs []Series, title, out string) error {
	format, err := pictureFormat(out)
	if err != nil {
		return err
	}
	if len(inputs) == 0 {
		return usagef("nothing to plot")
	}
	var curves []curve
	ymin, ymax := math.Inf(1), math.Inf(-1)
	tokens := map[float64]bool{}
	for i, in := range inputs {
		pts := append([]Point(nil), in.Points...)
		sort.SliceStable(pts, func(a, b int) bool { return pts[a].Tokens < pts[b].Tokens })
		for _, m := range metrics {
			c := curve{name: in.Label + " " + m.name, colour: palette[i%len(palette)], m: m, joined: in.Sweep}
			for _, pt := range pts {
				v := m.get(pt)
				if pt.Tokens <= 0 || !(v > 0) || math.IsInf(v, 0) {
					continue
				}
				c.xys = append(c.xys, plotter.XY{X: float64(pt.Tokens), Y: v})
				tokens[float64(pt.Tokens)] = true
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
			if len(c.xys) > 0 {
				curves = append(curves, c)
			}
		}
	}
	if len(curves) == 0 {
		return usagef("no latency numbers in the inputs")
	}
	present := make([]float64, 0, len(tokens))
	for t := range tokens {
		present = append(present, t)
	}
	sort.Float64s(present)

	p := gplot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = "tokens per rank"
	p.Y.Label.Text = "latency (us)"
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = tokenTicks{present: present}
	// Room around the smallest and largest sizes on the log axis.
	p.X.Min, p.X.Max = present[0]/1.4, present[len(present)-1]*1.4
	logY := ymax/ymin > logRatio
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xdd}
	grid.Horizontal.Color = color.Gray{Y: 0xdd}
	p.Add(grid)

	leg := gplot.NewLegend()
	leg.TextStyle.Font.Size = vg.Points(9)
	leg.ThumbnailWidth = vg.Points(30)
	leg.Padding = vg.Points(1.5)
	for _, c := range curves {
		sc, err := plotter.NewScatter(c.xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: c.colour, Radius: vg.Points(2.8), Shape: c.m.glyph}
		if c.joined && len(c.xys) > 1 {
			ln, err := plotter.NewLine(c.xys)
			if err != nil {
				return err
			}
			ln.LineStyle = draw.LineStyle{Color: c.colour, Width: vg.Points(1.4), Dashes: c.m.dashes}
			p.Add(ln, sc)
			leg.Add(c.name, ln, sc)
		} else {
			p.Add(sc)
			leg.Add(c.name, sc)
		}
	}

	lr := leg.Rectangle(draw.Canvas{})
	legW, legH := lr.Max.X-lr.Min.X, lr.Max.Y-lr.Min.Y
	const pad = vg.Length(5)
	// The legend goes into the top left corner of the data area, with the
	// latency axis raised to leave it free, unless it would take more than
	// half the height; then it goes to the right of the plot.
	areaH := height - 70 // less title and tokens axis
	frac := float64((legH+3*pad)/areaH) + 0.03
	inside := frac <= 0.5
	if !inside {
		frac = 0.05
	}
	if logY {
		p.Y.Scale = gplot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		lo, hi := math.Log10(ymin/1.25), math.Log10(ymax)
		p.Y.Min, p.Y.Max = math.Pow(10, lo), math.Pow(10, lo+(hi-lo)/(1-frac))
	} else {
		p.Y.Tick.Marker = linearTicks{}
		p.Y.Min, p.Y.Max = 0, ymax/(1-frac)
	}

	cw, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	pc := draw.Crop(dc, 0, -2*pad, 0, -pad) // a margin at the top and right
	if !inside {
		pc = draw.Crop(pc, 0, -(legW + 3*pad), 0, 0)
	}
	p.Draw(pc)
	data := p.DataCanvas(pc)
	box := vg.Rectangle{Min: vg.Point{X: data.Min.X + pad, Y: data.Max.Y - legH - 3*pad}, Max: vg.Point{X: data.Min.X + legW + 3*pad, Y: data.Max.Y - pad}}
	if !inside {
		box = vg.Rectangle{Min: vg.Point{X: pc.Max.X + pad, Y: data.Max.Y - legH - 2*pad}, Max: vg.Point{X: pc.Max.X + legW + 3*pad, Y: data.Max.Y}}
	}
	dc.SetColor(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xe8})
	dc.Fill(box.Path())
	dc.SetLineStyle(draw.LineStyle{Color: color.Gray{Y: 0xaa}, Width: vg.Points(0.6)})
	dc.Stroke(box.Path())
	leg.Top, leg.Left = true, true
	leg.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: box.Min.X + pad, Y: box.Min.Y + pad},
		Max: vg.Point{X: box.Max.X - pad, Y: box.Max.Y - pad},
	}})
	return writeCanvas(cw, out)
}

// pictureFormat is "svg" or "png" by out's extension.
func pictureFormat(out string) (string, error) {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
	if format != "svg" && format != "png" {
		return "", usagef("-o %s: the plot is written as .svg or .png", out)
	}
	return format, nil
}

// checkOutput refuses, before any input is read, a picture that could not
// be written: a name without .svg or .png, or a path that cannot be created.
func checkOutput(out string) error {
	if _, err := pictureFormat(out); err != nil {
		return err
	}
	if err := report.CheckOutputs(map[string]string{"-o": out}); err != nil {
		return usagef("%v", err)
	}
	return nil
}

func writeCanvas(cw io.WriterTo, out string) error {
	f, err := os.Create(out)
	if err == nil {
		_, err = cw.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// maxInput bounds an input file (a sweep JSON with per-rank values of many
// ranks stays far below).
const maxInput = 64 << 20

// Load reads one input: a sweep JSON (a series of points over tokens), or a
// single summary that report parses (epbench text or JSON, ep_bench outputs),
// whose token count comes from its configuration.
func Load(path string) (Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return Series{}, usagef("%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInput+1))
	if err != nil {
		return Series{}, usagef("%v", err)
	}
	if len(b) > maxInput {
		return Series{}, usagef("%s: larger than %d bytes", path, maxInput)
	}
	label := report.LabelFromPath(path)
	if bytes.Contains(b, []byte(`"`+report.SweepSchema+`"`)) {
		sw, err := report.ParseSweep(bytes.NewReader(b))
		if err != nil {
			return Series{}, usagef("%s: %v", path, err)
		}
		if sw.Varying != report.VaryTokens {
			return Series{}, usagef("%s: a sweep over %s; the plot is against tokens", path, sw.Varying)
		}
		s := Series{Label: label, Sweep: true}
		for i, pt := range sw.Points {
			if err := pt.Result.Summary.CheckNumbers(); err != nil {
				return Series{}, usagef("%s: point %d (tokens %d): %v", path, i+1, pt.Tokens, err)
			}
			s.Points = append(s.Points, pointOf(pt.Tokens, pt.Result.Summary))
		}
		return s, nil
	}
	p, err := report.ParseSummary(bytes.NewReader(b))
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
combine, one colour per input. Inputs: epbench sweep --json files (lines), and
single summaries (points): epbench text or --json output, ep_bench outputs.
Single summaries of one label make one series.

  -o, --output FILE   the picture, .svg or .png
      --title TEXT    its title
      --label NAME    names the inputs in order, once per input
                      (default: the file name without its extension)

The latency axis is linear from zero, or logarithmic when the largest latency
is more than 20 times the smallest.
`

// Main runs epbench plot with its arguments (the subcommand name left out).
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
		_, err := fmt.Fprint(stdout, usage)
		return err
	}
	if *out == "" {
		return usagef("-o FILE is required (.svg or .png)")
	}
	if err := checkOutput(*out); err != nil {
		return err
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
		if s.Label == "" {
			return usagef("%s: empty --label", path)
		}
		series = appendSeries(series, s)
	}
	if err := Latency(series, *title, *out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "wrote %s\n", *out)
	return err
}

// appendSeries adds s; single summaries under the label of earlier single
// summaries join them (several ep_bench outputs make one series of points).
func appendSeries(all []Series, s Series) []Series {
	if !s.Sweep {
		for i := range all {
			if all[i].Label == s.Label && !all[i].Sweep {
				all[i].Points = append(all[i].Points, s.Points...)
				return all
			}
		}
	}
	return append(all, s)
}
