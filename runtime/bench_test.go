package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// history builds a coding-agent conversation of about n tokens: a task, then
// read_file calls whose outputs are source files.
func history(tb testing.TB, r *sampler.Renderer, n int) []any {
	tb.Helper()
	items := []any{userMsg("The test TestParseConfig fails in pkg/config. Find the bug and fix it.")}
	total := r.Count("The test TestParseConfig fails in pkg/config. Find the bug and fix it.")
	for i := 0; total < n; i++ {
		var src strings.Builder
		fmt.Fprintf(&src, "package config\n\n// File %d of the fixture repository.\n", i)
		for j := 0; src.Len() < 1600; j++ {
			fmt.Fprintf(&src, "func parse%d_%d(s string) (int, error) {\n\tif s == \"\" {\n\t\treturn 0, errEmpty\n\t}\n\treturn strconv.Atoi(strings.TrimSpace(s)) // field %d\n}\n\n", i, j, j)
		}
		callID := fmt.Sprintf("call_%04d", i)
		items = append(items,
			map[string]any{"type": "function_call", "call_id": callID, "name": "read_file", "arguments": fmt.Sprintf(`{"path":"pkg/config/file%d.go"}`, i)},
			map[string]any{"type": "function_call_output", "call_id": callID, "output": src.String()})
		total += r.Count(src.String()) + 20
	}
	return items
}

var benchSizes = []int{1_000, 10_000, 100_000}

// BenchmarkContinuationTurn measures one agent turn on top of a history of
// 1k, 10k and 100k tokens: over WebSocket, continuing from the connection
// cache with only the new input; over HTTP, re-sending the whole history
// (the stateless baseline). The sampler is unpaced, so the figures are the
// server's API work plus loopback I/O. server-us/turn is the server's own
// measure (from frame or body received to terminal event).
func BenchmarkContinuationTurn(b *testing.B) {
	r, err := sampler.NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range benchSizes {
		hist := history(b, r, n)
		b.Run(fmt.Sprintf("ws-cache/%dk", n/1000), func(b *testing.B) { benchWS(b, r, hist) })
		b.Run(fmt.Sprintf("http-full/%dk", n/1000), func(b *testing.B) { benchHTTP(b, r, hist) })
	}
}

// benchLimits are serve's as it runs by default: with a memory budget
// (8.8 GiB on a machine of 23.5 GiB), so that what the budget counts on
// the request path (a create's charge, the context's, every frame queued)
// is in the figures.
var benchLimits = runtime.Limits{MaxMemory: 8 << 30}

func benchWS(b *testing.B, r *sampler.Renderer, hist []any) {
	h := newHarness(b, runtime.Options{Renderer: r, Limits: benchLimits})
	c := h.dial(b, nil)
	// The base response stays cached on lane "base"; every measured turn
	// forks from it on lane "work", so the history does not grow.
	c.send(b, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "base", "input": hist}))
	base := c.untilTerminal(b)
	baseID := obj(b, terminalResponse(b, base[len(base)-1]))["id"]
	frame, _ := json.Marshal(create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "work",
		"previous_response_id": baseID, "input": []any{userMsg("Run the tests again.")}, "include": []string{protocol.IncludeTimings}}))
	ctx := context.Background()
	var serverUS int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		for {
			_, ev, err := c.c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(ev, []byte(`{"type":"response.completed"`)) {
				serverUS += serverMicros(b, ev)
				break
			}
			if bytes.HasPrefix(ev, []byte(`{"type":"error"`)) || bytes.HasPrefix(ev, []byte(`{"type":"response.failed"`)) {
				b.Fatalf("turn failed: %s", ev)
			}
		}
	}
	b.ReportMetric(float64(serverUS)/float64(b.N), "server-us/turn")
}

