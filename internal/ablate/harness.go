package ablate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/cost"
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
