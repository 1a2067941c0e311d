package ablate

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// warmUp runs a two-call scripted rollout in each mode, unmeasured, so that
// the first trial does not pay for the process's first connections,
// encodings and heap growth. Against a URL, the first mode's rollout is the
// timing probe, which checks that the server's model runs at timing
// (checkTiming); its key is the run's own, so that its first step reads its
// whole prompt uncached. The probe runs the scripted model: a server that
// times its models apart (a config) is checked on that one.
func warmUp(ctx context.Context, cfg Config, tg *target, timing sampler.Timing, run string) error {
	w, err := SyntheticWorkload(2, 1, 0, 64)
	if err != nil {
		return err
	}
	for i, mode := range cfg.Modes {
		c := tg.client(cfg, mode)
		key, ro := "ablate-warm-up", w
		probe := i == 0 && cfg.URL != ""
		if probe {
			key, ro = "ablate-"+run+"-probe", timingProbe()
		}
		res, err := c.Run(ctx, clienttools.Rollout{Mode: mode.Mode, Funcs: ro.Tools(""), Request: &protocol.CreateRequest{
			Model: ro.Model, Input: ro.input(), PromptCacheKey: &key, Include: []string{protocol.IncludeTimings}}})
		if err != nil {
			return fmt.Errorf("ablate: warm-up in %s: %w", mode, err)
		}
		if probe {
			if err := checkTiming(cfg.URL, timing, res.Turns); err != nil {
				return err
			}
		}
	}
	return nil
}

