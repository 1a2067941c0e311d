package ablate

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/internal/streamfloor"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// LoadConfig is one load run: Clients clients at once, each running the
// workload's rollout in Mode again and again for Duration, against a tether
// started as a child process (Server, so that its CPU and memory are its
// own, apart from the clients') or at URL.
type LoadConfig struct {
	Clients  int
	Mode     clienttools.Mode
	Workload Workload
	Duration time.Duration
	TPS      float64 // the server's speed: each stream's schedule is 1/TPS a token
	// EngineStep is the served engine's step (serve --engine-step), for
	// the result's label: Server passes it.
	EngineStep time.Duration
	// Server is the command that starts the server; it must print
	// "listening on URL" on its first line of output. Ignored with URL.
	Server []string
	// ServerEnv is added to this process's environment for Server
	// ("NAME=VALUE" each).
	ServerEnv []string
	// ServerLog receives what the server writes on its stderr (its log,
	// an access line a request); nil keeps only its last lines, for the
	// error when it fails to start.
	ServerLog   io.Writer
	URL, APIKey string
	// Fallbacks are more servers beside URL, sharing its Redis (durable
	// suspended rollouts): client i starts its rollouts on the (i mod n)th
	// of the n, and resumes a suspended rollout on the next when its
	// server closes with 1012 or goes (clienttools.Client.Fallbacks); after
	// a failed rollout it starts the next on the next server. Handovers
	// counts the resumes.
	Fallbacks []string
	Encoding  protocol.Encoding // the clients' frames, as Config.Encoding
	Progress  func(elapsed, total time.Duration)

	// Floor, when set, is the command that serves the streaming floor
	// (tether ablate floor, with the run's timing), to which the run adds
	// --recording RecordingFile. The run then first records one rollout
	// of the workload against a server started with Recorder (Server's
	// command, unpaced, every delta sent), writes it to RecordingFile,
	// and runs the clients against the floor and the server in turn,
	// Rounds rounds of Duration/Rounds each, the floor first (see
	// runFloored): Duration is each one's time under load.
	Floor, Recorder []string
	RecordingFile   string
	Rounds          int
	// FloorCost is what Floor's command has the floor spend besides its
	// own work (its --cost-step and --cost-token), for the floor's result.
	FloorCost streamfloor.Cost
	// DecodeAll has the clients decode every event whole, as a client
	// that watches them all would, rather than only those they read
	// (Rollout.Events): what the client kit's filter saves.
	DecodeAll bool
	// ClientTLS, when set, is the clients' TLS configuration: Server and
	// Floor serve HTTPS and WSS with a certificate it trusts (ablate
	// --load-tls); the recorder serves plain HTTP, its frames the same.
	ClientTLS *tls.Config
}

