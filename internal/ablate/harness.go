package ablate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost"
	"github.com/tether-run/tether/runtime/prommetrics"
	"github.com/tether-run/tether/runtime/redisstore"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// Config is one ablation run: a workload through every mode, at every speed,
// Reps times.
type Config struct {
	Workload Workload
	// Traces are the traces the in-process servers serve as replay:NAME
	// (nil: the embedded ones); TraceDir is where those beyond the
	// embedded ones are, for a server started as a child (--load).
	Traces   []*sampler.Trace
	TraceDir string
	Modes    []Design
	// Speeds are the models' output tokens per second, one server each; 0
	// is unpaced. With URL, only one: the server's.
	Speeds      []float64
	TTFT        time.Duration
	PrefillRate float64
	// Cost is the in-process server's cost model (safety classifier,
	// simulated hops, post-inference work); StoreTokens keeps rendered
	// tokens with its stored responses.
	Cost        cost.Options
	StoreTokens bool
	// Store is the in-process server's store: "" or "memory", or a
	// redis:// URL (chained mode then reads and writes Redis).
	Store string
	Reps  int
	// Precision, when above 0, adds rounds past Reps (the modes
	// interleaved, their order rotating on) until every figure of the
	// headline at a speed is within ±Precision of it at 95% (see
	// Imprecise), or MaxTime has passed since the run began; by the
	// intervals over rounds when PrecisionOverRounds (from MinRounds
	// rounds), which hold the run-to-run spread, else by those over turns.
	Precision           float64
	PrecisionOverRounds bool
	MaxTime             time.Duration
	// ToolScale, when above 0, multiplies every simulated tool's wait (a
	// replayed trace's recorded durations, a synthetic workload's
	// latency): the sweep's tool-scale knob. Real tools take what they take.
	ToolScale float64
	// URL targets a running server (its base URL, as OpenAI clients take
	// it) instead of one started in-process. Its timing must be the one
	// given here, or the model time ablate computes is wrong: the first
	// mode's warm-up checks it (checkTiming), and a run against a server
	// whose model clearly runs at another fails with a *TimingError. Its
	// caches cannot be reset, so trials are kept apart by prompt_cache_key
	// alone.
	URL    string
	APIKey string
	// Fallbacks are more servers beside URL that share its Redis, for a
	// load run (LoadConfig.Fallbacks).
	Fallbacks []string
	// WTURL is that server's WebTransport base URL (https://HOST:PORT/v1),
	// for the WebTransport designs; CertHash pins its certificate (hex
	// SHA-256, as tether serve prints it).
	WTURL, CertHash string
	// Progress, when set, is told of each trial as it starts.
	Progress func(done, total int, trial string)

	// serve, when set, starts the server the config runs against, at its
	// base URL, afresh each round of an interleaved run (RunBuilds).
	serve func(context.Context) (base string, stop func(), err error)
}

// Trial is one rollout in one mode at one speed. Durations are in
// microseconds (fractional: an echo round trip takes tens of them).
type Trial struct {
	Mode           string  `json:"mode"`
	TPS            float64 `json:"tps"`
	Rep            int     `json:"rep"`
	PromptCacheKey string  `json:"prompt_cache_key"`
	ElapsedUS      float64 `json:"elapsed_us"`  // end to end, on the client
	ModelUS        float64 `json:"model_us"`    // the model's time for every step (see Turn)
	ToolsUS        float64 `json:"tools_us"`    // waiting on client tools
	OverheadUS     float64 `json:"overhead_us"` // elapsed - model - tools
	CPUUS          float64 `json:"cpu_us"`      // process CPU, client and server (in-process) together
	Calls          int     `json:"calls"`
	BytesSent      int     `json:"bytes_sent"`
	BytesReceived  int     `json:"bytes_received"`
	Reconnects     int     `json:"reconnects"`
	// Resumes counts the background turns' streams cut and resumed
	// (background: one a turn).
	Resumes int `json:"resumes,omitempty"`
	// Paths counts the responses the server served for the trial by
	// transport/design/state ("ws/turns/cache"), and its pauses
	// ("pauses"): that the mode took its own path. In-process only.
	Paths map[string]int `json:"paths,omitempty"`
	// Journal is what a durable trial wrote to its journal. In-process only.
	Journal *JournalUse `json:"journal,omitempty"`
	// Agents is how many sub-agents the trial's rollout spawned (a
	// multi-agent workload's): its model and tool time are then those of
	// its critical path, and its turns' overheads are not its own.
	Agents int    `json:"agents,omitempty"`
	Turns  []Turn `json:"turns"`
}