func benchHTTP(b *testing.B, r *sampler.Renderer, hist []any) {
	h := newHarness(b, runtime.Options{Renderer: r, Limits: benchLimits})
	input := append(append([]any{}, hist...), userMsg("Run the tests again."))
	body, _ := json.Marshal(map[string]any{"model": "tether-scripted", "store": false, "input": input,
		"include": []string{protocol.IncludeTimings}})
	client := &http.Client{}
	var serverUS int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Post(h.base+"/responses", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d: %s", resp.StatusCode, out)
		}
		serverUS += serverMicros(b, out)
	}
	b.ReportMetric(float64(serverUS)/float64(b.N), "server-us/turn")
}

// serverMicros reads timings.total_us from a response or a terminal event.
func serverMicros(tb testing.TB, raw []byte) int64 {
	var v struct {
		Timings  *protocol.Timings `json:"timings"`
		Response struct {
			Timings *protocol.Timings `json:"timings"`
		} `json:"response"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatal(err)
	}
	t := v.Timings
	if t == nil {
		t = v.Response.Timings
	}
	if t == nil {
		tb.Fatalf("no timings in %s", raw)
	}
	return t.TotalMicros
}

// countingListener counts the writes to the sockets it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return countingConn{c, l.writes}, err
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// BenchmarkStreamFrames measures the server's path per frame over
// WebSocket: an unpaced response of 2,000 text deltas, read by a client that
// does nothing else. every-delta sends each token as its own frame (the
// path per frame); merged is the default, where the deltas a client has not
// yet taken are merged (an unpaced model outruns any client, so most are).
// frames/write is how many frames each write to the socket carried (the
// writer takes every frame queued at once); ns/token is per streamed token.
// every-delta+recorded is every-delta with a traffic log kept (serve
// --record), written to nowhere: what recording costs the server.
func BenchmarkStreamFrames(b *testing.B) {
	for _, tc := range []struct {
		name            string
		every, recorded bool
	}{{"every-delta", true, false}, {"merged", false, false}, {"every-delta+recorded", true, true}} {
		b.Run(tc.name, func(b *testing.B) { benchStreamFrames(b, tc.every, tc.recorded) })
	}
}

func benchStreamFrames(b *testing.B, every, recorded bool) {
	const tokens = 2000
	opts := runtime.Options{Renderer: renderer(b), EveryDelta: every, Limits: benchLimits,
		Models: map[string]runtime.Sampler{"deltas": deltaSampler(tokens)}}
	if recorded {
		opts.Recorder = record.New(io.Discard)
	}
	srv, err := runtime.NewServer(opts)
	if err != nil {
		b.Fatal(err)
	}
	var writes atomic.Int64
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = countingListener{hs.Listener, &writes}
	hs.Start()
	defer hs.Close()
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/responses", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	frame, _ := json.Marshal(create(map[string]any{"model": "deltas", "store": false, "input": "go"}))
	frames := 0
	var data []byte // the client reads every frame into it: the allocations counted are the server's
	b.ReportAllocs()
	b.ResetTimer()
	writes.Store(0)
	for range b.N {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		for {
			if data, err = readFrame(ctx, c, data[:0]); err != nil {
				b.Fatal(err)
			}
			frames++
			if bytes.Contains(data[:min(len(data), 40)], []byte(`"response.completed"`)) {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens*b.N), "ns/token")
	b.ReportMetric(float64(frames)/float64(b.N), "frames/response")
	b.ReportMetric(float64(frames)/float64(max(writes.Load(), 1)), "frames/write")
}

// readFrame appends the next message on c to buf.
func readFrame(ctx context.Context, c *websocket.Conn, buf []byte) ([]byte, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return buf, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// deltaSampler answers every request with one message of n tokens, at once.
type deltaSampler int

func (n deltaSampler) Sample(ctx context.Context, _ *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	for range int(n) {
		emit(sampler.Delta{Kind: sampler.TextDelta, Text: " tok"})
	}
	emit(sampler.Delta{Kind: sampler.PartEnd})
	return sampler.Result{OutputTokens: int(n), PromptTokens: 1}, ctx.Err()
}

// BenchmarkParkedRollout measures what a parked suspended rollout holds:
// b.N rollouts, each on its own WebSocket with about 8k tokens of context,
// parked on one client call at once. bytes/rollout is the live heap they
// add (after a collection), goroutines/rollout the goroutines, both the
// server's and the client's connection's (this process has both).
// TestParkedRolloutMemory holds the same figures to a bound.
func BenchmarkParkedRollout(b *testing.B) {
	h := newHarness(b, runtime.Options{Renderer: renderer(b), Limits: runtime.Limits{MaxConnections: 1 << 20}, Suspension: runtime.SuspensionOptions{Max: 1 << 20}})
	before, goroutines := liveHeap(), goruntime.NumGoroutine()
	b.ResetTimer()
	conns := parkRollouts(b, h, b.N)
	b.StopTimer()
	// The client's side of each connection is in this process too, and
	// counted: its connection's buffers and goroutines.
	held := int64(liveHeap()) - int64(before)
	g := goruntime.NumGoroutine() - goroutines
	b.ReportMetric(float64(held)/float64(b.N), "bytes/rollout")
	b.ReportMetric(float64(g)/float64(b.N), "goroutines/rollout")
	if rss := residentBytes(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "process-RSS-MiB")
	}
	for _, c := range conns {
		c.CloseNow()
	}
}

// TestParkedRolloutMemory guards the compact parked state: 300 suspended
// rollouts, each on its own WebSocket with about 8k tokens of context,
// parked at once, hold at most 80 KB of live heap and 1 goroutine apiece,
// the connection's read loop (the parked loop is a value, and its prompt
// keeps no token ids; the lane that follows the rollout waits with no
// goroutine), the client's side of each connection included.
func TestParkedRolloutMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	const n = 300
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	before, goroutines := liveHeap(), goruntime.NumGoroutine()
	conns := parkRollouts(t, h, n)
	held := float64(int64(liveHeap())-int64(before)) / n
	g := float64(goruntime.NumGoroutine()-goroutines) / n
	t.Logf("%d parked rollouts: %.1f KB of live heap and %.2f goroutines apiece", n, held/1000, g)
	if held > 80_000 || g > 1.05 {
		t.Errorf("a parked rollout holds %.1f KB and %.2f goroutines, bound 80 KB and 1", held/1000, g)
	}
	for _, c := range conns {
		c.CloseNow()
	}
}

// TestIdleConnectionGoroutines: a WebSocket that has run a response and
// waits for the next holds one goroutine, its read loop: its writer and
// its lane's worker run only while they have work.
func TestIdleConnectionGoroutines(t *testing.T) {
	const n = 20
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	ctx := context.Background()
	frame, _ := json.Marshal(create(map[string]any{"model": "tether-scripted", "store": false, "input": "hello"}))
	before := goruntime.NumGoroutine()
	for range n {
		c, _, err := websocket.Dial(ctx, h.ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		sendUntil(t, c, frame, "response.completed")
	}
	// A lane's worker leaves once the response's last frame is queued:
	// give it the moment that takes.
	var held int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if held = goruntime.NumGoroutine() - before; held <= n {
			break
		}
	}
	if held > n {
		t.Errorf("%d idle connections hold %d goroutines, want %d (one apiece)", n, held, n)
	}
}

// parkRollouts parks n suspended rollouts of about 8k tokens of context on
// h, each on its own WebSocket, and returns the connections.
func parkRollouts(tb testing.TB, h *harness, n int) []*websocket.Conn {
	tb.Helper()
	ctx := context.Background()
	ctxItems := history(tb, renderer(tb), 8_000)
	frame, _ := json.Marshal(create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true,
		"input": append(ctxItems, userMsg(script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})))}))
	var conns []*websocket.Conn
	for range n {
		c, _, err := websocket.Dial(ctx, h.ws, nil)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
		sendUntil(tb, c, frame, "response.done")
	}
	return conns
}

// sendUntil writes frame on c and reads until an event of type typ.
func sendUntil(tb testing.TB, c *websocket.Conn, frame []byte, typ string) {
	tb.Helper()
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
		tb.Fatal(err)
	}
	want := []byte(`"` + typ + `"`)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if bytes.Contains(data[:min(len(data), 40)], want) {
			return
		}
	}
}

// residentBytes is the process's resident memory, from /proc (0 where there
// is none).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
