package ablate

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
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
	"stateless": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"chained":   color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"turns":     color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"suspend":   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
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

// Charts draws the run's charts.
func (r *Results) Charts() ([]Chart, error) {
	var charts []Chart
	for _, draw := range []func() (Chart, error){r.overheadChart, r.e2eChart, r.waterfallChart} {
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
// step read.
func (r *Results) overheadChart() (Chart, error) {
	tps := r.firstSpeed()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("API overhead per round trip, at %s tok/s", rateLabel(tps))
	p.X.Label.Text = "context tokens the step read (thousands)"
	p.Y.Label.Text = "overhead (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
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
		for i := range roundTrips(trials[0].Turns) {
			var ctx, over []float64
			for _, t := range trials {
				if trips := roundTrips(t.Turns); i < len(trips) {
					ctx = append(ctx, float64(trips[i].ContextTokens)/1000)
					over = append(over, trips[i].OverheadUS/1000)
				}
			}
			xys = append(xys, plotter.XY{X: quantile(ctx, 0.5), Y: quantile(over, 0.5)})
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotterLinePoints(xys)
		if err != nil {
			return Chart{}, err
		}
		l.Color, s.Color = modeColor(mode), modeColor(mode)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		p.Legend.Add(mode, l, s)
	}
	svg, err := render(p, 7*vg.Inch, 4*vg.Inch)
	return Chart{Name: "overhead.svg", Title: p.Title.Text, SVG: svg}, err
}

func plotterLinePoints(xys plotter.XYs) (*plotter.Line, *plotter.Scatter, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, nil, err
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, nil, err
	}
	l.Width = vg.Points(1.5)
	s.Radius = vg.Points(2)
	return l, s, nil
}

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
	return b.Bytes(), nil
}

func rateLabel(tps float64) string {
	if tps == 0 {
		return "unpaced"
	}
	return strconv.FormatFloat(tps, 'f', -1, 64)
}