// LoadResult is what a load run measured. Token delivery lag is each
// token's arrival on the client against its stream's own schedule (see
// lagRecorder); CPU is in cores (seconds of CPU a second), client and
// server apart.
type LoadResult struct {
	Clients  int     `json:"clients"`
	Mode     string  `json:"mode"`
	Workload string  `json:"workload"`
	TPS      float64 `json:"tps"`
	// EngineStepMS is the served engine's step, 0 for none.
	EngineStepMS float64 `json:"engine_step_ms,omitempty"`
	// DecodeAll: the clients decoded every event whole (LoadConfig.DecodeAll).
	DecodeAll bool `json:"clients_decode_all,omitempty"`
	// TLS: the server served its clients over TLS (LoadConfig.ClientTLS).
	TLS       bool    `json:"tls,omitempty"`
	DurationS float64 `json:"duration_s"`
	Rollouts  int     `json:"rollouts"`  // completed within the duration
	Servers   int     `json:"servers"`   // the servers the clients ran on (LoadConfig.Fallbacks)
	Handovers int     `json:"handovers"` // suspended rollouts resumed after their connection closed or dropped (on the same server or the next)
	// Refused are the rollouts refused before they began (their server
	// draining or down) and tried again on the next server, by code:
	// with several servers only; with one they are errors.
	Refused    map[string]int `json:"refused,omitempty"`
	Tokens     int64          `json:"tokens"` // streamed tokens that reached the clients
	Frames     int64          `json:"delta_frames"`
	Steps      int64          `json:"steps"` // model steps that ended on a client: a pause (suspended) or a turn's response
	TokensPerS float64        `json:"tokens_per_s"`
	FramesPerS float64        `json:"delta_frames_per_s"`
	LagP50US   float64        `json:"lag_p50_us"`
	LagP99US   float64        `json:"lag_p99_us"`
	LagMaxUS   float64        `json:"lag_max_us"`
	// Errors counts the rollouts that failed, by error code (or the
	// client's error when the server sent none).
	Errors    map[string]int `json:"errors"`
	ServerCPU float64        `json:"server_cpu_cores"`
	ClientCPU float64        `json:"client_cpu_cores"`
	// CPU per streamed token: cores over tokens a second, in microseconds.
	ServerCPUPerToken float64 `json:"server_cpu_us_per_token"`
	ClientCPUPerToken float64 `json:"client_cpu_us_per_token"`
	// Server CPU per delta frame, and per model step, in microseconds:
	// a step's tool round trip and its tokens together (a step streams
	// Tokens/Steps of them).
	ServerCPUPerFrame float64 `json:"server_cpu_us_per_frame"`
	ServerCPUPerStep  float64 `json:"server_cpu_us_per_step"`
	// StepMS is a model step's mean wall time on a client, in
	// milliseconds: the clients' time over the steps they ended (each
	// client runs step after step). It is the step's model time (its
	// first token's, its tokens') and its round trip through the client,
	// the server and the machine under this load.
	StepMS float64 `json:"step_ms"`
	// ServerGCShare is the share of the server's busy CPU its garbage
	// collector took over the run (Go's estimates, off its /metrics), 0
	// when the server does not say.
	ServerGCShare float64 `json:"server_gc_share"`
	// FlushHolds counts the server's connection writers' held flushes
	// over the run (tether_flush_holds_total off its /metrics): they hold
	// only while the server is saturated (package flushhold); 0 when the
	// server does not say.
	FlushHolds       float64      `json:"flush_holds"`
	FlushHoldsPerS   float64      `json:"flush_holds_per_s"`
	ServerRSSMaxMiB  float64      `json:"server_rss_max_mib"`
	ServerGoroutines int          `json:"server_goroutines_max"`
	Samples          []LoadSample `json:"samples"`

	// CostStepUS and CostTokenUS are, in the floor's result, the CPU it
	// spent besides its own work a step and a token (LoadConfig.FloorCost),
	// in microseconds.
	CostStepUS  float64 `json:"cost_step_us,omitempty"`
	CostTokenUS float64 `json:"cost_token_us,omitempty"`

	// With a floor (LoadConfig.Floor): the floor's own result, measured
	// in the same run, its rounds beside this result's, and this result
	// against it.
	Floor   *LoadResult  `json:"floor,omitempty"`
	Rounds  []LoadRound  `json:"rounds,omitempty"`
	VsFloor *FloorRatios `json:"vs_floor,omitempty"`

	// What add gathers for summarize.
	lags                 *histogram
	elapsed              time.Duration
	serverCPU, clientCPU time.Duration
	gc, busy             float64
}

// LoadSample is one second of a load run.
type LoadSample struct {
	T                float64 `json:"t_s"`
	ServerRSSMiB     float64 `json:"server_rss_mib"`
	ClientRSSMiB     float64 `json:"client_rss_mib"`
	ServerGoroutines int     `json:"server_goroutines"`
	ServerCPU        float64 `json:"server_cpu_cores"`
	ClientCPU        float64 `json:"client_cpu_cores"`
	TokensPerS       float64 `json:"tokens_per_s"`
	LagP99US         float64 `json:"lag_p99_us"`
}

