package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/prommetrics"
	tetherwt "github.com/tether-run/tether/runtime/webtransport"
)

func TestMain(m *testing.M) {
	// The test binary is also the stdio MCP server of the mcp tests, and
	// the server process of the benchmarks whose client is outside it.
	mcptest.ServeStdioIfChild()
	serveBenchIfChild()
	// Every journal write of the tests checks that the journal reads back
	// to the state written; the benchmarks measure it as it runs.
	flag.Parse()
	*runtime.VerifyJournal = flag.Lookup("test.bench").Value.String() == ""
	// Importing bleve (through hostedtools/websearch, which the tests
	// use) starts its analysis workers, which live as long as the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// harness is an in-process tether server on a loopback port, and on a
// loopback UDP port for WebTransport when its wire asks for it.
type harness struct {
	srv     *runtime.Server
	metrics *prommetrics.Metrics // srv's observer, on /metrics (unless the test gave its own)
	hs      *httptest.Server
	client  *http.Client // trusts hs's certificate when it serves TLS
	base    string       // http://127.0.0.1:PORT/v1 (https:// over TLS)
	ws      string       // ws://127.0.0.1:PORT/v1/responses
	wire    wire         // what h.dial connects over
	wt      *tetherwt.Endpoint
}

// newHarness starts a server whose connections are WebSockets in the test
// encoding.
func newHarness(t testing.TB, opts runtime.Options) *harness {
	t.Helper()
	return newHarnessOn(t, opts, wire{enc: testEncoding})
}

// newHarnessOn starts a server whose connections (h.dial) go over w.
func newHarnessOn(t testing.TB, opts runtime.Options, w wire) *harness {
	t.Helper()
	metrics := prommetrics.New()
	if opts.Observer == nil {
		opts.Observer = metrics
	}
	srv, err := runtime.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("GET /metrics", metrics.Handler())
	hs := httptest.NewUnstartedServer(srv)
	if w.tls {
		if !w.tlsWriters {
			hs.Listener = runtime.TLSListener(hs.Listener) // StartTLS puts TLS over it
		}
		hs.StartTLS()
	} else {
		hs.Start()
	}
	h := &harness{srv: srv, metrics: metrics, hs: hs, client: hs.Client(), base: hs.URL + "/v1", ws: wsURL(hs.URL) + "/v1/responses", wire: w}
	if w.webTransport {
		h.startWT(t)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if h.wt != nil {
			h.wt.Close()
		}
		hs.Close()
	})
	return h
}

