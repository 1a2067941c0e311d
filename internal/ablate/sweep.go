package ablate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A sweep runs the same comparison once per value of one cost knob, so
// that a reader sees how each design's end-to-end gain moves with it, and
// at which value this simulation reaches what a deployment has reported.

// Knobs are the knobs a sweep takes, with the unit of their values.
var Knobs = map[string]string{
	"hop-latency":  "ms", // each simulated service call (routing, safety, billing)
	"ttft":         "ms", // the model's time to first token
	"tps":          "tok/s",
	"prefill-rate": "tok/s", // uncached prompt tokens read per second
	"safety":       "on=1",  // the safety classifier and its hop, off (0) or on (1)
	"tool-scale":   "×",     // every simulated tool's time, as recorded (1), halved (0.5), ...
}

// SetKnob sets knob to value in c and returns the value as the sweep's
// axis reads it, in the knob's unit.
func (c *Config) SetKnob(knob, value string) (float64, error) {
	switch knob {
	case "hop-latency", "ttft":
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s=%s: want a duration such as 2ms", knob, value)
		}
		if knob == "ttft" {
			c.TTFT = d
		} else {
			c.Cost.HopLatency = d
		}
		return float64(d) / float64(time.Millisecond), nil
	case "tps", "prefill-rate":
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s=%s: want a number of tokens a second, 0 or more", knob, value)
		}
		if knob == "tps" {
			c.Speeds = []float64{v}
		} else {
			c.PrefillRate = v
		}
		return v, nil
	case "tool-scale":
		v, err := strconv.ParseFloat(value, 64)
		switch {
		case err != nil || v < 0:
			return 0, fmt.Errorf("tool-scale=%s: want a factor of the tools' time, 0 or more, such as 0.5", value)
		case c.Workload.Repo:
			return 0, fmt.Errorf("tool-scale: the tools run for real here (--tools real); scale simulated ones (--tools replay, or a synthetic workload)")
		}
		c.ToolScale = v
		if v == 0 {
			c.ToolScale = 1e-9 // as good as instant; 0 would mean "as they are"
		}
		return v, nil
	case "safety":
		switch value {
		case "on":
			c.Cost.Safety = true
			return 1, nil
		case "off":
			c.Cost.Safety = false
			return 0, nil
		}
		return 0, fmt.Errorf("safety=%s: want on or off", value)
	}
	names := make([]string, 0, len(Knobs))
	for k := range Knobs {
		names = append(names, k)
	}
	slices.Sort(names)
	return 0, fmt.Errorf("no knob %q: a sweep takes %s", knob, strings.Join(names, ", "))
}

// SweepResults is one run per value of a knob.
type SweepResults struct {
	Knob   string     `json:"knob"`
	Unit   string     `json:"unit"`
	Values []float64  `json:"values"`
	Labels []string   `json:"labels"` // the values as given
	Runs   []*Results `json:"runs"`

	sums [][]Summary // each run's summaries at its first speed, made once
}

// summaries are each run's summaries at its first speed.
func (sw *SweepResults) summaries() [][]Summary {
	if len(sw.sums) != len(sw.Runs) {
		sw.sums = make([][]Summary, len(sw.Runs))
		for i, res := range sw.Runs {
			sw.sums[i] = summarize(trialsAt(res.Trials, res.firstSpeed()))
		}
	}
	return sw.sums
}

// Sweep runs cfg once per value of knob, the values interleaved round by
// round in one run (RunInterleaved), so that the machine's drift does not
// pass for the knob's effect.
func Sweep(ctx context.Context, cfg Config, knob string, values []string) (*SweepResults, error) {
	if len(values) < 2 {
		return nil, errors.New("ablate: a sweep needs two values or more")
	}
	if len(cfg.Speeds) != 1 && knob != "tps" {
		return nil, errors.New("ablate: a sweep runs at one speed: give --tps one value")
	}
	// The values in ascending order, each once: the table, the charts'
	// lines and where a gain is reached read them so.
	type value struct {
		x     float64
		label string
		cfg   Config
	}
	var vs []value
	for _, v := range values {
		c := cfg
		x, err := c.SetKnob(knob, v)
		if err != nil {
			return nil, fmt.Errorf("ablate: sweep: %w", err)
		}
		if slices.ContainsFunc(vs, func(w value) bool { return w.x == x }) {
			return nil, fmt.Errorf("ablate: sweep: %s=%s is given twice", knob, v)
		}
		vs = append(vs, value{x, v, c})
	}
	slices.SortStableFunc(vs, func(a, b value) int { return cmp.Compare(a.x, b.x) })
	sw := &SweepResults{Knob: knob, Unit: Knobs[knob]}
	cfgs := make([]Config, len(vs))
	for i, v := range vs {
		sw.Values, sw.Labels, cfgs[i] = append(sw.Values, v.x), append(sw.Labels, v.label), v.cfg
	}
	runs, err := RunInterleaved(ctx, cfgs)
	if err != nil {
		return nil, fmt.Errorf("ablate: sweep of %s: %w", knob, err)
	}
	sw.Runs = runs
	return sw, nil
}

