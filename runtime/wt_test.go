package runtime_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
	tether "github.com/tether-run/tether/runtime"
)

// rawWT is one WebTransport connection to a harness, for tests that write
// its streams byte by byte.
type rawWT struct {
	tr   *webtransport.Transport
	sess *webtransport.Session
}

func dialRawWT(t *testing.T, h *harness, header http.Header) *rawWT {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tr := &webtransport.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	res, sess, err := tr.Dial(ctx, h.wt.URL()+"/responses", header)
	if err != nil {
		tr.Close()
		if res != nil {
			t.Fatalf("dial: %v (%s)", err, res.Status)
		}
		t.Fatalf("dial: %v", err)
	}
	c := &rawWT{tr: tr, sess: sess}
	t.Cleanup(func() {
		sess.CloseWithError(0, "")
		tr.Close()
	})
	return c
}

// rawStream is one stream of a rawWT, read as frames.
type rawStream struct {
	str *webtransport.Stream
	r   *bufio.Reader
}

func (c *rawWT) open(t *testing.T) *rawStream {
	t.Helper()
	str, err := c.sess.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &rawStream{str: str, r: bufio.NewReader(str)}
}

// lane opens a stream and sends its header for enc.
func (c *rawWT) lane(t *testing.T, enc string) *rawStream {
	t.Helper()
	s := c.open(t)
	s.frame(t, []byte(`{"encoding":"`+enc+`"}`))
	return s
}

func (s *rawStream) raw(t *testing.T, b []byte) {
	t.Helper()
	if _, err := s.str.Write(b); err != nil {
		t.Fatal(err)
	}
}

func (s *rawStream) frame(t *testing.T, b []byte) {
	t.Helper()
	s.raw(t, wtFrameOf(b))
}

func (s *rawStream) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s.frame(t, b)
}

// next reads one frame (JSON on these tests' streams), or the stream's end.
func (s *rawStream) next(t *testing.T) ([]byte, error) {
	t.Helper()
	s.str.SetReadDeadline(time.Now().Add(30 * time.Second))
	var h [4]byte
	if _, err := io.ReadFull(s.r, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[:]))
	_, err := io.ReadFull(s.r, b)
	return b, err
}