// RunLoad runs one load run: against the server alone, or, with
// cfg.Floor, against the streaming floor and the server in turn.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if cfg.Clients < 1 || cfg.Duration <= 0 || cfg.Workload.Tools == nil || cfg.TPS <= 0 {
		return nil, errors.New("ablate: a load run needs clients, a duration, a workload and a paced speed")
	}
	if len(cfg.Floor) > 0 {
		return runFloored(ctx, cfg)
	}
	srv, err := startServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res := cfg.newResult()
	res.TLS = srv.tls()
	t, err := runClients(ctx, cfg, srv, cfg.Duration, 0, 0, cfg.Progress)
	if err != nil {
		return nil, err
	}
	res.add(t)
	res.summarize()
	return res, nil
}

// newResult is an empty result of cfg's run.
func (cfg LoadConfig) newResult() *LoadResult {
	return &LoadResult{Clients: cfg.Clients, Mode: Design{Mode: cfg.Mode, Encoding: cfg.Encoding}.String(), Workload: cfg.Workload.Name, TPS: cfg.TPS,
		EngineStepMS: float64(cfg.EngineStep) / 1e6, DecodeAll: cfg.DecodeAll,
		Servers: 1 + len(cfg.Fallbacks), Errors: map[string]int{}, Refused: map[string]int{}, lags: &histogram{}}
}

// tally is what one stretch of a load run measured against one server:
// its counts, its lags, and the CPU the server and the clients took.
type tally struct {
	res                  LoadResult // its counts only
	lags                 *histogram
	elapsed              time.Duration
	serverCPU, clientCPU time.Duration
	gc, busy             float64 // the server's collector's CPU seconds, and its busy ones
	holds                float64 // the server's flush holds
	samples              []LoadSample
}

// runClients runs cfg.Clients clients against srv for d, each running the
// workload's rollout again and again; round numbers their rollouts' keys,
// and t0 is the time the server has been under load before (its samples'
// times count on from it).
func runClients(ctx context.Context, cfg LoadConfig, srv *server, d time.Duration, round int, t0 time.Duration, progress func(elapsed, total time.Duration)) (*tally, error) {
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	t := &tally{res: LoadResult{Errors: map[string]int{}, Refused: map[string]int{}}}
	res := &t.res
	lags := &lagWindows{}
	var mu sync.Mutex // guards res's counts
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	gc0, holds0 := readGCTimes(ctx, srv), flushHolds(ctx, srv)
	server0, client0 := procCPU(srv.pid), processCPU()
	start := time.Now()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t.samples = sample(runCtx, srv, lags, start, t0, progress, d)
	}()
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Go(func() {
			rec := &lagRecorder{tps: cfg.TPS, r: r, out: lags, start: start, now: time.Now, callTurn: -1}
			var onCall func(clienttools.Call)
			if cfg.Mode == clienttools.ModeSuspend {
				onCall = rec.call // its pauses are not decoded whole: see lagEvents
			}
			onEvent, events := rec.event, lagEvents
			if cfg.DecodeAll {
				onEvent = func(ev protocol.Event) { // every event decoded, the recorder's passed on
					if t := protocol.Type(ev); slices.Contains(lagEvents, t) {
						rec.event(ev)
					}
				}
				events = nil
			}
			bases := append([]string{srv.base}, cfg.Fallbacks...)
			at, refusals := i%len(bases), 0
			for n := 0; runCtx.Err() == nil; n++ {
				c := &clienttools.Client{BaseURL: bases[at], APIKey: cfg.APIKey, Encoding: cfg.Encoding, HTTPClient: srv.client()}
				for k := 1; k < len(bases); k++ {
					c.Fallbacks = append(c.Fallbacks, bases[(at+k)%len(bases)])
				}
				key := fmt.Sprintf("load-%d-%d-%d", round, i, n)
				out, err := c.Run(runCtx, clienttools.Rollout{Mode: cfg.Mode, Funcs: cfg.Workload.Tools(""), OnEvent: onEvent, Events: events, OnCall: onCall,
					Request: &protocol.CreateRequest{Model: cfg.Workload.Model, Input: cfg.Workload.input(), PromptCacheKey: &key}})
				// Refused before it began (its server draining, or down):
				// with more servers, tried again on the next at once.
				refused := err != nil && out.Response == nil && len(out.Turns) == 0
				mu.Lock()
				switch {
				case err == nil:
					res.Rollouts++
				case runCtx.Err() != nil:
				case refused && len(bases) > 1:
					res.Refused[errorCode(err)]++
				default:
					res.Errors[errorCode(err)]++
				}
				if runCtx.Err() == nil {
					res.Handovers += out.Reconnects
				}
				mu.Unlock()
				if refused && len(bases) > 1 {
					at = (at + 1) % len(bases)
					if refusals++; refusals%len(bases) == 0 {
						sleep(runCtx, 10*time.Millisecond) // every server refused it: a breath before the next round
					}
					continue
				}
				refusals = 0
				if err != nil {
					at = (at + 1) % len(bases) // its server may be the one that went
					rec.drop()                 // a step cut off has no schedule to keep
					// A refused rollout is tried again after a breath, not in
					// a loop as fast as the server can refuse it.
					sleep(runCtx, 10*time.Millisecond)
				}
			}
			mu.Lock()
			res.Tokens += rec.tokens
			res.Frames += rec.frames
			res.Steps += rec.steps
			mu.Unlock()
		})
	}
	wg.Wait()
	t.elapsed = time.Since(start)
	t.serverCPU, t.clientCPU = procCPU(srv.pid)-server0, processCPU()-client0
	cancel()
	<-sampled
	gc1 := readGCTimes(ctx, srv)
	t.gc, t.busy = gc1.gc-gc0.gc, (gc1.total-gc0.total)-(gc1.idle-gc0.idle)
	t.holds = flushHolds(ctx, srv) - holds0
	t.lags = lags.all()
	return t, nil
}

