package ablate

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// EngineConfig is an engine-model run (tether ablate --engine): the
// trace's rollout run by Clients clients at once, again and again, on a
// simulated engine of Profile, for each design and policy. Every figure it
// gives is simulated.
type EngineConfig struct {
	Profile  *enginemodel.Profile
	Trace    *sampler.Trace
	Clients  []int
	Seeds    int           // runs of each cell, their clients started apart differently: the intervals are over them
	Duration time.Duration // simulated: clients start rollouts until then
	Stagger  time.Duration // clients' first starts, spread at random over it
	TTL      time.Duration // the pin policy's
}

// EngineRun is what an engine-model run found.
type EngineRun struct {
	Simulated bool   `json:"simulated"` // always: these are a model's figures
	Profile   string `json:"profile"`
	// Sources are the profile's figures' sources.
	Sources        map[string]string `json:"sources"`
	CapacityTokens int               `json:"capacity_tokens"`
	Trace          string            `json:"trace"`
	HeaderTokens   int               `json:"header_tokens"` // the prompt every rollout begins with
	Turns          int               `json:"turns"`
	FinalPrompt    int               `json:"final_prompt_tokens"` // the last turn's prompt
	Seeds          int               `json:"seeds"`
	DurationS      float64           `json:"duration_s"`
	TTLS           float64           `json:"ttl_s"`
	Cells          []EngineCell      `json:"cells"`
	// Conclusions are the run's findings in sentences (Conclusions).
	Conclusions []string `json:"conclusions"`
}

// EngineCell is one design, policy and number of clients: means over the
// seeds, with their 95% intervals.
type EngineCell struct {
	Design  string `json:"design"`
	Policy  string `json:"policy"`
	Clients int    `json:"clients"`
	// Rollouts finished a minute, and their completion time (seconds).
	JobsPerMin   float64    `json:"jobs_per_min"`
	JobsPerMinCI [2]float64 `json:"jobs_per_min_ci"`
	JCT          float64    `json:"jct_s"`
	JCTCI        [2]float64 `json:"jct_s_ci"`
	JCTP99       float64    `json:"jct_p99_s"` // of every seed's rollouts together
	// JCTSeeds is each seed's mean completion time: the seeds are alike
	// across cells (the same clients' starts), so two cells' ratio is
	// taken seed by seed (Conclusions).
	JCTSeeds []float64 `json:"jct_s_seeds"`
	// A turn's time to its first token, from its arrival at the engine.
	TTFTP50 float64 `json:"ttft_p50_ms"`
	TTFTP99 float64 `json:"ttft_p99_ms"`
	// The share of prompt tokens found cached (in memory or swapped), the
	// prompt tokens computed a rollout, the cache held for rollouts
	// waiting on tools (tokens, mean), and tokens generated a second.
	HitRate          float64 `json:"hit_rate"`
	RecomputedPerJob float64 `json:"recomputed_per_rollout"`
	// RecomputeShare is the share of the engine's busy time spent
	// prefilling tokens again (InferCept's measure of discarding).
	RecomputeShare float64 `json:"recompute_share"`
	HeldTokens     float64 `json:"held_tokens"`
	TokensPerSec   float64 `json:"tokens_per_s"`
	Refused        int     `json:"refused"`
}

// engineDesigns are the designs as an engine tells them apart: the
// stateless, chained and cached-state (turns) designs send it the same
// prompts and cannot say that a rollout ended; a suspended rollout can.
// The API's own time is not in the model (ablate's comparison measures
// it), so the three are one row.
var engineDesigns = []enginemodel.Design{
	{Name: "stateless, chained, turns"},
	{Name: "suspend", KnowsEnd: true},
}

