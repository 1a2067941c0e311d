package ablate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/sampler"
)

// ParkConfig is one parking run: Rollouts suspended rollouts, each on its
// own WebSocket with about ContextTokens of context, parked on a client
// call and held there, against a tether started as a child process
// (Server) whose memory is then read.
type ParkConfig struct {
	Rollouts      int
	ContextTokens int
	Server        []string  // as LoadConfig.Server; it must serve /debug/pprof (--pprof)
	ServerEnv     []string  // as LoadConfig.ServerEnv
	ServerLog     io.Writer // as LoadConfig.ServerLog
	URL           string    // a server's base URL instead, with /debug/pprof (its RSS is not read)
	Progress      func(done, total int)
	// Hibernate: the server hibernates parked rollouts (serve
	// --hibernate-after, with --store Redis): each client disconnects once
	// its rollout is parked, the run waits until every rollout has left
	// the server's memory, and
	// measures the server and Redis (at Redis, a redis:// URL) with every
	// rollout hibernated. Before parking, Wakes rollouts are parked and
	// answered at once (hot), and after, Wakes hibernated ones are
	// answered from new connections: the time from the append to its
	// first event, for each.
	Hibernate bool
	Redis     string
	Wakes     int
	// Floor, Recorder and RecordingFile are as LoadConfig's: with them,
	// the rollouts are parked on the streaming floor first, replaying
	// the pause a rollout got from a server started with Recorder, and
	// the result holds the floor's beside the server's (not with
	// Hibernate).
	Floor, Recorder []string
	RecordingFile   string
}

// ParkResult is what parking cost the server: its resident memory, its
// heap in use after a collection, and its goroutines, before and with
// every rollout parked, and per rollout.
type ParkResult struct {
	Rollouts             int     `json:"rollouts"`
	ContextTokens        int     `json:"context_tokens"` // of each, as the server counted them
	ParkSeconds          float64 `json:"park_seconds"`
	BaselineRSSMiB       float64 `json:"baseline_rss_mib"`
	ParkedRSSMiB         float64 `json:"parked_rss_mib"`
	BaselineHeapMiB      float64 `json:"baseline_heap_inuse_mib"`
	ParkedHeapMiB        float64 `json:"parked_heap_inuse_mib"`
	RSSPerRollout        float64 `json:"rss_bytes_per_rollout"`
	HeapPerRollout       float64 `json:"heap_bytes_per_rollout"`
	BaselineStackMiB     float64 `json:"baseline_stack_mib"`
	ParkedStackMiB       float64 `json:"parked_stack_mib"`
	BaselineGoroutines   int     `json:"baseline_goroutines"`
	ParkedGoroutines     int     `json:"parked_goroutines"`
	GoroutinesPerRollout float64 `json:"goroutines_per_rollout"`

	// With Hibernate: Redis's used_memory before and with every rollout
	// hibernated, per rollout, and the append's time to its first event,
	// to a rollout hot (parked in memory on its connection) and to one
	// hibernated (woken from its checkpoint, on a new connection).
	HibernateSeconds     float64   `json:"hibernate_seconds,omitempty"`
	RedisBaselineMiB     float64   `json:"redis_baseline_mib,omitempty"`
	RedisHibernatedMiB   float64   `json:"redis_hibernated_mib,omitempty"`
	RedisBytesPerRollout float64   `json:"redis_bytes_per_rollout,omitempty"`
	HotAppendMs          Quantiles `json:"hot_append_first_event_ms,omitzero"`
	WakeAppendMs         Quantiles `json:"wake_append_first_event_ms,omitzero"`

	// With a floor: the floor's result, parked with the same requests,
	// and the server's heap and RSS a rollout over the floor's.
	Floor       *ParkResult `json:"floor,omitempty"`
	HeapVsFloor float64     `json:"heap_per_rollout_vs_floor,omitempty"`
	RSSVsFloor  float64     `json:"rss_per_rollout_vs_floor,omitempty"`
}