// add adds t's counts and CPU to r.
func (r *LoadResult) add(t *tally) {
	r.Rollouts += t.res.Rollouts
	r.Handovers += t.res.Handovers
	for code, n := range t.res.Errors {
		r.Errors[code] += n
	}
	for code, n := range t.res.Refused {
		r.Refused[code] += n
	}
	r.Tokens += t.res.Tokens
	r.Frames += t.res.Frames
	r.Steps += t.res.Steps
	r.lags.merge(t.lags)
	r.elapsed += t.elapsed
	r.serverCPU += t.serverCPU
	r.clientCPU += t.clientCPU
	r.gc += t.gc
	r.busy += t.busy
	r.FlushHolds += t.holds
	r.Samples = append(r.Samples, t.samples...)
}

// summarize works out r's rates, quantiles and shares from what add added.
func (r *LoadResult) summarize() {
	r.DurationS = r.elapsed.Seconds()
	if r.DurationS <= 0 {
		return
	}
	r.TokensPerS, r.FramesPerS = float64(r.Tokens)/r.DurationS, float64(r.Frames)/r.DurationS
	r.LagP50US, r.LagP99US, r.LagMaxUS = r.lags.quantile(0.5), r.lags.quantile(0.99), r.lags.quantile(1)
	r.ServerCPU, r.ClientCPU = r.serverCPU.Seconds()/r.DurationS, r.clientCPU.Seconds()/r.DurationS
	if r.busy > 0 {
		r.ServerGCShare = r.gc / r.busy
	}
	r.FlushHoldsPerS = r.FlushHolds / r.DurationS
	for _, s := range r.Samples {
		r.ServerRSSMaxMiB = max(r.ServerRSSMaxMiB, s.ServerRSSMiB)
		r.ServerGoroutines = max(r.ServerGoroutines, s.ServerGoroutines)
	}
	if r.Tokens > 0 {
		r.ServerCPUPerToken, r.ClientCPUPerToken = perUnit(r.serverCPU, r.Tokens), perUnit(r.clientCPU, r.Tokens)
	}
	if r.Frames > 0 {
		r.ServerCPUPerFrame = perUnit(r.serverCPU, r.Frames)
	}
	if r.Steps > 0 {
		r.ServerCPUPerStep = perUnit(r.serverCPU, r.Steps)
		r.StepMS = stepMS(r.Clients, r.elapsed, r.Steps)
	}
}

