package ablate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// A live engine run (tether ablate --load N --load-engine PROFILE) checks
// the engine model against a server it paces: for each design and cache
// policy, a tether serve --engine-model of the profile and policy, its
// clock Speed times the real one, takes N clients at once, each running
// the trace's rollout once with the trace's tool times (divided by
// Speed), 10 ms of the engine's clock apart; the simulator runs the same
// cell (the same starts, one rollout each), and the two are set side by
// side. What the live
// run adds to the simulated one is the server: the API's time, the
// rendering of the prompts the engine names blocks of, and the pacing's
// timers, all of them multiplied by Speed on the engine's clock.

// EngineLiveConfig is a live engine run.
type EngineLiveConfig struct {
	// Profile is the engine's, and ProfileArg how serve's --engine-model
	// names it (a built-in name, or the file's path).
	Profile    *enginemodel.Profile
	ProfileArg string
	Trace      *sampler.Trace
	Clients    int
	Speed      float64       // the served engine's: simulated seconds a real second
	TTL        time.Duration // the pin policy's
	// Server is the command that starts a tether serve, to which each
	// cell adds its engine flags; ServerEnv as LoadConfig's.
	Server    []string
	ServerEnv []string
	Progress  func(cell string)
}

// EngineLiveRun is what a live engine run found: each cell live and
// simulated.
type EngineLiveRun struct {
	Profile string           `json:"profile"`
	Trace   string           `json:"trace"`
	Clients int              `json:"clients"`
	Speed   float64          `json:"speed"`
	Cells   []EngineLiveCell `json:"cells"`
}

// EngineLiveCell is one design and policy, live and simulated.
type EngineLiveCell struct {
	Design    string     `json:"design"`
	Policy    string     `json:"policy"`
	Live      EngineSide `json:"live"`
	Simulated EngineSide `json:"simulated"`
	// Gap is the live completion time's over the simulated one, less 1.
	Gap float64 `json:"gap"`
}

// EngineSide is a cell's figures from one side, in the engine's
// (simulated) seconds.
type EngineSide struct {
	Rollouts int     `json:"rollouts"`
	JCT      float64 `json:"jct_s"` // mean rollout completion time
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	HitRate  float64 `json:"hit_rate"` // prompt tokens found in memory or swapped out
	// PrefilledPerRollout is the prompt tokens prefilled a rollout, the
	// new ones with those computed again.
	PrefilledPerRollout float64 `json:"prefilled_per_rollout"`
	Errors              int     `json:"errors,omitempty"`
}

// engineLivePolicy is a policy as serve's flags and the simulator take it.
type engineLivePolicy struct {
	name      string
	flags     []string
	policy    enginemodel.Policy
	byRollout bool
}

// RunEngineLive runs every design (suspend; turns for the designs that
// cannot say a rollout ended) under every policy, live and simulated.
func RunEngineLive(ctx context.Context, cfg EngineLiveConfig) (*EngineLiveRun, error) {
	if cfg.Clients < 1 || cfg.Speed <= 0 || cfg.TTL <= 0 || len(cfg.Server) == 0 {
		return nil, fmt.Errorf("ablate: a live engine run needs clients, a speed, a pin TTL and a server")
	}
	header, job, err := EngineJob(cfg.Trace)
	if err != nil {
		return nil, err
	}
	w, err := TraceWorkload(cfg.Trace, ToolsReplay)
	if err != nil {
		return nil, err
	}
	ttl := cfg.TTL.String()
	policies := []engineLivePolicy{
		{"discard", []string{"--engine-policy", "discard"}, enginemodel.Policy{Kind: enginemodel.Discard}, false},
		{"pin " + ttl, []string{"--engine-policy", "pin", "--engine-ttl", ttl}, enginemodel.Policy{Kind: enginemodel.Pin, TTL: cfg.TTL}, false},
		{"pin " + ttl + ", by rollout", []string{"--engine-policy", "pin", "--engine-ttl", ttl, "--engine-order", "rollout"}, enginemodel.Policy{Kind: enginemodel.Pin, TTL: cfg.TTL}, true},
		{"swap", []string{"--engine-policy", "swap"}, enginemodel.Policy{Kind: enginemodel.Swap}, false},
	}
	designs := []struct {
		mode   clienttools.Mode
		design enginemodel.Design
	}{
		{clienttools.ModeSuspend, enginemodel.Design{Name: "suspend", KnowsEnd: true}},
		{clienttools.ModeTurns, enginemodel.Design{Name: "turns"}},
	}
	run := &EngineLiveRun{Profile: cfg.Profile.Name, Trace: cfg.Trace.Name, Clients: cfg.Clients, Speed: cfg.Speed}
	for _, d := range designs {
		for _, p := range policies {
			if cfg.Progress != nil {
				cfg.Progress(d.design.Name + ", " + p.name)
			}
			live, err := runEngineLiveCell(ctx, cfg, w, d.mode, p)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", d.design.Name, p.name, err)
			}
			res, err := enginemodel.RunLoad(ctx, enginemodel.Load{Profile: cfg.Profile, Header: header, Jobs: []enginemodel.Job{job},
				Clients: cfg.Clients, Starts: engineLiveStarts(cfg.Clients), Duration: time.Nanosecond, Design: d.design, Policy: p.policy, ByProgram: p.byRollout})
			if err != nil {
				return nil, err
			}
			cell := EngineLiveCell{Design: d.design.Name, Policy: p.name, Live: live, Simulated: simulatedSide(res)}
			if cell.Simulated.JCT > 0 {
				cell.Gap = cell.Live.JCT/cell.Simulated.JCT - 1
			}
			run.Cells = append(run.Cells, cell)
		}
	}
	return run, nil
}