// Quantiles are a sample's median and 99th percentile, and its size.
type Quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// RunPark parks cfg.Rollouts suspended rollouts and measures the server;
// with cfg.Floor, the floor first.
func RunPark(ctx context.Context, cfg ParkConfig) (*ParkResult, error) {
	if cfg.Rollouts < 1 || cfg.ContextTokens < 0 {
		return nil, errors.New("ablate: a parking run needs rollouts and a context size")
	}
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	task := parkTask(r, cfg.ContextTokens)
	var floor *ParkResult
	if len(cfg.Floor) > 0 {
		if floor, err = parkFloor(ctx, cfg, r, task); err != nil {
			return nil, err
		}
	}
	srv, err := startServer(ctx, LoadConfig{Server: cfg.Server, ServerEnv: cfg.ServerEnv, ServerLog: cfg.ServerLog, URL: cfg.URL})
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res, err := parkOn(ctx, cfg, srv, task, "")
	if err != nil {
		return nil, err
	}
	if floor != nil {
		res.Floor = floor
		res.HeapVsFloor = ratio(res.HeapPerRollout, floor.HeapPerRollout)
		res.RSSVsFloor = ratio(res.RSSPerRollout, floor.RSSPerRollout)
	}
	return res, nil
}

// parkOn parks cfg.Rollouts suspended rollouts of task on srv and measures
// it; $TETHER_PARK_HEAP, when set, names the file its heap profile is
// written to, with suffix after it.
func parkOn(ctx context.Context, cfg ParkConfig, srv *server, task, suffix string) (*ParkResult, error) {
	res := &ParkResult{Rollouts: cfg.Rollouts}
	var err error
	heap := func() (float64, error) {
		b, err := fetch(ctx, srv, "/debug/pprof/heap?gc=1&debug=1")
		if err != nil {
			return 0, err
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapInuse = "); ok {
				var n float64
				fmt.Sscan(v, &n)
				return n / (1 << 20), nil
			}
		}
		return 0, errors.New("ablate: the server's heap profile has no HeapInuse (is --pprof on?)")
	}
	ws := "ws" + strings.TrimPrefix(srv.base, "http") + "/responses"
	if cfg.Hibernate {
		// Hot first, before the server holds anything else: parked and
		// answered at once, on their own connections. They warm the
		// server up too (its tokenizer's tables, its pools), which the
		// baseline then holds: what a hibernated rollout leaves is small
		// beside them.
		if res.HotAppendMs, err = hotAppends(ctx, ws, task, cfg.Wakes); err != nil {
			return nil, err
		}
	}
	if res.BaselineHeapMiB, err = heap(); err != nil {
		return nil, err
	}
	res.BaselineRSSMiB, res.BaselineGoroutines = procRSS(srv.pid), goroutines(ctx, srv)
	releasedBefore := released(ctx, srv)
	res.BaselineStackMiB = metric(ctx, srv, "go_memstats_stack_inuse_bytes") / (1 << 20)

	parked := make([]*parkedRollout, cfg.Rollouts)
	defer func() {
		for _, p := range parked {
			if p != nil {
				p.c.CloseNow()
			}
		}
	}()
	if cfg.Hibernate {
		if res.RedisBaselineMiB, err = redisMiB(ctx, cfg.Redis); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	var next, done atomic.Int64
	var tokens atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cfg.Rollouts; i = int(next.Add(1) - 1) {
				p, err := park(ctx, nil, ws, fmt.Sprintf("Rollout %d.\n%s", i, task), !cfg.Hibernate)
				if err != nil {
					once.Do(func() { first = fmt.Errorf("ablate: parking rollout %d: %w", i, err) })
					return
				}
				if cfg.Hibernate {
					// Its client leaves at once: a hibernation run holds
					// no socket per rollout, so it is not bounded by
					// the file descriptors one process may open.
					p.c.CloseNow()
				}
				parked[i] = p
				tokens.Add(int64(p.tokens))
				if d := done.Add(1); cfg.Progress != nil && d%100 == 0 {
					cfg.Progress(int(d), cfg.Rollouts)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	res.ParkSeconds = time.Since(start).Seconds()
	res.ContextTokens = int(tokens.Load() / int64(cfg.Rollouts))
	if cfg.Hibernate {
		// The clients have gone; the rollouts leave memory as they
		// hibernate: the run waits until every one has (the server counts
		// each among the responses that ended released) and the server is
		// back to its goroutines before parking (its connections' all
		// gone; a parked rollout holds none).
		start = time.Now()
		for released(ctx, srv) < releasedBefore+float64(cfg.Rollouts) || goroutines(ctx, srv) > res.BaselineGoroutines+8 {
			if time.Since(start) > 5*time.Minute {
				return nil, fmt.Errorf("ablate: %.0f of %d rollouts hibernated, and %d goroutines, 5 minutes after the clients left (%d before parking): do the rollouts hibernate (serve --hibernate-after, --store redis://)?",
					released(ctx, srv)-releasedBefore, cfg.Rollouts, goroutines(ctx, srv), res.BaselineGoroutines)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		res.HibernateSeconds = time.Since(start).Seconds()
		if res.RedisHibernatedMiB, err = redisMiB(ctx, cfg.Redis); err != nil {
			return nil, err
		}
		res.RedisBytesPerRollout = (res.RedisHibernatedMiB - res.RedisBaselineMiB) * (1 << 20) / float64(cfg.Rollouts)
	}
	// Held: the collections an idle server runs (one every two minutes at
	// least) have shrunk what the parking left, goroutine stacks among
	// them (each collection halves a stack that uses under a quarter of
	// it). Four stand for a few minutes parked.
	for range 3 {
		if _, err = heap(); err != nil {
			return nil, err
		}
	}
	if res.ParkedHeapMiB, err = heap(); err != nil {
		return nil, err
	}
	if file := os.Getenv("TETHER_PARK_HEAP"); file != "" { // where the parked rollouts' bytes are, for go tool pprof
		if b, err := fetch(ctx, srv, "/debug/pprof/heap"); err == nil {
			os.WriteFile(file+suffix, b, 0o644)
		}
	}
	res.ParkedRSSMiB, res.ParkedGoroutines = procRSS(srv.pid), goroutines(ctx, srv)
	res.ParkedStackMiB = metric(ctx, srv, "go_memstats_stack_inuse_bytes") / (1 << 20)
	n := float64(cfg.Rollouts)
	res.RSSPerRollout = (res.ParkedRSSMiB - res.BaselineRSSMiB) * (1 << 20) / n
	res.HeapPerRollout = (res.ParkedHeapMiB - res.BaselineHeapMiB) * (1 << 20) / n
	res.GoroutinesPerRollout = float64(res.ParkedGoroutines-res.BaselineGoroutines) / n
	if cfg.Hibernate {
		if res.WakeAppendMs, err = wakeAppends(ctx, ws, parked[:min(cfg.Wakes, len(parked))]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// hotAppends parks n rollouts of task, one at a time, and answers each at
// once on its connection: the times from the append to its first event.
func hotAppends(ctx context.Context, ws, task string, n int) (Quantiles, error) {
	ms := make([]float64, 0, n)
	for i := range n {
		p, err := park(ctx, nil, ws, fmt.Sprintf("Hot rollout %d.\n%s", i, task), false)
		if err != nil {
			return Quantiles{}, fmt.Errorf("ablate: parking a hot rollout: %w", err)
		}
		d, err := p.answer(ctx, p.c)
		p.c.CloseNow()
		if err != nil {
			return Quantiles{}, fmt.Errorf("ablate: answering a hot rollout: %w", err)
		}
		ms = append(ms, d.Seconds()*1000)
	}
	return quantiles(ms), nil
}

// wakeAppends answers each hibernated rollout of ps from a new connection,
// one at a time: the times from the append to its first event.
func wakeAppends(ctx context.Context, ws string, ps []*parkedRollout) (Quantiles, error) {
	ms := make([]float64, 0, len(ps))
	for _, p := range ps {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		c, _, err := websocket.Dial(dctx, ws, nil)
		cancel()
		if err != nil {
			return Quantiles{}, err
		}
		c.SetReadLimit(16 << 20)
		d, err := p.answer(ctx, c)
		c.CloseNow()
		if err != nil {
			return Quantiles{}, fmt.Errorf("ablate: waking a hibernated rollout: %w", err)
		}
		ms = append(ms, d.Seconds()*1000)
	}
	return quantiles(ms), nil
}

func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	return Quantiles{N: len(xs), P50: quantile(xs, 0.5), P99: quantile(xs, 0.99)}
}

// redisMiB is Redis's used_memory, in MiB.
func redisMiB(ctx context.Context, url string) (float64, error) {
	if url == "" {
		return 0, errors.New("ablate: a hibernation run needs the server's Redis (--store redis://…)")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return 0, err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("ablate: reading Redis's memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n / (1 << 20), err
		}
	}
	return 0, errors.New("ablate: Redis's INFO memory has no used_memory")
}

// parkTask is a user message of tokens tokens of context (o200k_base, as
// the server counts them) that has the scripted model call a client
// function.
func parkTask(r *sampler.Renderer, tokens int) string {
	toks := r.Tokens(filler(8 * tokens))
	return "Read this, then probe the service.\n" + strings.Join(toks[:min(tokens, len(toks))], "") + "\ncall: probe {\"n\":1}\n"
}

// parkedRollout is a rollout parked on its client's call, on c.
type parkedRollout struct {
	c          *websocket.Conn
	tokens     int // the prompt tokens the server counted
	id, callID string
}

// park opens a WebSocket, creates a suspended rollout with task and reads
// its events up to the pause; it returns the rollout, its connection left
// open, and drained (read on in the background) when drain is set. opts
// may be nil.
func park(ctx context.Context, opts *websocket.DialOptions, url, task string, drain bool) (*parkedRollout, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(16 << 20)
	req, _ := json.Marshal(map[string]any{"type": "response.create", "model": sampler.ScriptedModel, "suspend": true, "store": false,
		"tools": []any{map[string]any{"type": "function", "name": "probe", "parameters": map[string]any{"type": "object"}}},
		"input": task})
	if err := c.Write(ctx, websocket.MessageText, req); err != nil {
		c.CloseNow()
		return nil, err
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, err
		}
		var ev struct {
			Type     string `json:"type"`
			Response *struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Usage  *struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
				RequiredAction *struct {
					SubmitToolOutputs struct {
						ToolCalls []struct {
							CallID string `json:"call_id"`
						} `json:"tool_calls"`
					} `json:"submit_tool_outputs"`
				} `json:"required_action"`
			} `json:"response"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			c.CloseNow()
			return nil, err
		}
		switch {
		case ev.Type == "response.done" && ev.Response != nil && ev.Response.Status == "requires_action" &&
			ev.Response.RequiredAction != nil && len(ev.Response.RequiredAction.SubmitToolOutputs.ToolCalls) == 1:
			p := &parkedRollout{c: c, id: ev.Response.ID, callID: ev.Response.RequiredAction.SubmitToolOutputs.ToolCalls[0].CallID}
			if ev.Response.Usage != nil {
				p.tokens = ev.Response.Usage.InputTokens
			}
			if drain {
				// Read on, so that the connection answers pings and its
				// close; nothing more comes while the rollout is parked.
				go func() {
					for {
						if _, _, err := c.Read(context.Background()); err != nil {
							return
						}
					}
				}()
			}
			return p, nil
		case ev.Type == "error" || ev.Type == "response.failed" || ev.Type == "response.completed":
			c.CloseNow()
			return nil, fmt.Errorf("the rollout did not park: %s", b)
		}
	}
}

// answer appends the output of p's call on c and reads the rollout to its
// end; it returns the time from the append to the first event.
func (p *parkedRollout) answer(ctx context.Context, c *websocket.Conn) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, _ := json.Marshal(map[string]any{"type": "response.append", "response_id": p.id,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": p.callID, "output": "ok"}}})
	t0 := time.Now()
	if err := c.Write(ctx, websocket.MessageText, req); err != nil {
		return 0, err
	}
	var first time.Duration
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return 0, err
		}
		if first == 0 {
			first = time.Since(t0)
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			return 0, err
		}
		switch ev.Type {
		case "response.completed":
			return first, nil
		case "error", "response.failed", "response.incomplete", "response.cancelled", "response.done":
			return 0, fmt.Errorf("the append was answered with %.300s", b)
		}
	}
}

// fetch GETs path on the server.
func fetch(ctx context.Context, srv *server, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(srv.base, "/v1")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := srv.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}
