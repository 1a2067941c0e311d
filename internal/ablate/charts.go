package ablate

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts of a run, drawn with gonum/plot as SVG: the overhead of each
// round trip against the context it read (does a design's cost grow with
// the rollout?), end to end per mode and speed split into model, tools and
// overhead, and a waterfall of one rollout per mode.

// Chart is one SVG chart of a run.
type Chart struct {
	Name  string // file name: overhead.svg, e2e.svg, waterfall.svg
	Title string
	SVG   []byte
}

// modeColors are the modes' colors, the same in every chart.
var modeColors = map[string]color.Color{
	"stateless":  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"chained":    color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"background": color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"turns":      color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"suspend":    color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"inject":     color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// modeColor is a design's color: its mode's, darker for msgpack frames.
func modeColor(design string) color.Color {
	mode, variant, _ := strings.Cut(design, "+")
	c, ok := modeColors[mode].(color.RGBA)
	if !ok {
		return color.Black
	}
	if variant != "" {
		c.R, c.G, c.B = c.R/2, c.G/2, c.B/2
	}
	return c
}

// The parts of a rollout's time, the same in every chart.
var (
	modelColor    = color.RGBA{R: 0x9e, G: 0xb9, B: 0xd4, A: 0xff}
	toolsColor    = color.RGBA{R: 0xb5, G: 0xd9, B: 0x9c, A: 0xff}
	overheadColor = color.RGBA{R: 0xe3, G: 0x4a, B: 0x33, A: 0xff}
)

// The charts' text is in a sans face, as the report's page is (gonum/plot
// lays text out with the metrics of the fonts it embeds, so the face is
// chosen here, for every plot this package draws; the SVG names system
// faces after it).
func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont // labels and glyph boxes
}

// Charts draws the run's charts.
func (r *Results) Charts() ([]Chart, error) {
	var charts []Chart
	for _, draw := range []func() (Chart, error){r.overheadChart, r.overheadCIChart, r.e2eChart, r.waterfallChart} {
		c, err := draw()
		if err != nil {
			return nil, fmt.Errorf("ablate: chart: %w", err)
		}
		charts = append(charts, c)
	}
	return charts, nil
}

// firstSpeed is the speed the per-turn charts show: the first of the run.
func (r *Results) firstSpeed() float64 {
	if len(r.Config.Speeds) == 0 {
		return 0
	}
	return r.Config.Speeds[0]
}

// overheadChart plots, per mode at the first speed, each round trip's
// overhead (median over the mode's trials) against the context tokens the
// step read, the Theil–Sen line through every round trip with its 95%
// band (bootstrap), and the echo floor's median as a dashed line.
func (r *Results) overheadChart() (Chart, error) {
	tps := r.firstSpeed()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("API overhead per round trip, at %s tok/s", rateLabel(tps))
	p.X.Label.Text = "context tokens the step read (thousands)"
	p.Y.Label.Text = "overhead (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	var floors []float64
	top := 0.0
	for _, mode := range r.Config.Modes {
		var trials []Trial
		for _, t := range r.Trials {
			if t.Mode == mode && t.TPS == tps {
				trials = append(trials, t)
			}
		}
		if len(trials) == 0 {
			continue
		}
		var xys plotter.XYs
		var ctxAll, overAll []float64
		for i := range roundTrips(trials[0].Turns) {
			var ctx, over []float64
			for _, t := range trials {
				if trips := roundTrips(t.Turns); i < len(trips) {
					ctx = append(ctx, float64(trips[i].ContextTokens)/1000)
					over = append(over, trips[i].OverheadUS/1000)
					floors = append(floors, trips[i].FloorUS/1000)
				}
			}
			ctxAll, overAll = append(ctxAll, ctx...), append(overAll, over...)
			xys = append(xys, plotter.XY{X: quantile(ctx, 0.5), Y: quantile(over, 0.5)})
		}
		if len(xys) == 0 {
			continue
		}
		c := modeColor(mode)
		pts, err := plotter.NewScatter(xys)
		if err != nil {
			return Chart{}, err
		}
		pts.Color, pts.Shape, pts.Radius = c, draw.CircleGlyph{}, vg.Points(2)
		for _, xy := range xys {
			top = max(top, xy.Y)
		}
		line, band, err := fitBand(ctxAll, overAll, c)
		if err != nil {
			return Chart{}, err
		}
		if band != nil {
			p.Add(band, line)
			for _, xy := range band.XYs[0] {
				top = max(top, xy.Y)
			}
		}
		p.Add(pts)
		if line != nil {
			p.Legend.Add(mode, line, pts)
		} else {
			p.Legend.Add(mode, pts)
		}
	}
	if len(floors) > 0 {
		xmin, xmax := math.Inf(1), math.Inf(-1)
		for _, t := range r.Trials {
			for _, tn := range roundTrips(t.Turns) {
				if t.TPS == tps {
					x := float64(tn.ContextTokens) / 1000
					xmin, xmax = min(xmin, x), max(xmax, x)
				}
			}
		}
		f := quantile(floors, 0.5)
		floor, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: f}, {X: xmax, Y: f}})
		if err != nil {
			return Chart{}, err
		}
		floor.Color, floor.Dashes, floor.Width = color.Gray{Y: 0x66}, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1.2)
		p.Add(floor)
		p.Legend.Add("echo floor p50", floor)
		top = max(top, f)
	}
	p.Y.Min, p.Y.Max = 0, 1.15*top // room for the top point and the legend
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
	svg, err := render(p, 7*vg.Inch, 4*vg.Inch)
	return Chart{Name: "overhead.svg", Title: p.Title.Text, SVG: svg}, err
}

