package ablate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/internal/streamfloor"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// A load run with a floor measures tether against the streaming floor
// (package streamfloor) in the same run: one rollout of the workload is
// recorded off a tether first (LoadConfig.Recorder, its every delta sent),
// then the clients run against the floor and tether in turn, round by
// round, floor first, each server up for the whole run, so that the
// machine's drift falls on both alike. Each round's figures pair the two,
// and the ratios' intervals resample those pairs.

// LoadRound is one round of a run with a floor: the floor's stretch and
// the server's.
type LoadRound struct {
	FloorCPUPerToken  float64 `json:"floor_server_cpu_us_per_token"`
	ServerCPUPerToken float64 `json:"server_cpu_us_per_token"`
	FloorCPUPerFrame  float64 `json:"floor_server_cpu_us_per_frame"`
	ServerCPUPerFrame float64 `json:"server_cpu_us_per_frame"`
	FloorLagP99US     float64 `json:"floor_lag_p99_us"`
	ServerLagP99US    float64 `json:"lag_p99_us"`
	FloorStepMS       float64 `json:"floor_step_ms"`
	ServerStepMS      float64 `json:"step_ms"`
}

// FloorRatios are a load result against its floor's, each with the 95%
// interval over rounds.
type FloorRatios struct {
	// ServerCPUPerToken and ServerCPUPerFrame are the server's CPU a
	// token (a delta frame) over the floor's.
	ServerCPUPerToken Estimate `json:"server_cpu_per_token"`
	ServerCPUPerFrame Estimate `json:"server_cpu_per_frame"`
	// LagP99OverMS and LagP50OverMS are the server's token delivery lag
	// less the floor's, in milliseconds.
	LagP99OverMS Estimate `json:"lag_p99_over_ms"`
	LagP50OverMS Estimate `json:"lag_p50_over_ms"`
	// StepOverMS is the server's mean step time less the floor's
	// (LoadResult.StepMS), in milliseconds: the model's time is the
	// same, so this is what the server adds to a round trip under the
	// load, its own work and its waits for the machine's cores.
	StepOverMS Estimate `json:"step_over_ms"`
	// RSS is the server's largest resident memory over the floor's.
	RSS float64 `json:"rss"`
}

// Estimate is a figure and its 95% interval ([0, 0] when there are too few
// rounds to give one).
type Estimate struct {
	Value float64    `json:"value"`
	CI95  [2]float64 `json:"ci95"`
}

// String is the estimate as WithInterval writes it, with prec decimals.
func (e Estimate) String(prec int) string { return WithInterval(e.Value, e.CI95, prec) }