// Speedup is one design's end-to-end gain at one value of the knob
// against a baseline design: 1 - its end to end over the baseline's, with
// its 95% interval (both designs' turns resampled apart).
type Speedup struct {
	Value    float64    `json:"value"`
	Mode     string     `json:"mode"`
	Baseline string     `json:"baseline"`
	Gain     float64    `json:"gain"`
	GainCI   [2]float64 `json:"gain_ci95"`
}

// Speedups are every design's gains against baseline, value by value, at
// the first speed of each run.
func (sw *SweepResults) Speedups(baseline string) []Speedup {
	var out []Speedup
	for i, sums := range sw.summaries() {
		k := slices.IndexFunc(sums, func(s Summary) bool { return s.Mode == baseline })
		if k < 0 {
			continue
		}
		base := sums[k]
		for _, s := range sums {
			if s.Mode == baseline {
				continue
			}
			ci := ratioCI(s.turns, base.turns, s.endToEnd, base.endToEnd)
			out = append(out, Speedup{Value: sw.Values[i], Mode: s.Mode, Baseline: baseline,
				Gain: 1 - ratio(s.EndToEndUS, base.EndToEndUS), GainCI: [2]float64{1 - ci[1], 1 - ci[0]}})
		}
	}
	return out
}

// Reference is a published end-to-end gain, as its source states it.
type Reference struct {
	Source   string  `json:"source"`
	Claim    string  `json:"claim"`    // in the source's words
	Baseline string  `json:"baseline"` // the design of tether's it is set against
	Gain     float64 `json:"gain"`
}

// References are the published gains a sweep's chart draws.
var References = []Reference{
	{"OpenAI", "up to roughly 40% faster end to end, rollouts of 20+ tool calls, WebSocket mode against HTTP", "stateless", 0.40},
	{"xAI", "up to ~20% lower end to end against HTTP requests chained by previous_response_id", "chained", 0.20},
	{"SGLang gateway", "~7% lower chain p50 latency against HTTP chaining", "chained", 0.07},
}

// Reaches is the knob value at which mode's gain against ref's baseline
// first reaches ref's, interpolated between the two values around it; ok
// is false when no swept value reaches it.
func (sw *SweepResults) Reaches(ref Reference, mode string) (float64, bool) {
	var pts []Speedup
	for _, s := range sw.Speedups(ref.Baseline) {
		if s.Mode == mode {
			pts = append(pts, s)
		}
	}
	for i, p := range pts {
		if p.Gain < ref.Gain {
			continue
		}
		if i == 0 {
			return p.Value, true
		}
		q := pts[i-1]
		return q.Value + (p.Value-q.Value)*(ref.Gain-q.Gain)/(p.Gain-q.Gain), true
	}
	return 0, false
}