// stepMS is the mean wall time of a step that clients took steps in
// elapsed, in milliseconds.
func stepMS(clients int, elapsed time.Duration, steps int64) float64 {
	return float64(clients) * float64(elapsed) / 1e6 / float64(max(steps, 1))
}

// perUnit is d over n, in microseconds.
func perUnit(d time.Duration, n int64) float64 { return float64(d.Microseconds()) / float64(n) }

// errorCode names a failed rollout's error: the server's code, or the
// client's own error.
func errorCode(err error) string {
	var re *clienttools.ResponseError
	if errors.As(err, &re) && re.Code != "" {
		return re.Code
	}
	if perr, ok := errors.AsType[*protocol.Error](err); ok && perr.Code != "" {
		return perr.Code // a refusal of the upgrade, wrapped in the dial's error
	}
	if perr := protocol.AsError(err); perr != nil && perr.Code != "" {
		return perr.Code
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return "client: " + msg
}

// sample reads the server's and the client's CPU, memory and goroutines
// every second until ctx ends; t0 is the time the server was under load
// before start, from which the samples' times count on.
func sample(ctx context.Context, srv *server, lags *lagWindows, start time.Time, t0 time.Duration, progress func(elapsed, total time.Duration), total time.Duration) []LoadSample {
	var out []LoadSample
	prevServer, prevClient, prevAt := procCPU(srv.pid), processCPU(), time.Now()
	var prevTokens int64
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case now := <-t.C:
			s, c := procCPU(srv.pid), processCPU()
			dt := now.Sub(prevAt).Seconds()
			sec := int(now.Sub(start) / time.Second)
			win, tokens := lags.window(sec - 1)
			out = append(out, LoadSample{T: (t0 + now.Sub(start)).Seconds(), ServerRSSMiB: procRSS(srv.pid), ClientRSSMiB: procRSS(os.Getpid()),
				ServerGoroutines: goroutines(ctx, srv), ServerCPU: (s - prevServer).Seconds() / dt, ClientCPU: (c - prevClient).Seconds() / dt,
				TokensPerS: float64(tokens-prevTokens) / dt, LagP99US: win.quantile(0.99)})
			prevServer, prevClient, prevAt, prevTokens = s, c, now, tokens
			if progress != nil {
				progress(now.Sub(start), total)
			}
		}
	}
}

// gcTimes are Go's estimates of a server's CPU seconds: its garbage
// collector's, its Ps' in all, and their idle time, off its /metrics.
type gcTimes struct{ gc, total, idle float64 }

func readGCTimes(ctx context.Context, srv *server) gcTimes {
	return gcTimes{metric(ctx, srv, "go_cpu_classes_gc_total_cpu_seconds_total"),
		metric(ctx, srv, "go_cpu_classes_total_cpu_seconds_total"), metric(ctx, srv, "go_cpu_classes_idle_cpu_seconds_total")}
}

// flushHolds reads tether_flush_holds_total off the server's /metrics; 0
// when it has none to read.
func flushHolds(ctx context.Context, srv *server) float64 {
	return metric(ctx, srv, "tether_flush_holds_total")
}

// goroutines reads go_goroutines off the server's /metrics; 0 when it has
// none to read.
func goroutines(ctx context.Context, srv *server) int {
	return int(metric(ctx, srv, "go_goroutines"))
}

// released is how many responses the server has ended released to their
// checkpoints (hibernated, handed over, taken over elsewhere), from its
// /metrics.
func released(ctx context.Context, srv *server) float64 {
	return metricSum(ctx, srv, "tether_responses_total{", `status="released"`)
}

// metric reads an unlabelled metric off the server's /metrics; 0 when it has
// none to read.
func metric(ctx context.Context, srv *server, name string) float64 {
	return metricSum(ctx, srv, name+" ", "")
}

// metricSum sums the values of the lines of the server's /metrics that
// begin with prefix and hold match; 0 when there are none to read.
func metricSum(ctx context.Context, srv *server, prefix, match string) float64 {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(srv.base, "/v1")+"/metrics", nil)
	resp, err := srv.client().Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sum := 0.0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, match) {
			continue
		}
		var n float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n)
		sum += n
	}
	return sum
}