// runFloored records the floor's rollout, starts the floor and the server,
// and runs the clients against each in turn.
func runFloored(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	switch {
	case cfg.Mode != clienttools.ModeSuspend && cfg.Mode != clienttools.ModeTurns:
		return nil, fmt.Errorf("ablate: the streaming floor replays the WebSocket designs suspend and turns, not %s", cfg.Mode)
	case cfg.Encoding != protocol.EncodingJSON:
		return nil, errors.New("ablate: the streaming floor replays JSON frames: run it without msgpack")
	case len(cfg.Fallbacks) > 0 || cfg.URL != "":
		return nil, errors.New("ablate: the streaming floor runs beside a server ablate starts, one")
	case cfg.RecordingFile == "" || len(cfg.Recorder) == 0:
		return nil, errors.New("ablate: a run with a floor needs a recorder and a file for the recording")
	}
	rounds := max(cfg.Rounds, 1)
	rec, err := RecordFloor(ctx, cfg)
	if err != nil {
		return nil, err
	}
	floor, err := startFloor(ctx, cfg, rec)
	if err != nil {
		return nil, err
	}
	defer floor.stop()
	srv, err := startServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res, fres := cfg.newResult(), cfg.newResult()
	res.TLS, fres.TLS = srv.tls(), floor.tls()
	fres.Mode = "floor"
	fres.CostStepUS, fres.CostTokenUS = us(cfg.FloorCost.Step), us(cfg.FloorCost.Token)
	each := cfg.Duration / time.Duration(rounds)
	total := 2 * each * time.Duration(rounds)
	done := time.Duration(0)
	progress := func(elapsed, _ time.Duration) {
		if cfg.Progress != nil {
			cfg.Progress(done+elapsed, total)
		}
	}
	for i := range rounds {
		ft, err := runClients(ctx, cfg, floor, each, 2*i, fres.elapsed, progress)
		if err != nil {
			return nil, err
		}
		done += each
		st, err := runClients(ctx, cfg, srv, each, 2*i+1, res.elapsed, progress)
		if err != nil {
			return nil, err
		}
		done += each
		fres.add(ft)
		res.add(st)
		res.Rounds = append(res.Rounds, LoadRound{
			FloorCPUPerToken: perUnit(ft.serverCPU, max(ft.res.Tokens, 1)), ServerCPUPerToken: perUnit(st.serverCPU, max(st.res.Tokens, 1)),
			FloorCPUPerFrame: perUnit(ft.serverCPU, max(ft.res.Frames, 1)), ServerCPUPerFrame: perUnit(st.serverCPU, max(st.res.Frames, 1)),
			FloorLagP99US: ft.lags.quantile(0.99), ServerLagP99US: st.lags.quantile(0.99),
			FloorStepMS: stepMS(cfg.Clients, ft.elapsed, ft.res.Steps), ServerStepMS: stepMS(cfg.Clients, st.elapsed, st.res.Steps)})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	res.summarize()
	fres.summarize()
	res.Floor = fres
	res.VsFloor = vsFloor(res, fres)
	return res, nil
}

// vsFloor sets res against the floor's result fres, the intervals over
// their rounds.
func vsFloor(res, fres *LoadResult) *FloorRatios {
	var st, ft, sf, ff, lagDiff, stepDiff []float64
	for _, r := range res.Rounds {
		st, ft = append(st, r.ServerCPUPerToken), append(ft, r.FloorCPUPerToken)
		sf, ff = append(sf, r.ServerCPUPerFrame), append(ff, r.FloorCPUPerFrame)
		lagDiff = append(lagDiff, (r.ServerLagP99US-r.FloorLagP99US)/1e3)
		stepDiff = append(stepDiff, r.ServerStepMS-r.FloorStepMS)
	}
	interval := func(ci [2]float64) [2]float64 {
		if len(res.Rounds) < 3 {
			return [2]float64{} // too few rounds to resample
		}
		return ci
	}
	// The p50 over the floor's has no rounds of its own: its interval is
	// the p99's spread's, which bounds it, left out rather than made up.
	return &FloorRatios{
		ServerCPUPerToken: Estimate{ratio(res.ServerCPUPerToken, fres.ServerCPUPerToken), interval(ratioCI(st, ft, mean, mean))},
		ServerCPUPerFrame: Estimate{ratio(res.ServerCPUPerFrame, fres.ServerCPUPerFrame), interval(ratioCI(sf, ff, mean, mean))},
		LagP99OverMS:      Estimate{(res.LagP99US - fres.LagP99US) / 1e3, interval(bootstrapCI(lagDiff, mean))},
		LagP50OverMS:      Estimate{Value: (res.LagP50US - fres.LagP50US) / 1e3},
		StepOverMS:        Estimate{res.StepMS - fres.StepMS, interval(bootstrapCI(stepDiff, mean))},
		RSS:               ratio(res.ServerRSSMaxMiB, fres.ServerRSSMaxMiB),
	}
}

// RecordFloor records the rollout the floor replays: the workload's, in
// cfg's design, against a server started with cfg.Recorder (tether serve,
// unpaced, every delta sent: one frame a token). The first rollout warms
// the server's prefix cache, as a load run's first rollouts do for the
// rest; the second is recorded, on the wire.
func RecordFloor(ctx context.Context, cfg LoadConfig) (*streamfloor.Recording, error) {
	srv, err := startServer(ctx, LoadConfig{Server: cfg.Recorder, ServerEnv: cfg.ServerEnv, ServerLog: cfg.ServerLog})
	if err != nil {
		return nil, fmt.Errorf("ablate: the floor's recorder: %w", err)
	}
	defer srv.stop()
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	c := &clienttools.Client{BaseURL: srv.base, APIKey: cfg.APIKey}
	ctx = withToolScale(ctx, 1e-9) // the tools' outputs, not their time
	var tape *streamfloor.Tape
	for i := range 2 {
		var tapes func() []*streamfloor.Tape
		c.HTTPClient, tapes = tappedClient()
		key := fmt.Sprintf("floor-recording-%d", i)
		_, err := c.Run(ctx, clienttools.Rollout{Mode: cfg.Mode, Funcs: cfg.Workload.Tools(""),
			Request: &protocol.CreateRequest{Model: cfg.Workload.Model, Input: cfg.Workload.input(), PromptCacheKey: &key}})
		c.HTTPClient.CloseIdleConnections()
		if err != nil {
			return nil, fmt.Errorf("ablate: recording the floor's rollout: %w", err)
		}
		t := tapes()
		if len(t) != 1 {
			return nil, fmt.Errorf("ablate: the floor's rollout opened %d connections, want one", len(t))
		}
		tape = t[0]
	}
	in, marks := tape.Read()
	return streamfloor.Parse(in, marks, r.Count)
}

// tappedClient is an HTTP client whose connections each record a tape,
// and the tapes recorded so far.
func tappedClient() (*http.Client, func() []*streamfloor.Tape) {
	var mu sync.Mutex // guards tapes: the transport dials on goroutines of its own
	var tapes []*streamfloor.Tape
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: streamfloor.Tap(d.DialContext, func(t *streamfloor.Tape) {
		mu.Lock()
		tapes = append(tapes, t)
		mu.Unlock()
	})}}
	return hc, func() []*streamfloor.Tape {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(tapes)
	}
}