// EngineJob is tr's rollout as the engine sees it: the prompt every
// rollout begins with (the tools' definitions), and each step's appended
// prompt (the task, then the previous step's tool outputs), output
// (reasoning, text and calls) and tools' time (the longest of its calls:
// the client runs them at once), counted as tether's renderer counts them.
func EngineJob(tr *sampler.Trace) (header int, job enginemodel.Job, err error) {
	r, err := sampler.NewRenderer()
	if err != nil {
		return 0, job, err
	}
	w, err := TraceWorkload(tr, ToolsInstant)
	if err != nil {
		return 0, job, err
	}
	var defs []protocol.Tool
	for _, f := range w.Tools("") {
		defs = append(defs, f.Definition())
	}
	header = len(r.Header("", defs))
	appended := len(r.Item(protocol.UserMessage(tr.Task)))
	for _, it := range tr.History {
		appended += len(r.Item(it))
	}
	for i, st := range tr.Steps {
		out := st.ReasoningTokens
		if st.Text != "" {
			out += len(r.Item(&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: st.Text}}}))
		}
		next, tools := 0, time.Duration(0)
		for k, c := range st.Calls {
			id := fmt.Sprintf("call_%d_%d", i, k)
			out += len(r.Item(&protocol.FunctionCall{CallID: id, Name: c.Name, Arguments: c.Arguments}))
			next += len(r.Item(&protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: c.Output}}))
			tools = max(tools, time.Duration(c.DurationMS)*time.Millisecond)
		}
		job.Turns = append(job.Turns, enginemodel.Turn{Append: appended, Output: max(out, 1), Hidden: st.ReasoningTokens, Tools: tools})
		appended = next
	}
	return header, job, nil
}