func (s *rawStream) recv(t *testing.T) []byte {
	t.Helper()
	b, err := s.next(t)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

// until reads frames until one of type typ (or an error event) and returns
// it.
func (s *rawStream) until(t *testing.T, types ...string) []byte {
	t.Helper()
	for {
		b := s.recv(t)
		e := decodeEv(t, b)
		for _, typ := range types {
			if e.Type == typ {
				return b
			}
		}
		if e.Type == "error" {
			t.Fatalf("error event: %s", b)
		}
	}
}

// wantError reads one frame, an error event with code.
func (s *rawStream) wantError(t *testing.T, code string) {
	t.Helper()
	b := s.recv(t)
	if e := decodeEv(t, b); e.Type != "error" || e.Error == nil || e.Error.Code != code {
		t.Fatalf("want error %s, got %s", code, b)
	}
}

// wantEnd checks that the server has ended the stream: the client reads
// its end, not a frame.
func (s *rawStream) wantEnd(t *testing.T) {
	t.Helper()
	if b, err := s.next(t); err == nil {
		t.Fatalf("want the stream's end, got %s", b)
	}
}

// TestWebTransportLanes: each stream is a lane. The streams of a connection
// share its cache (a continuation from another stream's response), a
// stream's reset cancels its running response and leaves the others alone,
// and a suspended rollout whose stream closes detaches, to be resumed on a
// new stream of the same connection.
func TestWebTransportLanes(t *testing.T) {
	t.Parallel()
	opts := slowModel(t)
	opts.Suspension.ResumeWindow = time.Minute
	h := newHarnessOn(t, opts, wire{webTransport: true})
	c := dialRawWT(t, h, nil)

	a, b := c.lane(t, "json"), c.lane(t, "json")
	a.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "The code word is papaya."})
	r1 := decodeEv(t, a.until(t, "response.completed"))
	b.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false,
		"previous_response_id": r1.Response.ID, "input": "What was it?"})
	b.until(t, "response.completed")
	cached := map[string]string{"transport": "wt", "design": "turns", "state": "cache", "status": "completed"}
	if n := counter(t, h.metrics.Registry(), "tether_responses_total", cached); n != 1 {
		t.Fatalf("continuations from the connection's cache: %v, want 1 (from another stream's response)", n)
	}

	// A stream that names a stream_id is refused: the stream is the lane.
	b.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "stream_id": "x", "input": "hi"})
	b.wantError(t, "invalid_stream_id")

	// A reset cancels the stream's running response; b goes on.
	slow := c.lane(t, "json")
	slow.send(t, map[string]any{"type": "response.create", "model": "slow", "store": false, "input": longText})
	slow.until(t, "response.output_text.delta")
	slow.str.CancelRead(0)
	slow.str.CancelWrite(0)
	ended := map[string]string{"transport": "wt", "design": "turns", "state": "none", "status": "abandoned"}
	waitFor(t, "the reset stream's response to end", func() bool {
		return counter(t, h.metrics.Registry(), "tether_responses_total", ended) == 1
	})
	b.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "still here?"})
	b.until(t, "response.completed")

	// A suspended rollout whose stream closes detaches, and resumes on a
	// new stream; it runs to its end there.
	steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"list_dir", `{"path":"."}`}}}
	s1 := c.lane(t, "json")
	s1.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)})
	id := respID(t, s1.until(t, "response.done"))
	s1.str.Close()
	s1.wantEnd(t)
	s2 := c.lane(t, "json")
	s2.send(t, map[string]any{"type": "response.resume", "response_id": id})
	pause := s2.until(t, "response.done")
	for range steps {
		if respID(t, pause) != id {
			t.Fatalf("paused %s, want %s", respID(t, pause), id)
		}
		s2.send(t, appendEv(id, "", outputsFor(t, pause)...))
		pause = s2.until(t, "response.done", "response.completed")
	}
	if e := decodeEv(t, pause); e.Type != "response.completed" {
		t.Fatalf("the resumed rollout ended with %s", pause)
	}
}