// rootRequests are the turns of the root agent's a client's request began:
// the create, and the appends (or injects) that answered the root's
// pauses, which the server counts as its paths and pauses. A sub-agent's
// waits are no pauses of the response's.
func rootRequests(turns []clienttools.Turn) int {
	n := 0
	for _, t := range turns {
		if t.Agent == "" {
			n++
		}
	}
	return n
}

// Turn is one request of a trial and what answered it, up to the pause or
// the end of the response.
type Turn struct {
	Turn          int     `json:"turn"`
	ContextTokens int     `json:"context_tokens"` // the prompt the step read
	CachedTokens  int     `json:"cached_tokens"`
	OutputTokens  int     `json:"output_tokens"`
	ModelUS       float64 `json:"model_us"`       // the model's time for the step: the timing model's, plus pacer_late_us
	PacerLateUS   float64 `json:"pacer_late_us"`  // how late the simulated model's last token came (timer resolution; the server's timings)
	LatencyUS     float64 `json:"latency_us"`     // from sending the request to the pause or end
	FirstEventUS  float64 `json:"first_event_us"` // from sending the request to its first event
	OverheadUS    float64 `json:"overhead_us"`    // latency - model
	// FloorUS is an echo of the same shape on the same loopback after as
	// long an idle as preceded the turn's request (FloorIdleUS); WarmFloorUS
	// the fastest of warmFloorTries echoes of it back to back.
	FloorUS      float64 `json:"floor_us"`
	FloorIdleUS  float64 `json:"floor_idle_us"`
	WarmFloorUS  float64 `json:"warm_floor_us"`
	RenderUS     float64 `json:"render_us"`     // the server's tokenizing of the turn's new items (its timings)
	RenderTokens int     `json:"render_tokens"` // how many tokens that was
	SampleUS     float64 `json:"sample_us"`     // the server's time in the model for the turn (its timings): model_us and the pacer's lateness
	ToolsUS      float64 `json:"tools_us"`
	// The client's JSON time: encoding the request and decoding the turn's
	// events (most of them while the model streams).
	ClientEncodeUS float64 `json:"client_encode_us"`
	ClientDecodeUS float64 `json:"client_decode_us"`
	Calls          int     `json:"calls"`
	BytesSent      int     `json:"bytes_sent"`
	BytesReceived  int     `json:"bytes_received"`
	Events         int     `json:"events"`
	// Server is the server's timing of the turn, phase by phase (in
	// process, or from a --url server that sends timings).
	Server *protocol.Timings `json:"server,omitempty"`
}

// target is the server the trials of one speed run against.
type target struct {
	base    string
	durable string                 // the base URL of the in-process server that checkpoints (suspend+durable)
	journal *countedJournal        // that server's store
	wt      wtTarget               // its WebTransport endpoint, when a design needs it
	caches  []*sampler.PrefixCache // reset before each trial; none with URL
	srv     *runtime.Server        // nil with URL
	metrics *prommetrics.Metrics   // srv's; nil with URL
	stop    func()
}

