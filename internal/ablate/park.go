package ablate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

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
	ServerLog     io.Writer // as LoadConfig.ServerLog
	URL           string    // a server's base URL instead, with /debug/pprof (its RSS is not read)
	Progress      func(done, total int)
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
}

// RunPark parks cfg.Rollouts suspended rollouts and measures the server.
func RunPark(ctx context.Context, cfg ParkConfig) (*ParkResult, error) {
	if cfg.Rollouts < 1 || cfg.ContextTokens < 0 {
		return nil, errors.New("ablate: a parking run needs rollouts and a context size")
	}
	srv, err := startServer(ctx, LoadConfig{Server: cfg.Server, ServerLog: cfg.ServerLog, URL: cfg.URL})
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	res := &ParkResult{Rollouts: cfg.Rollouts}
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
	if res.BaselineHeapMiB, err = heap(); err != nil {
		return nil, err
	}
	res.BaselineRSSMiB, res.BaselineGoroutines = procRSS(srv.pid), goroutines(ctx, srv)
	res.BaselineStackMiB = metric(ctx, srv, "go_memstats_stack_inuse_bytes") / (1 << 20)

	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	task := parkTask(r, cfg.ContextTokens)
	ws := "ws" + strings.TrimPrefix(srv.base, "http") + "/responses"
	conns := make([]*websocket.Conn, cfg.Rollouts)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.CloseNow()
			}
		}
	}()
	start := time.Now()
	var next, done atomic.Int64
	var tokens atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cfg.Rollouts; i = int(next.Add(1) - 1) {
				c, n, err := park(ctx, ws, fmt.Sprintf("Rollout %d.\n%s", i, task))
				if err != nil {
					once.Do(func() { first = fmt.Errorf("ablate: parking rollout %d: %w", i, err) })
					return
				}
				conns[i] = c
				tokens.Add(int64(n))
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
			os.WriteFile(file, b, 0o644)
		}
	}
	res.ParkedRSSMiB, res.ParkedGoroutines = procRSS(srv.pid), goroutines(ctx, srv)
	res.ParkedStackMiB = metric(ctx, srv, "go_memstats_stack_inuse_bytes") / (1 << 20)
	n := float64(cfg.Rollouts)
	res.RSSPerRollout = (res.ParkedRSSMiB - res.BaselineRSSMiB) * (1 << 20) / n
	res.HeapPerRollout = (res.ParkedHeapMiB - res.BaselineHeapMiB) * (1 << 20) / n
	res.GoroutinesPerRollout = float64(res.ParkedGoroutines-res.BaselineGoroutines) / n
	return res, nil
}

// parkTask is a user message of tokens tokens of context (o200k_base, as
// the server counts them) that has the scripted model call a client
// function.
func parkTask(r *sampler.Renderer, tokens int) string {
	toks := r.Tokens(filler(8 * tokens))
	return "Read this, then probe the service.\n" + strings.Join(toks[:min(tokens, len(toks))], "") + "\ncall: probe {\"n\":1}\n"
}

// park opens a WebSocket, creates a suspended rollout with task and reads
// its events up to the pause; it returns the connection, left open, and
// the prompt tokens the server counted.
func park(ctx context.Context, url, task string) (*websocket.Conn, int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, 0, err
	}
	c.SetReadLimit(16 << 20)
	req, _ := json.Marshal(map[string]any{"type": "response.create", "model": sampler.ScriptedModel, "suspend": true, "store": false,
		"tools": []any{map[string]any{"type": "function", "name": "probe", "parameters": map[string]any{"type": "object"}}},
		"input": task})
	if err := c.Write(ctx, websocket.MessageText, req); err != nil {
		c.CloseNow()
		return nil, 0, err
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			c.CloseNow()
			return nil, 0, err
		}
		var ev struct {
			Type     string `json:"type"`
			Response *struct {
				Status string `json:"status"`
				Usage  *struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"response"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			c.CloseNow()
			return nil, 0, err
		}
		switch {
		case ev.Type == "response.done" && ev.Response != nil && ev.Response.Status == "requires_action":
			n := 0
			if ev.Response.Usage != nil {
				n = ev.Response.Usage.InputTokens
			}
			// Read on, so that the connection answers pings and its
			// close; nothing more comes while the rollout is parked.
			go func() {
				for {
					if _, _, err := c.Read(context.Background()); err != nil {
						return
					}
				}
			}()
			return c, n, nil
		case ev.Type == "error" || ev.Type == "response.failed" || ev.Type == "response.completed":
			c.CloseNow()
			return nil, 0, fmt.Errorf("the rollout did not park: %s", b)
		}
	}
}

// fetch GETs path on the server.
func fetch(ctx context.Context, srv *server, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(srv.base, "/v1")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}