// RunEngine runs the matrix: every design, policy and number of clients,
// Seeds times each. Each policy runs with the engine admitting turns in
// the order they arrive, and "by rollout": the turns of rollouts begun
// earlier first (Continuum's first come, first served by program, which a
// pinned rollout's next turn needs to find its pin still there).
func RunEngine(ctx context.Context, cfg EngineConfig) (*EngineRun, error) {
	header, job, err := EngineJob(cfg.Trace)
	if err != nil {
		return nil, err
	}
	run := &EngineRun{Simulated: true, Profile: cfg.Profile.Name, Sources: cfg.Profile.Sources, CapacityTokens: cfg.Profile.CapacityTokens,
		Trace: cfg.Trace.Name, HeaderTokens: header, Turns: len(job.Turns), Seeds: cfg.Seeds,
		DurationS: cfg.Duration.Seconds(), TTLS: cfg.TTL.Seconds()}
	run.FinalPrompt = header
	for _, t := range job.Turns[:len(job.Turns)-1] {
		run.FinalPrompt += t.Append + t.Output - t.Hidden
	}
	run.FinalPrompt += job.Turns[len(job.Turns)-1].Append
	type policy struct {
		name      string
		p         enginemodel.Policy
		byProgram bool
	}
	var policies []policy
	for _, p := range []policy{
		{"discard", enginemodel.Policy{Kind: enginemodel.Discard}, false},
		{fmt.Sprintf("pin %v", cfg.TTL), enginemodel.Policy{Kind: enginemodel.Pin, TTL: cfg.TTL}, false},
		{"swap", enginemodel.Policy{Kind: enginemodel.Swap}, false},
	} {
		policies = append(policies, p)
		p.name, p.byProgram = p.name+", by rollout", true
		policies = append(policies, p)
	}
	type cellRun struct {
		cell EngineCell
		load enginemodel.Load
	}
	var cells []*cellRun
	for _, d := range engineDesigns {
		for _, pol := range policies {
			for _, n := range cfg.Clients {
				cells = append(cells, &cellRun{cell: EngineCell{Design: d.Name, Policy: pol.name, Clients: n},
					load: enginemodel.Load{Profile: cfg.Profile, Header: header, Jobs: []enginemodel.Job{job},
						Clients: n, Duration: cfg.Duration, Stagger: cfg.Stagger, Design: d, Policy: pol.p, ByProgram: pol.byProgram}})
			}
		}
	}
	// Every run is its own: they run on every core, the results in order.
	results := make([][]enginemodel.LoadResult, len(cells))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(goruntime.GOMAXPROCS(0))
	for i, c := range cells {
		results[i] = make([]enginemodel.LoadResult, cfg.Seeds)
		for seed := range cfg.Seeds {
			g.Go(func() error {
				l := c.load
				l.Seed = uint64(seed + 1)
				var err error
				results[i][seed], err = enginemodel.RunLoad(gctx, l)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, c := range cells {
		run.Cells = append(run.Cells, engineCell(c.cell, results[i], cfg.Profile))
	}
	run.Conclusions = run.conclusions()
	return run, nil
}

// engineCell sums up a cell's runs, one a seed.
func engineCell(cell EngineCell, runs []enginemodel.LoadResult, p *enginemodel.Profile) EngineCell {
	var perMin, jct, pooled, ttft []float64
	var prompt, hits, recomputed, jobs int
	var held, tokens, share float64
	for _, res := range runs {
		span := res.Span.Seconds()
		perMin = append(perMin, float64(res.Jobs)/span*60)
		var js []float64
		for _, t := range res.JobTimes {
			js = append(js, t.Seconds())
		}
		jct = append(jct, mean(js))
		pooled = append(pooled, js...)
		for _, t := range res.TTFT {
			ttft = append(ttft, float64(t)/float64(time.Millisecond))
		}
		prompt += res.Prompt
		hits += res.Stats.HitTokens + res.Stats.SwapTokens
		recomputed += res.Recomputed
		jobs += res.Jobs
		held += res.HeldTokens()
		tokens += float64(res.Stats.Decoded) / span
		if res.Stats.Busy > 0 {
			share += float64(res.Recomputed) / p.PrefillTokensPerSec / res.Stats.Busy.Seconds()
		}
		cell.Refused += res.Refused
	}
	k := float64(len(runs))
	cell.JobsPerMin, cell.JobsPerMinCI = mean(perMin), bootstrapCI(perMin, mean)
	cell.JCT, cell.JCTCI, cell.JCTSeeds = mean(jct), bootstrapCI(jct, mean), jct
	cell.JCTP99 = quantile(pooled, 0.99)
	cell.TTFTP50, cell.TTFTP99 = quantile(ttft, 0.5), quantile(ttft, 0.99)
	if prompt > 0 {
		cell.HitRate = float64(hits) / float64(prompt)
	}
	if jobs > 0 {
		cell.RecomputedPerJob = float64(recomputed) / float64(jobs)
	}
	cell.HeldTokens, cell.TokensPerSec, cell.RecomputeShare = held/k, tokens/k, share/k
	return cell
}

// Chart plots each policy's mean completion time (with its interval)
// against the number of rollouts, a panel a design, both axes logarithmic.
func (r *EngineRun) Chart() (Chart, error) {
	plots, err := r.plots()
	if err != nil {
		return Chart{}, err
	}
	title := fmt.Sprintf("rollout completion time against load, simulated (%s, %s)", r.Profile, r.Trace)
	svg, err := renderTiles(plots, vg.Length(len(plots[0]))*6*vg.Inch, 5*vg.Inch)
	return Chart{Name: "engine-jct.svg", Title: title, SVG: svg}, err
}

// plots are Chart's panels.
func (r *EngineRun) plots() ([][]*plot.Plot, error) {
	var designs, policies []string
	for _, c := range r.Cells {
		if !slices.Contains(designs, c.Design) {
			designs = append(designs, c.Design)
		}
		if !slices.Contains(policies, c.Policy) {
			policies = append(policies, c.Policy)
		}
	}
	plots := [][]*plot.Plot{make([]*plot.Plot, len(designs))}
	for j, d := range designs {
		p := plot.New()
		p.Title.Text = d + " (simulated: " + r.Profile + ", " + r.Trace + ")"
		p.X.Label.Text = "concurrent rollouts"
		p.Y.Label.Text = "completion time, s (mean, 95% interval)"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		var loads pointTicks
		for _, n := range r.loads(d) {
			loads = append(loads, float64(n))
		}
		p.X.Tick.Marker, p.Y.Tick.Marker = loads, logTicks{}
		p.Legend.Top, p.Legend.Left = true, true
		p.Add(plotter.NewGrid())
		for i, pol := range policies {
			var xys plotter.XYs
			var errs plotter.YErrors
			for _, c := range r.Cells {
				if c.Design == d && c.Policy == pol {
					xys = append(xys, plotter.XY{X: float64(c.Clients), Y: c.JCT})
					errs = append(errs, struct{ Low, High float64 }{c.JCT - c.JCTCI[0], c.JCTCI[1] - c.JCT})
				}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Width = vg.Points(1.5)
			l.Color = plotColor(i / 2) // a policy's color; by rollout dashed
			if strings.HasSuffix(pol, "by rollout") {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			bars, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{xys, errs})
			if err != nil {
				return nil, err
			}
			bars.Color = l.Color
			p.Add(l, bars)
			p.Legend.Add(pol, l)
		}
		plots[0][j] = p
	}
	return plots, nil
}

// renderTiles draws a grid of plots as one SVG of the given size.
func renderTiles(plots [][]*plot.Plot, w, h vg.Length) ([]byte, error) {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
		}
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	return svgFonts(b.Bytes()), nil
}