// post sends a JSON body to path and returns the status and body.
func (h *harness) post(t testing.TB, path string, body any) (int, []byte) {
	t.Helper()
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(h.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (h *harness) get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(h.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// sse posts a streaming request and returns every event's data, checking the
// framing: "event: T\ndata: JSON\n\n" with event equal to the data's type.
func (h *harness) sse(t testing.TB, body map[string]any) [][]byte {
	t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := http.Post(h.base+"/responses", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		out, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("\r")) {
		t.Fatal("SSE stream contains CR; want LF only")
	}
	var events [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := []byte(strings.TrimPrefix(line, "data: "))
			if typ := eventType(t, data); typ != event {
				t.Fatalf("event: %q but data type %q", event, typ)
			}
			events = append(events, data)
		case line == "":
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return events
}

func eventType(t testing.TB, data []byte) string {
	t.Helper()
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		t.Fatalf("event is not JSON: %v: %s", err, data)
	}
	return head.Type
}

// wsConn is a raw client connection: a WebSocket, or a WebTransport
// connection made to look like one (wtClient).
type wsConn struct {
	c  *websocket.Conn
	wt *wtClient // set instead of c on WebTransport
}

// testEncoding is the encoding the tests' WebSocket clients ask for:
// TETHER_TEST_ENCODING=msgpack runs the package's WebSocket tests over
// msgpack frames (.ci/run does, after the JSON run). The helpers below
// speak it and hand the tests JSON, so a test reads the same either way.
var testEncoding = func() protocol.Encoding {
	e, err := protocol.ParseEncoding(os.Getenv("TETHER_TEST_ENCODING"))
	if err != nil {
		return protocol.EncodingJSON
	}
	return e
}()

// testDialOptions are o (nil: none) with the test encoding's subprotocol.
func testDialOptions(o *websocket.DialOptions) *websocket.DialOptions {
	if o == nil {
		o = &websocket.DialOptions{}
	}
	if testEncoding == protocol.EncodingMsgpack {
		o.Subprotocols = append(o.Subprotocols, testEncoding.String())
	}
	return o
}

// msgpack reports whether the connection speaks msgpack.
func (w *wsConn) msgpack() bool {
	if w.wt != nil {
		return w.wt.enc == protocol.EncodingMsgpack
	}
	return w.c.Subprotocol() == protocol.EncodingMsgpack.String()
}

// frame turns a frame read off w into JSON; a test gets JSON text whatever
// the connection's encoding.
func (w *wsConn) frame(tb testing.TB, typ websocket.MessageType, b []byte) []byte {
	tb.Helper()
	switch {
	case typ == websocket.MessageBinary && w.msgpack():
		js, err := protocol.MsgpackToJSON(b)
		if err != nil {
			tb.Fatalf("msgpack frame: %v", err)
		}
		return js
	case typ != websocket.MessageText:
		tb.Fatalf("got a binary frame")
	}
	return b
}

// encoded is a client event given as JSON as w sends it: msgpack on a
// msgpack connection, unless it is not JSON at all (a bad-input test's),
// which goes as the text frame it is.
func (w *wsConn) encoded(b []byte) (websocket.MessageType, []byte, error) {
	if w.msgpack() && json.Valid(b) {
		mp, err := protocol.JSONToMsgpack(b)
		return websocket.MessageBinary, mp, err
	}
	return websocket.MessageText, b, nil
}

// write sends a client event given as JSON (see encoded).
func (w *wsConn) write(ctx context.Context, b []byte) error {
	if w.wt != nil {
		return w.wt.write(ctx, b)
	}
	typ, frame, err := w.encoded(b)
	if err != nil {
		return err
	}
	return w.c.Write(ctx, typ, frame)
}

func (h *harness) dial(t testing.TB, header http.Header) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.wire.webTransport {
		c, err := dialWT(ctx, h, header, h.wire.enc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.drop)
		return &wsConn{wt: c}
	}
	opts := &websocket.DialOptions{HTTPHeader: header}
	if h.wire.enc == protocol.EncodingMsgpack {
		opts.Subprotocols = []string{h.wire.enc.String()}
	}
	return dialWS(t, h.ws, opts)
}

// dialWS dials a WebSocket to a tether server's responses endpoint at url
// (ws://HOST/v1/responses); opts may be nil.
func dialWS(t testing.TB, url string, opts *websocket.DialOptions) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsConn{c: c}
}

func (w *wsConn) send(t testing.TB, v any) {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.write(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// recv reads one event.
func (w *wsConn) recv(t testing.TB) []byte {
	t.Helper()
	return recvWithin(t, w, 30*time.Second)
}

// read reads one event, as JSON.
func (w *wsConn) read(tb testing.TB, ctx context.Context) ([]byte, error) {
	tb.Helper()
	if w.wt != nil {
		return w.wt.read(ctx)
	}
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	return w.frame(tb, typ, b), nil
}

// drop ends the connection at once, as a network failure would.
func (w *wsConn) drop() {
	if w.wt != nil {
		w.wt.drop()
		return
	}
	w.c.CloseNow()
}

// untilTerminal reads events until a terminal event or an error and returns
// them all, the last being the terminal one.
func (w *wsConn) untilTerminal(t testing.TB) [][]byte {
	t.Helper()
	var events [][]byte
	for {
		b := w.recv(t)
		events = append(events, b)
		switch eventType(t, b) {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return events
		}
	}
}

// terminal reads up to a response's terminal event (or an error) and
// returns it, keeping no frame before it: what a memory test's client
// would hold is not the server's.
func (w *wsConn) terminal(t testing.TB) []byte {
	t.Helper()
	for {
		b := w.recv(t)
		switch eventType(t, b) {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return b
		}
	}
}

// create is a response.create frame built from a body.
func create(body map[string]any) map[string]any {
	out := map[string]any{"type": "response.create"}
	for k, v := range body {
		out[k] = v
	}
	return out
}

// obj decodes JSON into a generic map.
func obj(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}

// terminalResponse returns the response of a terminal event as JSON.
func terminalResponse(t testing.TB, ev []byte) []byte {
	t.Helper()
	var e struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(ev, &e); err != nil || e.Response == nil {
		t.Fatalf("not a terminal response event: %s", ev)
	}
	return e.Response
}

func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": text}
}

func newDelete(url string) (*http.Request, error) {
	return http.NewRequest(http.MethodDelete, url, nil)
}