// SweepCharts draws, for each baseline a reference is set against, every
// design's gain against the knob with its 95% band, and the references as
// dashed lines labelled by source.
func (sw *SweepResults) SweepCharts() ([]Chart, error) {
	var charts []Chart
	for _, baseline := range []string{"stateless", "chained"} {
		gains := sw.Speedups(baseline)
		if len(gains) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("End-to-end gain against %s, by %s", baseline, sw.Knob)
		p.X.Label.Text = sw.Knob + " (" + sw.Unit + ")"
		p.Y.Label.Text = "gain (%)"
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		top := 0.0
		for _, mode := range sw.Runs[0].Config.Modes {
			var mid, upper, lower plotter.XYs
			for _, g := range gains {
				if g.Mode == mode {
					mid = append(mid, plotter.XY{X: g.Value, Y: 100 * g.Gain})
					upper, lower = append(upper, plotter.XY{X: g.Value, Y: 100 * g.GainCI[1]}), append(lower, plotter.XY{X: g.Value, Y: 100 * g.GainCI[0]})
					top = max(top, 100*g.GainCI[1])
				}
			}
			if len(mid) == 0 {
				continue
			}
			c := modeColor(mode)
			slices.Reverse(lower)
			band, err := plotter.NewPolygon(append(upper, lower...))
			if err != nil {
				return nil, err
			}
			rgba, _ := c.(color.RGBA)
			band.Color, band.LineStyle.Width = color.NRGBA{R: rgba.R, G: rgba.G, B: rgba.B, A: 0x33}, 0
			line, err := plotter.NewLine(mid)
			if err != nil {
				return nil, err
			}
			line.Color, line.Width = c, vg.Points(1.5)
			pts, err := plotter.NewScatter(mid)
			if err != nil {
				return nil, err
			}
			pts.Color, pts.Shape, pts.Radius = c, draw.CircleGlyph{}, vg.Points(2)
			p.Add(band, line, pts)
			p.Legend.Add(mode, line, pts)
		}
		lo, hi := slices.Min(sw.Values), slices.Max(sw.Values)
		for _, ref := range References {
			if ref.Baseline != baseline {
				continue
			}
			l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: 100 * ref.Gain}, {X: hi, Y: 100 * ref.Gain}})
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes, l.Width = color.Gray{Y: 0x55}, []vg.Length{vg.Points(5), vg.Points(3)}, vg.Points(1)
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: hi, Y: 100 * ref.Gain}},
				Labels: []string{fmt.Sprintf("%s: %.0f%%", ref.Source, 100*ref.Gain)}})
			if err != nil {
				return nil, err
			}
			for i := range labels.TextStyle { // right-aligned above the line's end, clear of the legend
				labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = text.XRight, text.YBottom
			}
			p.Add(l, labels)
			top = max(top, 100*ref.Gain)
		}
		p.Y.Max = 1.35 * top // room above the highest reference for the legend
		p.Y.Min = min(p.Y.Min, 0)
		p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
		svg, err := render(p, 7*vg.Inch, 4*vg.Inch)
		if err != nil {
			return nil, err
		}
		charts = append(charts, Chart{Name: "sweep-" + sw.Knob + "-vs-" + baseline + ".svg", Title: p.Title.Text, SVG: svg})
	}
	return charts, nil
}

// WriteFiles writes sweep.json (every run, whole) and the sweep's charts
// into dir.
func (sw *SweepResults) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	charts, err := sw.SweepCharts()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(sw, "", "  ")
	if err != nil {
		return nil, err
	}
	names := []string{"sweep.json"}
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	for _, c := range charts {
		if err := os.WriteFile(filepath.Join(dir, c.Name), c.SVG, 0o644); err != nil {
			return nil, err
		}
		names = append(names, c.Name)
	}
	// Each value's run as a results.json of its own, for tether ablate
	// compare and report.
	for i, r := range sw.Runs {
		sub := sw.Knob + "=" + sw.Labels[i]
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(dir, sub, "results.json"))
		if err != nil {
			return nil, err
		}
		err = r.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		names = append(names, filepath.Join(sub, "results.json"))
	}
	return names, nil
}

// ReadSweep reads a sweep.json, its runs of this schema only.
func ReadSweep(r io.Reader) (*SweepResults, error) {
	var sw SweepResults
	if err := json.NewDecoder(r).Decode(&sw); err != nil {
		return nil, fmt.Errorf("ablate: sweep: %w", err)
	}
	if sw.Knob == "" || len(sw.Runs) != len(sw.Values) || len(sw.Runs) < 2 {
		return nil, errors.New("ablate: sweep: not a sweep.json (a knob and a run per value)")
	}
	for _, r := range sw.Runs {
		if r == nil || r.Schema != SchemaVersion {
			return nil, fmt.Errorf("ablate: sweep: a run of another schema; this tether reads %s", SchemaVersion)
		}
		r.Summary = inModeOrder(summarize(r.Trials), r.Config.Modes) // by this tether, as ReadResults does
	}
	return &sw, nil
}