// waitFor polls cond until it holds, for 10 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebTransportBadInput: what a WebTransport client can get wrong gets
// its documented error, and the connection serves its other streams on.
func TestWebTransportBadInput(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, tether.Options{Limits: tether.Limits{MaxFrame: 1 << 20, MaxLanes: 4}}, wire{webTransport: true})
	c := dialRawWT(t, h, nil)
	works := func() {
		t.Helper()
		s := c.lane(t, "json")
		s.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "hi"})
		s.until(t, "response.completed")
		s.str.Close()
		s.wantEnd(t) // its session is over: it no longer counts as a lane
	}

	for name, header := range map[string][]byte{
		"an unknown encoding":       []byte(`{"encoding":"cbor"}`),
		"no header, an event first": []byte(`{"type":"response.create","model":"tether-scripted","input":"hi"}`),
		"a header that is not JSON": []byte(`encoding: json`),
		"a header past its 1 KiB":   []byte(`{"encoding":"json","pad":"` + strings.Repeat("x", 2000) + `"}`),
	} {
		s := c.open(t)
		s.frame(t, header)
		code := "unsupported_encoding"
		if len(header) > 1024 {
			code = "request_too_large"
		}
		b := s.recv(t)
		if e := decodeEv(t, b); e.Type != "error" || e.Error.Code != code {
			t.Fatalf("%s: got %s, want error %s", name, b, code)
		}
		s.wantEnd(t)
	}
	works()

	// A length prefix past Limits.MaxFrame is refused at once, before any of the
	// frame is sent (so before it could be buffered).
	s := c.lane(t, "json")
	s.raw(t, []byte{0xff, 0xff, 0xff, 0xff})
	s.wantError(t, "request_too_large")
	s.wantEnd(t)
	works()

	// A stream reset in the middle of a frame ends that stream's session.
	s = c.lane(t, "json")
	s.raw(t, []byte{0, 0, 4, 0, '{', '"', 't'})
	s.str.CancelWrite(0)
	for { // the reset may discard the header before the server reads it: then it says so
		if _, err := s.next(t); err != nil {
			break
		}
	}
	works()

	// msgpack that declares a map of 4G entries, a string of 4 GiB: refused,
	// and the stream is usable after.
	s = c.lane(t, "msgpack")
	for _, bad := range [][]byte{{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a', 0x01}, {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'}} {
		s.frame(t, bad)
		b := s.recv(t)
		js, err := protocol.MsgpackToJSON(b)
		if err != nil {
			t.Fatalf("a msgpack stream's error event is not msgpack: %v", err)
		}
		if e := decodeEv(t, js); e.Type != "error" || e.Error.Code != "invalid_json" {
			t.Fatalf("got %s, want error invalid_json", js)
		}
	}
	create, _ := protocol.JSONToMsgpack([]byte(`{"type":"response.create","model":"tether-scripted","store":false,"input":"hi"}`))
	s.frame(t, create)
	for {
		js, err := protocol.MsgpackToJSON(s.recv(t))
		if err != nil {
			t.Fatal(err)
		}
		if typ := decodeEv(t, js).Type; typ == "response.completed" {
			break
		} else if typ == "error" {
			t.Fatalf("after the bad frames: %s", js)
		}
	}
	s.str.Close()
	s.wantEnd(t)

	// Past Limits.MaxLanes streams, a stream is refused.
	var open []*rawStream
	for range 4 {
		open = append(open, c.lane(t, "json"))
	}
	for _, s := range open { // the server has taken every one
		s.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "hi"})
		s.until(t, "response.completed")
	}
	extra := c.lane(t, "json")
	extra.wantError(t, "websocket_stream_limit_reached")
	extra.wantEnd(t)
	for _, s := range open {
		s.str.Close()
		s.wantEnd(t)
	}
	works()
}

// TestWebTransportDatagramFlood: datagrams are not part of the protocol;
// a flood of them costs the server a bounded queue, and the connection
// serves on. Not parallel: it reads the live heap.
func TestWebTransportDatagramFlood(t *testing.T) {
	h := newHarnessOn(t, tether.Options{}, wire{webTransport: true})
	c := dialRawWT(t, h, nil)
	before := liveHeap()
	payload := make([]byte, 1000)
	for range 20000 {
		c.sess.SendDatagram(payload) // the client's queue drops what it cannot send
	}
	s := c.lane(t, "json")
	s.send(t, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "hi"})
	s.until(t, "response.completed")
	if grew := int64(liveHeap()) - int64(before); grew > 8<<20 {
		t.Errorf("20 MB of datagrams grew the live heap by %d bytes", grew)
	}
}

// TestWebTransportOrigin: a page from another origin may connect only when
// the server allows it, as on WebSocket.
func TestWebTransportOrigin(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{false, true} {
		opts := tether.Options{}
		if allowed {
			opts.OriginPatterns = []string{"app.example:*"}
		}
		h := newHarnessOn(t, opts, wire{webTransport: true})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		tr := &webtransport.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
		res, sess, err := tr.Dial(ctx, h.wt.URL()+"/responses", http.Header{"Origin": {"https://app.example:8443"}})
		cancel()
		switch {
		case allowed && err != nil:
			t.Errorf("allowed origin: %v", err)
		case !allowed && (err == nil || res == nil || res.StatusCode != http.StatusForbidden):
			t.Errorf("another origin: %v, %v; want 403", res, err)
		}
		if sess != nil {
			sess.CloseWithError(0, "")
		}
		tr.Close()
	}
}