// engineLiveStarts are when the clients start, on the engine's clock:
// 10 ms apart, so that the engine orders their rollouts by their starts
// (rollouts begun together would tie, which only a simulator can do).
func engineLiveStarts(clients int) []time.Duration {
	starts := make([]time.Duration, clients)
	for i := range starts {
		starts[i] = time.Duration(i) * 10 * time.Millisecond
	}
	return starts
}

// simulatedSide is a simulated cell's figures.
func simulatedSide(res enginemodel.LoadResult) EngineSide {
	var jct, ttft []float64
	for _, t := range res.JobTimes {
		jct = append(jct, t.Seconds())
	}
	for _, t := range res.TTFT {
		ttft = append(ttft, float64(t)/float64(time.Millisecond))
	}
	s := EngineSide{Rollouts: res.Jobs, JCT: mean(jct), TTFTP50: quantile(ttft, 0.5), TTFTP99: quantile(ttft, 0.99)}
	if res.Prompt > 0 {
		s.HitRate = float64(res.Stats.HitTokens+res.Stats.SwapTokens) / float64(res.Prompt)
	}
	if res.Jobs > 0 {
		s.PrefilledPerRollout = float64(res.Stats.Prefilled) / float64(res.Jobs)
	}
	return s
}

// runEngineLiveCell serves one policy and runs the clients of one design
// against it, each its one rollout.
func runEngineLiveCell(ctx context.Context, cfg EngineLiveConfig, w Workload, mode clienttools.Mode, p engineLivePolicy) (EngineSide, error) {
	args := append(append([]string{}, cfg.Server...), "--addr", "127.0.0.1:0", "--engine-model", cfg.ProfileArg,
		"--engine-speed", fmt.Sprint(cfg.Speed), "--max-suspended", fmt.Sprint(max(cfg.Clients*2, 64)))
	srv, err := startServer(ctx, LoadConfig{Server: append(args, p.flags...), ServerEnv: cfg.ServerEnv})
	if err != nil {
		return EngineSide{}, err
	}
	defer srv.stop()
	var (
		mu                      sync.Mutex
		side                    EngineSide
		jct, ttft               []float64
		hit, prefilled, prompts int
	)
	var wg sync.WaitGroup
	for i, start := range engineLiveStarts(cfg.Clients) {
		wg.Go(func() {
			if err := sleep(ctx, time.Duration(float64(start)/cfg.Speed)); err != nil {
				return
			}
			steps := stepTimings{}
			key := fmt.Sprintf("engine-live-%d", i)
			// Its prompt is its own after the tools' header, as each
			// simulated rollout's is: the same task sent by every client
			// would be found in the cache by all but the first.
			input := append(protocol.Items{protocol.UserMessage(fmt.Sprintf("Rollout %d of this run.", i))}, w.input()...)
			res, err := (&clienttools.Client{BaseURL: srv.base}).Run(ctx, clienttools.Rollout{Mode: mode,
				Funcs: recorded(cfg.Trace, cfg.Speed), OnEvent: steps.event,
				Request: &protocol.CreateRequest{Model: w.Model, Input: input, PromptCacheKey: &key, Include: []string{protocol.IncludeTimings}}})
			mu.Lock()
			defer mu.Unlock()
			e := res.Server.Engine
			if err != nil || e == nil {
				side.Errors++
				return
			}
			side.Rollouts++
			jct = append(jct, res.Elapsed.Seconds()*cfg.Speed)
			ttft = append(ttft, steps.firstTokens...)
			hit += e.HitTokens + e.SwappedTokens
			prefilled += e.PrefilledTokens
			prompts += e.HitTokens + e.SwappedTokens + e.PrefilledTokens
		})
	}
	wg.Wait()
	side.JCT, side.TTFTP50, side.TTFTP99 = mean(jct), quantile(ttft, 0.5), quantile(ttft, 0.99)
	if prompts > 0 {
		side.HitRate = float64(hit) / float64(prompts)
	}
	if side.Rollouts > 0 {
		side.PrefilledPerRollout = float64(prefilled) / float64(side.Rollouts)
	}
	return side, nil
}

// stepTimings gathers each model step's time to its first token from a
// rollout's responses: a response's engine timings are its steps' sums
// so far, so a step's is what its pause or end adds to the last one's.
type stepTimings struct {
	last        map[string]int64 // each response's first_token_us so far
	firstTokens []float64        // each step's, in milliseconds
}

func (s *stepTimings) event(ev protocol.Event) {
	re, ok := ev.(*protocol.ResponseEvent)
	if !ok || re.Response == nil || re.Response.Timings == nil || re.Response.Timings.Engine == nil {
		return
	}
	if s.last == nil {
		s.last = make(map[string]int64)
	}
	now := re.Response.Timings.Engine.FirstTokenMicros
	if was, seen := s.last[re.Response.ID]; now != was || !seen {
		s.firstTokens = append(s.firstTokens, float64(now-was)/1e3)
	}
	s.last[re.Response.ID] = now
}
