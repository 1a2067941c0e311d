package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// This file holds what the suspended-rollout tests share: a stand-in web
// search, scripted rollouts, a client that answers pauses, and a server
// reachable over in-memory pipes for testing/synctest bubbles.

// sharedRenderer is one o200k_base renderer for every test that builds many
// servers (loading the encoding is the costly part of NewServer).
var sharedRenderer = sync.OnceValues(sampler.NewRenderer)

func renderer(tb testing.TB) *sampler.Renderer {
	tb.Helper()
	r, err := sharedRenderer()
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// stubSearcher backs the real web_search tool with two sources derived
// from each query, found at once.
type stubSearcher struct{}

func (stubSearcher) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	slug := strings.ReplaceAll(query, " ", "-")
	return []protocol.WebSearchSource{
		{Type: "url", URL: "https://go.dev/doc/" + slug, Title: "Go docs: " + query},
		{Type: "url", URL: "https://pkg.go.dev/search?q=" + slug, Title: "pkg.go.dev: " + query},
	}[:min(limit, 2)], ctx.Err()
}

func searchTool() runtime.Tool { return websearch.New(stubSearcher{}) }

var webSearchTool = map[string]any{"type": "web_search"}

// suspendedBody is a suspended create of steps by model, offering web_search if asked.
func suspendedBody(model string, steps [][]dcall, search bool) map[string]any {
	body := map[string]any{"model": model, "store": false, "suspend": true, "input": script(steps)}
	if search {
		body["tools"] = []any{webSearchTool}
	}
	return body
}

// dcall is one scripted call: "NAME {args}".
type dcall struct{ name, args string }