// trial runs the workload once in mode with a fresh cache.
func trial(ctx context.Context, cfg Config, tg *target, timing sampler.Timing, mode Design, key string) (*Trial, error) {
	dir, cleanup := "", func() {}
	if cfg.Workload.Repo {
		var err error
		if dir, cleanup, err = trialDir(); err != nil {
			return nil, err
		}
	}
	defer cleanup()
	for _, c := range tg.caches {
		c.Configure(sampler.PrefixCacheOptions{})
	}
	c := tg.client(cfg, mode)
	ro := clienttools.Rollout{Mode: mode.Mode, Funcs: cfg.Workload.Tools(dir), Request: &protocol.CreateRequest{
		Model: cfg.Workload.Model, Input: cfg.Workload.input(), PromptCacheKey: &key, Include: []string{protocol.IncludeTimings}}}
	if n := cfg.Workload.Agents; n > 0 {
		ro.Request.MultiAgent = &protocol.MultiAgent{Enabled: new(true), MaxConcurrentSubagents: &n}
	}
	paths0, err := tg.paths()
	if err != nil {
		return nil, err
	}
	var journal0 JournalUse
	if tg.journal != nil {
		journal0 = tg.journal.use()
	}
	cpu0 := processCPU()
	res, err := c.Run(withToolScale(ctx, cfg.ToolScale), ro)
	cpu := processCPU() - cpu0
	if err != nil {
		return nil, err
	}
	paths1, err := tg.paths()
	if err != nil {
		return nil, err
	}
	if res.Response.Status != protocol.ResponseCompleted {
		return nil, fmt.Errorf("the rollout ended %s", res.Response.Status)
	}
	t := &Trial{Mode: mode.String(), PromptCacheKey: key, ElapsedUS: us(res.Elapsed), CPUUS: us(cpu),
		Calls: len(res.Calls), Reconnects: res.Reconnects, Resumes: res.Resumes}
	for i, rt := range res.Turns {
		u := rt.Usage
		late := time.Duration(rt.Server.PacerLateMicros) * time.Microsecond
		model := timing.Duration(u.InputTokens-u.InputTokensDetails.CachedTokens, u.OutputTokens) + late
		latency := rt.FirstEvent + rt.Stream
		t.Turns = append(t.Turns, Turn{Turn: i, ContextTokens: u.InputTokens, CachedTokens: u.InputTokensDetails.CachedTokens,
			OutputTokens: u.OutputTokens, ModelUS: us(model), LatencyUS: us(latency),
			FirstEventUS: us(rt.FirstEvent), OverheadUS: us(latency - model), ToolsUS: us(rt.Tools),
			Calls: rt.Calls, BytesSent: rt.BytesSent, BytesReceived: rt.BytesReceived, Events: rt.Events,
			RenderUS: float64(rt.Server.RenderMicros), RenderTokens: rt.Server.RenderedTokens, SampleUS: float64(rt.Server.SampleMicros), PacerLateUS: us(late),
			ClientEncodeUS: us(rt.Encode), ClientDecodeUS: us(rt.Decode), Server: sent(rt.Server)})
		t.ModelUS += us(model)
		t.ToolsUS += us(rt.Tools)
		t.BytesSent += rt.BytesSent
		t.BytesReceived += rt.BytesReceived
	}
	t.OverheadUS = t.ElapsedUS - t.ModelUS - t.ToolsUS
	if t.Agents = cfg.Workload.Agents; t.Agents > 0 {
		// Its agents sample and call side by side: the model and tool
		// time are its critical path's (clienttools.Result.Breakdown),
		// the server's sampling time as it measured it.
		b := res.Breakdown()
		t.ModelUS, t.ToolsUS, t.OverheadUS = us(b.Model), us(b.Tools), us(b.Overhead)
	}
	if mode.Durable && tg.journal != nil {
		t.Journal = tg.journal.since(journal0) // a rollout's end waits for its last write
	}
	if tg.srv != nil {
		t.Paths = pathsDelta(paths0, paths1)
		if err := checkPaths(mode, rootRequests(res.Turns), t.Paths); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// sent is the server's timings of a turn, nil when it sent none.
func sent(t protocol.Timings) *protocol.Timings {
	if t.IsZero() {
		return nil
	}
	return &t
}

// The floor of a round trip is measured in the conditions the round trip
// met. A request that follows an idle process (the client waited on its
// tools) finds a colder machine than one sent right after another: an echo
// of a round trip's shape takes markedly longer after 50–300 ms of idle
// than right after the last. Back-to-back echoes set round trips sent
// after an idle against a floor they never had, so each turn's floor echo
// follows the turn's own idle (the client's time before its request), up to
// maxFloorIdle: most of the effect, in a few seconds of a default run. The
// warm floor, the fastest of a few echoes back to back, is reported beside
// it: the transport's best case.
const (
	maxFloorIdle   = 50 * time.Millisecond
	warmFloorTries = 3
)

// measureFloor measures the echo floors of each of t's turns, right after
// the trial, over the transport its mode used.
func measureFloor(ctx context.Context, c *echoClient, mode Design, t *Trial) error {
	rt := c.roundTripHTTP
	switch {
	case mode.webTransport():
		rt = c.wt.roundTrip
	case mode.connected():
		rt = c.roundTripWS
	}
	for i := range t.Turns {
		tn := &t.Turns[i]
		s := shape{sent: tn.BytesSent, received: tn.BytesReceived, events: tn.Events}
		var idle time.Duration
		if i > 0 {
			idle = min(time.Duration(t.Turns[i-1].ToolsUS*float64(time.Microsecond)), maxFloorIdle)
		}
		if err := sleep(ctx, idle); err != nil { // idle, as the client did while its tools ran
			return err
		}
		d, err := rt(ctx, s)
		if err != nil {
			return fmt.Errorf("ablate: echo floor: %w", err)
		}
		tn.FloorUS, tn.FloorIdleUS = us(d), us(idle)
		var best time.Duration
		for try := range warmFloorTries {
			d, err := rt(ctx, s)
			if err != nil {
				return fmt.Errorf("ablate: echo floor: %w", err)
			}
			if try == 0 || d < best {
				best = d
			}
		}
		tn.WarmFloorUS = us(best)
	}
	return nil
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