// startFloor writes rec to cfg.RecordingFile and starts the floor
// (cfg.Floor) serving it, in the server's environment and log.
func startFloor(ctx context.Context, cfg LoadConfig, rec *streamfloor.Recording) (*server, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg.RecordingFile, b, 0o644); err != nil {
		return nil, err
	}
	floor, err := startServer(ctx, LoadConfig{Server: append(slices.Clip(cfg.Floor), "--recording", cfg.RecordingFile), ServerEnv: cfg.ServerEnv, ServerLog: cfg.ServerLog, ClientTLS: cfg.ClientTLS})
	if err != nil {
		return nil, fmt.Errorf("ablate: the floor: %w", err)
	}
	return floor, nil
}

// parkFloor records the first step of a rollout of task against
// cfg.Recorder, and parks cfg.Rollouts on the floor serving it: what a
// WebSocket and the request's bytes held cost the same process, with
// nothing else held for the rollout.
func parkFloor(ctx context.Context, cfg ParkConfig, r *sampler.Renderer, task string) (*ParkResult, error) {
	if cfg.Hibernate || cfg.RecordingFile == "" || len(cfg.Recorder) == 0 {
		return nil, errors.New("ablate: a parking run with a floor needs a recorder and a file for the recording, and hibernates nothing")
	}
	rec, err := recordPark(ctx, cfg, r, task)
	if err != nil {
		return nil, err
	}
	floor, err := startFloor(ctx, LoadConfig{Floor: cfg.Floor, RecordingFile: cfg.RecordingFile, ServerEnv: cfg.ServerEnv, ServerLog: cfg.ServerLog}, rec)
	if err != nil {
		return nil, err
	}
	defer floor.stop()
	return parkOn(ctx, cfg, floor, task, ".floor")
}

// recordPark parks one rollout of task against cfg.Recorder, on the wire.
func recordPark(ctx context.Context, cfg ParkConfig, r *sampler.Renderer, task string) (*streamfloor.Recording, error) {
	srv, err := startServer(ctx, LoadConfig{Server: cfg.Recorder, ServerEnv: cfg.ServerEnv, ServerLog: cfg.ServerLog})
	if err != nil {
		return nil, fmt.Errorf("ablate: the floor's recorder: %w", err)
	}
	defer srv.stop()
	hc, tapes := tappedClient()
	defer hc.CloseIdleConnections()
	p, err := park(ctx, &websocket.DialOptions{HTTPClient: hc}, "ws"+strings.TrimPrefix(srv.base, "http")+"/responses", "Rollout 0.\n"+task, false)
	if err != nil {
		return nil, fmt.Errorf("ablate: recording the floor's rollout: %w", err)
	}
	p.c.Close(websocket.StatusNormalClosure, "")
	t := tapes()
	if len(t) != 1 {
		return nil, fmt.Errorf("ablate: the floor's rollout opened %d connections, want one", len(t))
	}
	in, marks := t[0].Read()
	return streamfloor.Parse(in, marks, r.Count)
}