// script is a user message text scripting steps, one line per step.
func script(steps [][]dcall) string {
	var b strings.Builder
	b.WriteString("Fix the failing build.\n")
	for _, step := range steps {
		b.WriteString("call: ")
		for i, c := range step {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c.name + " " + c.args)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// toolOutput is the client's deterministic output for a call.
func toolOutput(name, args string) string {
	return fmt.Sprintf("%s ran with %s: ok (%d bytes)", name, args, len(args))
}

// ev is the part of a server event the tests look at.
type ev struct {
	Type        string          `json:"type"`
	Seq         *int            `json:"sequence_number"`
	StreamID    string          `json:"stream_id"`
	OutputIndex *int            `json:"output_index"`
	Item        json.RawMessage `json:"item"`
	Delta       string          `json:"delta"`
	Response    *struct {
		ID             string            `json:"id"`
		Status         string            `json:"status"`
		Output         []json.RawMessage `json:"output"`
		OutputOffset   *int              `json:"output_offset"`
		Usage          *protocol.Usage   `json:"usage"`
		Error          *struct{ Code string }
		RequiredAction *struct {
			Type              string `json:"type"`
			SubmitToolOutputs struct {
				ToolCalls []struct {
					CallID    string `json:"call_id"`
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"tool_calls"`
			} `json:"submit_tool_outputs"`
		} `json:"required_action"`
	} `json:"response"`
	Error *struct {
		Code  string `json:"code"`
		Param string `json:"param"`
	} `json:"error"`
}

func decodeEv(tb testing.TB, b []byte) ev {
	tb.Helper()
	var e ev
	if err := json.Unmarshal(b, &e); err != nil {
		tb.Fatalf("event is not JSON: %v: %s", err, b)
	}
	return e
}

// isEnd reports whether an event ends a response, or pauses it.
func isEnd(typ string) bool {
	switch typ {
	case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
		return true
	}
	return false
}

// next reads events until a pause (response.done), the end of a response, or
// an error event, and returns them.
func (w *wsConn) next(tb testing.TB) [][]byte {
	tb.Helper()
	var events [][]byte
	for {
		b := w.recv(tb)
		events = append(events, b)
		if t := eventType(tb, b); t == "response.done" || t == "error" || isEnd(t) {
			return events
		}
	}
}

// wantError reads one frame and checks it is an error event with code.
func (w *wsConn) wantError(tb testing.TB, code string) {
	tb.Helper()
	b := w.recv(tb)
	e := decodeEv(tb, b)
	if e.Type != "error" || e.Error == nil || e.Error.Code != code {
		tb.Fatalf("want an error %s, got %s", code, b)
	}
}

// outputsFor answers every pending call of a response.done.
func outputsFor(tb testing.TB, done []byte) []any {
	tb.Helper()
	e := decodeEv(tb, done)
	if e.Type != "response.done" || e.Response.Status != "requires_action" || e.Response.RequiredAction == nil {
		tb.Fatalf("not a pause: %s", done)
	}
	var outs []any
	for _, c := range e.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
		outs = append(outs, fco(c.CallID, toolOutput(c.Name, c.Arguments)))
	}
	if len(outs) == 0 {
		tb.Fatalf("a pause with no pending call: %s", done)
	}
	return outs
}

func fco(callID, output string) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": callID, "output": output}
}

func appendEv(id, stream string, input ...any) map[string]any {
	m := map[string]any{"type": "response.append", "response_id": id, "input": input}
	if stream != "" {
		m["stream_id"] = stream
	}
	return m
}

func refEv(typ, id, stream string) map[string]any {
	m := map[string]any{"type": typ, "response_id": id}
	if stream != "" {
		m["stream_id"] = stream
	}
	return m
}

// respID is the response id of a response event.
func respID(tb testing.TB, b []byte) string {
	tb.Helper()
	e := decodeEv(tb, b)
	if e.Response == nil || e.Response.ID == "" {
		tb.Fatalf("no response in %s", b)
	}
	return e.Response.ID
}

// driveSuspended sends a suspended create and answers every pause with the
// outputs of toolOutput until the response ends. It returns every event of
// the response and the number of pauses.
func driveSuspended(tb testing.TB, c *wsConn, body map[string]any) (events [][]byte, pauses int) {
	tb.Helper()
	body["suspend"] = true
	c.send(tb, create(body))
	for {
		evs := c.next(tb)
		events = append(events, evs...)
		last := evs[len(evs)-1]
		switch typ := eventType(tb, last); typ {
		case "response.done":
			pauses++
			c.send(tb, appendEv(respID(tb, last), "", outputsFor(tb, last)...))
		case "error":
			tb.Fatalf("error during the rollout: %s", last)
		default:
			return events, pauses
		}
	}
}

// pipeListener is a net.Listener over net.Pipe: a server reachable inside a
// synctest bubble, where loopback sockets do not block durably.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "tether.test:80" }

// pipeHarness is a tether server served over in-memory pipes. Build it
// inside a synctest bubble; its cleanup shuts everything down in the bubble.
type pipeHarness struct {
	srv    *runtime.Server
	client *http.Client
}

func newPipeHarness(t *testing.T, opts runtime.Options) *pipeHarness {
	t.Helper()
	if opts.Renderer == nil {
		opts.Renderer = renderer(t)
	}
	srv, err := runtime.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	hs := &http.Server{Handler: srv}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	tr := &http.Transport{DialContext: ln.dial}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("runtime shutdown: %v", err)
		}
		if err := hs.Shutdown(ctx); err != nil {
			t.Errorf("http shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return &pipeHarness{srv: srv, client: &http.Client{Transport: tr}}
}

// dial opens a WebSocket with the given Authorization header ("" for none).
func (p *pipeHarness) dial(t *testing.T, auth string) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	c, _, err := websocket.Dial(ctx, "ws://tether.test/v1/responses", testDialOptions(&websocket.DialOptions{HTTPHeader: h, HTTPClient: p.client}))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsConn{c: c}
}

// serverGoroutines returns the stacks of the goroutines of the calling
// synctest bubble that run code of package runtime (the server under test).
func serverGoroutines(t *testing.T) []string {
	t.Helper()
	self := make([]byte, 1<<10)
	self = self[:goruntime.Stack(self, false)]
	head, _, _ := bytes.Cut(self, []byte("\n"))
	_, bubble, ok := bytes.Cut(head, []byte("synctest bubble "))
	if !ok {
		t.Fatalf("serverGoroutines outside a bubble: %s", head)
	}
	bubble, _, _ = bytes.Cut(bubble, []byte("]"))
	bubble, _, _ = bytes.Cut(bubble, []byte(","))
	var all bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&all, 2); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range strings.Split(all.String(), "\n\n") {
		first, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(first, "synctest bubble "+string(bubble)+"]") && !strings.Contains(first, "synctest bubble "+string(bubble)+",") {
			continue
		}
		if strings.Contains(g, "tether/runtime.") {
			out = append(out, g)
		}
	}
	return out
}

// lanes reads a connection whose lanes stream concurrently, keeping each
// lane's frames apart.
type lanes struct {
	c       *wsConn
	pending map[string][][]byte // frames read but not yet taken, by stream_id
}

func newLanes(c *wsConn) *lanes { return &lanes{c: c, pending: map[string][][]byte{}} }

// take reads until a frame of lane satisfies stop and returns the lane's
// frames up to it; other lanes' frames wait for their turn.
func (l *lanes) take(tb testing.TB, lane string, stop func(ev) bool) [][]byte {
	tb.Helper()
	var out [][]byte
	for {
		var b []byte
		if q := l.pending[lane]; len(q) > 0 {
			b, l.pending[lane] = q[0], q[1:]
		} else {
			b = l.c.recv(tb)
			if e := decodeEv(tb, b); e.StreamID != lane {
				l.pending[e.StreamID] = append(l.pending[e.StreamID], b)
				continue
			}
		}
		out = append(out, b)
		if stop(decodeEv(tb, b)) {
			return out
		}
	}
}

// next returns lane's frames up to a pause, an end or an error.
func (l *lanes) next(tb testing.TB, lane string) [][]byte {
	tb.Helper()
	return l.take(tb, lane, func(e ev) bool { return e.Type == "response.done" || e.Type == "error" || isEnd(e.Type) })
}

// wantError reads lane's frames up to an error event, which must have code;
// the lane's other frames are returned.
func (l *lanes) wantError(tb testing.TB, lane, code string) [][]byte {
	tb.Helper()
	evs := l.take(tb, lane, func(e ev) bool { return e.Type == "error" })
	if e := decodeEv(tb, last(evs)); e.Error == nil || e.Error.Code != code {
		tb.Fatalf("lane %q: want error %s, got %s", lane, code, last(evs))
	}
	return evs[:len(evs)-1]
}

// quiet checks that no frame is waiting for lane.
func (l *lanes) quiet(tb testing.TB, lane string) {
	tb.Helper()
	if q := l.pending[lane]; len(q) > 0 {
		tb.Fatalf("lane %q has unexpected frames: %s", lane, q[0])
	}
}

// recvWithin reads one frame, waiting up to d (fake time in a bubble).
func recvWithin(tb testing.TB, w *wsConn, d time.Duration) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	b, err := w.read(tb, ctx)
	if err != nil {
		tb.Fatalf("read: %v", err)
	}
	return b
}

// endings is an Observer that counts the responses that ended: whether a
// parked rollout, which holds no goroutine of the server's, still lives.
type endings struct {
	mu sync.Mutex
	n  int
}

func (e *endings) ResponseEnded(runtime.ServePath, protocol.ResponseStatus, protocol.Timings) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
}
func (e *endings) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}
func (*endings) StepSampled(time.Duration, time.Duration)  {}
func (*endings) StepDispatched(time.Duration)              {}
func (*endings) Paused()                                   {}
func (*endings) FrameWritten(time.Duration, time.Duration) {}