// Run runs the trials: for each speed, Reps rounds of every mode, the
// modes' order rotating from round to round so that drift of the machine
// hits them alike. Before each trial the models' prefix caches are emptied
// (in-process), and each trial has its own prompt_cache_key, so no trial
// reads another's prompts.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if len(cfg.Modes) == 0 || len(cfg.Speeds) == 0 || cfg.Reps < 1 || cfg.Workload.Tools == nil {
		return nil, errors.New("ablate: a config needs modes, speeds, reps and a workload")
	}
	if cfg.URL != "" && len(cfg.Speeds) > 1 {
		return nil, errors.New("ablate: a server at --url streams at one speed, its own: give --tps one value, the server's")
	}
	if err := cfg.Workload.runsIn(cfg.Modes); err != nil {
		return nil, err
	}
	floor, closeFloor, err := openFloor(ctx, cfg.Modes)
	if err != nil {
		return nil, err
	}
	defer closeFloor()

	res := &Results{Schema: SchemaVersion, Started: time.Now().UTC(), Machine: machine(), Config: configOf(cfg)}
	res.Machine.InProcess = cfg.URL == ""
	run := strconv.FormatInt(res.Started.UnixNano(), 36) // keeps keys apart across runs against one --url
	total, done := len(cfg.Speeds)*cfg.Reps*len(cfg.Modes), 0
	began := time.Now()
	for _, tps := range cfg.Speeds {
		timing := sampler.Timing{TPS: tps, TTFT: cfg.TTFT, PrefillRate: cfg.PrefillRate}
		tg, err := startTarget(cfg, timing)
		if err != nil {
			return nil, err
		}
		err = warmUp(ctx, cfg, tg, timing, run)
		var left []string // the figures not yet precise enough, with Precision
		for rep := 0; err == nil; rep++ {
			if rep >= cfg.Reps {
				if cfg.Precision <= 0 {
					break
				}
				if left = Imprecise(summarize(trialsAt(res.Trials, tps)), cfg.Precision, cfg.PrecisionOverRounds); len(left) == 0 || time.Since(began) > cfg.MaxTime {
					res.Precision = append(res.Precision, PrecisionOutcome{TPS: tps, Target: cfg.Precision, OverRounds: cfg.PrecisionOverRounds,
						Rounds: rep, Reached: len(left) == 0, Left: left})
					break
				}
				total += len(cfg.Modes)
			}
			for i := range cfg.Modes {
				mode := cfg.Modes[(i+rep)%len(cfg.Modes)]
				if cfg.Progress != nil {
					cfg.Progress(done, total, fmt.Sprintf("%s at %v tok/s, round %d", mode, tps, rep+1))
				}
				key := fmt.Sprintf("ablate-%s-%d", run, done)
				var t *Trial
				if t, err = trial(ctx, cfg, tg, timing, mode, key); err != nil {
					err = fmt.Errorf("ablate: %s at %v tok/s, round %d: %w", mode, tps, rep+1, err)
					break
				}
				t.TPS, t.Rep = tps, rep
				if err = measureFloor(ctx, floor, mode, t); err != nil {
					break
				}
				res.Trials = append(res.Trials, *t)
				done++
			}
		}
		tg.stop()
		if err != nil {
			return nil, err
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(done, total, "done")
	}
	res.Summary = summarize(res.Trials)
	return res, nil
}

// openFloor starts the echo server the floor is measured against (with
// WebTransport when a mode needs it) and dials it; closeFloor ends both.
func openFloor(ctx context.Context, modes []Design) (floor *echoClient, closeFloor func(), err error) {
	echo, err := startEcho(slices.ContainsFunc(modes, Design.webTransport))
	if err != nil {
		return nil, nil, err
	}
	if floor, err = echo.dial(ctx); err != nil {
		echo.close()
		return nil, nil, err
	}
	return floor, func() { floor.close(); echo.close() }, nil
}