// fitBand is the Theil–Sen line through (xs, ys) over their range, and its
// 95% band: at each x, the 2.5th and 97.5th percentiles of the lines of
// bootstrap resamples. Both nil for fewer than two distinct x.
func fitBand(xs, ys []float64, c color.Color) (*plotter.Line, *plotter.Polygon, error) {
	if len(xs) < 2 {
		return nil, nil, nil
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if hi == lo {
		return nil, nil, nil
	}
	a, b := fit(xs, ys)
	var as, bs []float64
	resample(len(xs), func(idx []int) {
		a, b := fit(pick(xs, idx), pick(ys, idx))
		as, bs = append(as, a), append(bs, b)
	})
	const steps = 24
	var mid, upper, lower plotter.XYs
	for i := range steps + 1 {
		x := lo + (hi-lo)*float64(i)/steps
		at := make([]float64, len(as))
		for k := range as {
			at[k] = as[k] + bs[k]*x
		}
		ci := ci95(at)
		mid = append(mid, plotter.XY{X: x, Y: max(a+b*x, 0)})
		lower, upper = append(lower, plotter.XY{X: x, Y: max(ci[0], 0)}), append(upper, plotter.XY{X: x, Y: max(ci[1], 0)})
	}
	slices.Reverse(lower)
	band, err := plotter.NewPolygon(append(upper, lower...))
	if err != nil {
		return nil, nil, err
	}
	rgba, _ := c.(color.RGBA)
	band.Color, band.LineStyle.Width = color.NRGBA{R: rgba.R, G: rgba.G, B: rgba.B, A: 0x33}, 0
	line, err := plotter.NewLine(mid)
	if err != nil {
		return nil, nil, err
	}
	line.Color, line.Width = c, vg.Points(1.5)
	return line, band, nil
}

// overheadCIChart shows what the stacked bars cannot: each mode's API
// overhead per rollout, with its 95% interval, at every speed.
func (r *Results) overheadCIChart() (Chart, error) {
	p := plot.New()
	p.Title.Text = "API overhead per rollout, with 95% intervals"
	p.Y.Label.Text = "ms"
	p.Add(plotter.NewGrid())
	var names []string
	top := 0.0
	for i, s := range r.Summary {
		names = append(names, s.Mode+"\n"+rateLabel(s.TPS)+" tok/s")
		pt := intervalPoint{x: float64(i), y: s.APIOverheadUS / 1e3, lo: s.APIOverheadCI[0] / 1e3, hi: s.APIOverheadCI[1] / 1e3}
		bars, err := plotter.NewYErrorBars(pt)
		if err != nil {
			return Chart{}, err
		}
		bars.Color, bars.Width, bars.CapWidth = modeColor(s.Mode), vg.Points(1.5), vg.Points(8)
		dot, err := plotter.NewScatter(pt)
		if err != nil {
			return Chart{}, err
		}
		dot.Color, dot.Shape, dot.Radius = modeColor(s.Mode), draw.CircleGlyph{}, vg.Points(3)
		p.Add(bars, dot)
		top = max(top, pt.hi)
	}
	if len(names) == 0 {
		return Chart{}, fmt.Errorf("no summary rows")
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, 1.1*top
	p.Y.Tick.Marker = niceTicks{}
	svg, err := render(p, vg.Length(max(7, 1.1*float64(len(names))))*vg.Inch, 4*vg.Inch)
	return Chart{Name: "overhead-ci.svg", Title: p.Title.Text, SVG: svg}, err
}

// intervalPoint is one figure with its interval, for error bars.
type intervalPoint struct{ x, y, lo, hi float64 }

func (p intervalPoint) Len() int                      { return 1 }
func (p intervalPoint) XY(int) (float64, float64)     { return p.x, p.y }
func (p intervalPoint) YError(int) (float64, float64) { return p.y - p.lo, p.hi - p.y }

// e2eChart is a stacked bar per mode and speed: the median trial's model
// time, tool time and overhead, in seconds.
func (r *Results) e2eChart() (Chart, error) {
	p := plot.New()
	p.Title.Text = "End to end per mode and speed (median trial)"
	p.Y.Label.Text = "seconds"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	var names []string
	var model, tools, over plotter.Values
	for _, s := range r.Summary {
		names = append(names, s.Mode+"\n"+rateLabel(s.TPS)+" tok/s")
		model = append(model, s.ModelMedianUS/1e6)
		tools = append(tools, s.ToolsMedianUS/1e6)
		over = append(over, max(s.ElapsedMedianUS-s.ModelMedianUS-s.ToolsMedianUS, 0)/1e6)
	}
	if len(names) == 0 {
		return Chart{}, fmt.Errorf("no summary rows")
	}
	width := vg.Points(28)
	var top float64
	for i := range model {
		top = max(top, model[i]+tools[i]+over[i])
	}
	p.Y.Min, p.Y.Max = 0, 1.3*top // room above the bars for the legend
	var prev *plotter.BarChart
	for _, part := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{{"model", model, modelColor}, {"tools", tools, toolsColor}, {"API overhead", over, overheadColor}} {
		b, err := plotter.NewBarChart(part.v, width)
		if err != nil {
			return Chart{}, err
		}
		b.Color, b.LineStyle.Width = part.c, 0
		if prev != nil {
			b.StackOn(prev)
		}
		p.Add(b)
		p.Legend.Add(part.name, b)
		prev = b
	}
	p.NominalX(names...)
	svg, err := render(p, vg.Length(max(7, 1.1*float64(len(names))))*vg.Inch, 4.5*vg.Inch)
	return Chart{Name: "e2e.svg", Title: p.Title.Text, SVG: svg}, err
}

// waterfallChart lays out one rollout per mode (the median trial of the
// first speed) on a time line: each turn's model time, its overhead and
// the client tools' time after it, in order.
func (r *Results) waterfallChart() (Chart, error) {
	tps := r.firstSpeed()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("One rollout per mode, at %s tok/s: model, API overhead, tools", rateLabel(tps))
	p.X.Label.Text = "seconds from the first request"
	p.Legend.Top = true
	w := &waterfall{}
	var modes []string
	for _, mode := range r.Config.Modes {
		t := r.medianTrial(mode, tps)
		if t == nil {
			continue
		}
		row := len(modes)
		modes = append(modes, mode)
		var at float64
		for _, tn := range t.Turns {
			model := tn.ModelUS / 1e6
			over := max(tn.LatencyUS-tn.ModelUS, 0) / 1e6
			w.add(row, at, model, modelColor)
			w.add(row, at+model, over, overheadColor)
			at += model + over
			w.add(row, at, tn.ToolsUS/1e6, toolsColor)
			at += tn.ToolsUS / 1e6
		}
	}
	if len(modes) == 0 {
		return Chart{}, fmt.Errorf("no trials at %v tok/s", tps)
	}
	p.Add(w)
	for _, part := range []struct {
		name string
		c    color.Color
	}{{"model", modelColor}, {"API overhead", overheadColor}, {"tools", toolsColor}} {
		p.Legend.Add(part.name, swatch{part.c})
	}
	p.NominalY(modes...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(modes))+0.4 // a free row on top for the legend
	svg, err := render(p, 9*vg.Inch, vg.Length(1.5+0.55*float64(len(modes)))*vg.Inch)
	return Chart{Name: "waterfall.svg", Title: p.Title.Text, SVG: svg}, err
}

// medianTrial is the trial of mode at tps whose end to end is the median
// (the lower middle of an even count), nil if none ran.
func (r *Results) medianTrial(mode string, tps float64) *Trial {
	var ts []*Trial
	for i := range r.Trials {
		if t := &r.Trials[i]; t.Mode == mode && t.TPS == tps {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	slices.SortFunc(ts, func(a, b *Trial) int {
		switch {
		case a.ElapsedUS < b.ElapsedUS:
			return -1
		case a.ElapsedUS > b.ElapsedUS:
			return 1
		}
		return 0
	})
	return ts[(len(ts)-1)/2]
}

// waterfall is a gonum plotter of horizontal segments, one row per mode.
type waterfall struct {
	segs []segment
	xmax float64
}

type segment struct {
	row        int
	start, len float64
	c          color.Color
}

func (w *waterfall) add(row int, start, length float64, c color.Color) {
	if length <= 0 {
		return
	}
	w.segs = append(w.segs, segment{row, start, length, c})
	w.xmax = max(w.xmax, start+length)
}

// Plot draws the segments (plot.Plotter).
func (w *waterfall) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	const half = 0.3 // of a row
	for _, s := range w.segs {
		x0, x1 := trX(s.start), trX(s.start+s.len)
		if x1-x0 < 0.3 { // keep a sliver visible: an overhead of microseconds on a time line of seconds
			x1 = x0 + 0.3
		}
		y0, y1 := trY(float64(s.row)-half), trY(float64(s.row)+half)
		c.FillPolygon(s.c, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
	}
}

// DataRange is the time line's extent (plot.DataRanger).
func (w *waterfall) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, w.xmax, 0, 0
}

// swatch is a legend entry of one color (plot.Thumbnailer).
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.c, pts)
}

// render draws p as SVG of the given size.
func render(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return svgFonts(b.Bytes()), nil
}

// svgFonts lets a browser without Liberation Sans, whose metrics the
// charts' face has, draw the page's sans instead.
func svgFonts(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,system-ui,sans-serif;"))
}

func rateLabel(tps float64) string {
	if tps == 0 {
		return "unpaced"
	}
	return strconv.FormatFloat(tps, 'f', -1, 64)
}