// startTarget starts an in-process tether at timing on loopback, or points
// at cfg.URL.
func startTarget(cfg Config, timing sampler.Timing) (*target, error) {
	needWT := slices.ContainsFunc(cfg.Modes, Design.webTransport)
	needDurable := slices.ContainsFunc(cfg.Modes, func(d Design) bool { return d.Durable })
	if cfg.URL != "" {
		if needDurable {
			return nil, errors.New("ablate: suspend+durable runs against the in-process servers (one of them checkpoints), not --url: run it without --url, or compare two servers of your own as suspend")
		}
		if needWT && cfg.WTURL == "" {
			return nil, errors.New("ablate: the WebTransport designs against --url need the server's WebTransport address (--wt-url) too")
		}
		return &target{base: cfg.URL, wt: wtTarget{base: cfg.WTURL, hash: cfg.CertHash}, stop: func() {}}, nil
	}
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	traces := cfg.Traces
	if traces == nil {
		if traces, err = sampler.LoadTraces(); err != nil {
			return nil, err
		}
	}
	engine := sampler.NewEngine() // one batch for every backend, as in tether serve
	scripted := sampler.NewScripted(r, timing)
	scripted.SetEngine(engine)
	models := map[string]runtime.Sampler{sampler.ScriptedModel: scripted}
	caches := []*sampler.PrefixCache{scripted.Cache()}
	for _, tr := range traces {
		m := sampler.NewReplay(r, timing, tr)
		m.SetEngine(engine)
		models[sampler.ReplayPrefix+tr.Name] = m
		caches = append(caches, m.Cache())
	}
	metrics := prommetrics.New() // paths reads it
	costOpts := cfg.Cost
	costOpts.OnHop = metrics.Hop
	hooks, err := cost.New(costOpts)
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{Models: models, Renderer: r, Hooks: hooks, StoreTokens: cfg.StoreTokens, Observer: metrics,
		EngineLate: engine.Late}
	var closeStore func() error
	var checkpoints runtime.Checkpoints = runtime.NewMemoryCheckpoints()
	if cfg.Store != "" && cfg.Store != "memory" {
		rs, err := redisstore.New(cfg.Store, redisstore.Options{})
		if err != nil {
			return nil, err
		}
		if err := rs.Ping(context.Background()); err != nil {
			rs.Close()
			return nil, fmt.Errorf("ablate: the store: %w", err)
		}
		opts.Store, checkpoints, closeStore = rs, rs, rs.Close
	}
	srv, base, stopSrv, err := serveInProcess(opts, metrics)
	if err != nil {
		return nil, err
	}
	tg := &target{base: base, caches: caches, srv: srv, metrics: metrics}
	var stopDurable func(context.Context)
	if needDurable {
		// The same models (and caches) and options, and checkpoints: one
		// server cannot checkpoint one design's rollouts and not another's.
		tg.journal = &countedJournal{Checkpoints: checkpoints}
		opts.Checkpoints = tg.journal
		if _, tg.durable, stopDurable, err = serveInProcess(opts, metrics); err != nil {
			stopSrv(context.Background())
			return nil, err
		}
	}
	var wt *webtransport.Endpoint
	if needWT {
		if wt, tg.wt, err = serveWebTransport(srv); err != nil {
			stopSrv(context.Background())
			return nil, err
		}
	}
	tg.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopSrv(ctx)
		if stopDurable != nil {
			stopDurable(ctx)
		}
		if wt != nil {
			wt.Close()
		}
		if closeStore != nil {
			closeStore()
		}
	}
	return tg, nil
}

// serveInProcess serves a tether with opts on a loopback port, its metrics
// on /metrics: its base URL, and how to stop it.
func serveInProcess(opts runtime.Options, metrics *prommetrics.Metrics) (*runtime.Server, string, func(context.Context), error) {
	srv, err := runtime.NewServer(opts)
	if err != nil {
		return nil, "", nil, err
	}
	srv.Handle("GET /metrics", metrics.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/v1", func(ctx context.Context) {
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
	}, nil
}

// wtTarget is a server's WebTransport endpoint: its base URL and the hash
// of its certificate.
type wtTarget struct{ base, hash string }

// serveWebTransport serves srv over WebTransport on a loopback UDP port,
// with a self-signed certificate.
func serveWebTransport(srv *runtime.Server) (*webtransport.Endpoint, wtTarget, error) {
	cert, err := webtransport.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
	if err != nil {
		return nil, wtTarget{}, err
	}
	wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
	if err != nil {
		return nil, wtTarget{}, err
	}
	return wt, wtTarget{base: wt.URL(), hash: wt.CertificateHash()}, nil
}

// client is a client kit for design d against the target.
func (tg *target) client(cfg Config, d Design) *clienttools.Client {
	c := &clienttools.Client{BaseURL: tg.base, APIKey: cfg.APIKey, Encoding: d.Encoding}
	if d.Durable {
		c.BaseURL = tg.durable
	}
	if d.webTransport() {
		c.BaseURL, c.Transport, c.CertHash = tg.wt.base, clienttools.TransportWebTransport, tg.wt.hash
	}
	return c
}

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
