package streamfloor

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/sampler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// frame is ev as a server's text frame.
func frame(ev string) []byte {
	n := len(ev)
	var b []byte
	switch {
	case n < 126:
		b = []byte{0x81, byte(n)}
	case n <= 0xffff:
		b = []byte{0x81, 126, byte(n >> 8), byte(n)}
	default:
		b = binary.BigEndian.AppendUint64([]byte{0x81, 127}, uint64(n))
	}
	return append(b, ev...)
}

// pause is a response event with usage.
func pause(typ, id string, in, cached, reasoning int) string {
	return fmt.Sprintf(`{"type":%q,"response":{"id":%q,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens_details":{"reasoning_tokens":%d}}}}`,
		typ, id, in, cached, reasoning)
}

func delta(s string) string {
	return fmt.Sprintf(`{"type":"response.output_text.delta","delta":%q}`, s)
}

// words counts a delta's tokens as its words.
func words(s string) int { return len(strings.Fields(s)) }

// tape is a suspended rollout of two steps on the wire: the upgrade, the
// first step's frames, the second's, the close; and the marks of the
// client's create, its append and its response.processed (no answer).
func tape() (in []byte, marks []int, steps [][][]byte) {
	in = []byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
	one := [][]byte{frame(`{"type":"response.created"}`), frame(`{"type":"response.in_progress"}`),
		frame(delta("a")), frame(delta("b c")), frame(`{"type":"response.output_item.done"}`), frame(pause("response.done", "r1", 100, 0, 7))}
	two := [][]byte{frame(`{"type":"response.in_progress"}`), frame(delta(strings.Repeat("x", 300))), frame(pause("response.completed", "r1", 250, 100, 10))}
	marks = append(marks, len(in))
	in = append(in, bytes.Join(one, nil)...)
	marks = append(marks, len(in))
	in = append(in, bytes.Join(two, nil)...)
	marks = append(marks, len(in)) // response.processed, then the client's close (no message)
	in = append(in, 0x88, 0)       // the server's answer to the close
	return in, marks, [][][]byte{one, two}
}

// TestParse cuts a tape into steps: each step's frames before its first
// delta its head, each delta's frame with those after it, due at its last
// token; a suspended rollout's usage read step by step; the close left
// out.
func TestParse(t *testing.T) {
	in, marks, steps := tape()
	rec, err := Parse(in, marks, words)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Steps) != 3 || !rec.Steps[2].Silent() {
		t.Fatalf("%d steps, want 2 and a silent one (response.processed): %+v", len(rec.Steps), rec.Steps)
	}
	one, two := rec.Steps[0], rec.Steps[1]
	whole := func(f Frame) []byte { // the delta's frame and those after it
		return append(appendHeader(nil, len(f.Pre)+len(f.Text)+len(f.Post)), slices.Concat(f.Pre, f.Text, f.Post, f.Then)...)
	}
	if !bytes.Equal(one.Head, bytes.Join(steps[0][:2], nil)) || len(one.Frames) != 2 ||
		!bytes.Equal(whole(one.Frames[0]), steps[0][2]) || !bytes.Equal(whole(one.Frames[1]), bytes.Join(steps[0][3:], nil)) ||
		string(one.Frames[1].Text) != "b c" || len(one.Frames[0].Then) != 0 {
		t.Errorf("step one cut wrong: %+v", one)
	}
	if fmt.Sprint(one.Due) != "[0 2]" || one.Tokens != 3 || one.Uncached != 100 || one.Reasoning != 7 {
		t.Errorf("step one: due %v, %d tokens, %d uncached, %d reasoning; want [0 2], 3, 100, 7", one.Due, one.Tokens, one.Uncached, one.Reasoning)
	}
	// The second step's usage is the response's so far: 250 in, 100
	// cached, less the first step's 100 in.
	if fmt.Sprint(two.Due) != "[0]" || two.Tokens != 1 || two.Uncached != 50 || two.Reasoning != 3 || two.Bytes() != len(bytes.Join(steps[1], nil)) {
		t.Errorf("step two: due %v, %d tokens, %d uncached, %d reasoning, %d bytes", two.Due, two.Tokens, two.Uncached, two.Reasoning, two.Bytes())
	}
}

// TestParseBadTapes: a tape that is not a server's WebSocket stream, or cut
// short, is an error, not a panic or a recording.
func TestParseBadTapes(t *testing.T) {
	in, marks, _ := tape()
	for name, c := range map[string]struct {
		in    []byte
		marks []int
	}{
		"no upgrade":     {in[40:], marks},
		"cut short":      {in[:marks[1]-3], marks[:2]},
		"mark in header": {in, []int{3}},
		"masked":         {append(in[:marks[0]:marks[0]], 0x81, 0x81, 1, 2, 3, 4, 'x'), marks[:1]},
		"not an event":   {append(in[:marks[0]:marks[0]], frame("nope")...), marks[:1]},
		"no steps":       {in[:marks[0]], nil},
		"silent only":    {in[:marks[0]], []int{marks[0]}},
	} {
		if _, err := Parse(c.in, c.marks, words); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzParse: no tape makes Parse panic, and what it parses validates.
func FuzzParse(f *testing.F) {
	in, marks, _ := tape()
	f.Add(in, marks[0], marks[1])
	f.Fuzz(func(t *testing.T, in []byte, m1, m2 int) {
		rec, err := Parse(in, []int{m1, m2}, words)
		if err == nil && rec.Validate() != nil {
			t.Fatalf("parsed a recording that does not validate: %v", rec.Validate())
		}
	})
}

// TestServerReplays serves a recording paced by the engine and reads it
// back with a WebSocket client: each message answered by the next step,
// frame by frame as recorded, the tokens on the timing's schedule.
func TestServerReplays(t *testing.T) {
	in, marks, steps := tape()
	rec, err := Parse(in, marks, words)
	if err != nil {
		t.Fatal(err)
	}
	tm := sampler.Timing{TPS: 200, TTFT: 20 * time.Millisecond}
	ctx, c := serve(t, rec, tm, Cost{})
	for i, step := range steps {
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create"}`)); err != nil {
			t.Fatal(err)
		}
		// The step's frames as recorded, a run of deltas as their text
		// (the writer merges deltas it has not yet taken): the last one
		// ends the step.
		var want, got []string
		for _, f := range step {
			_, p, _, _ := readFrame(f)
			want = collapse(want, p)
		}
		for len(got) < len(want) || (len(got) == len(want) && got[len(got)-1] != want[len(want)-1]) {
			_, p, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = collapse(got, p)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d:\n%q\nwant\n%q", i, got, want)
		}
		// The last token is due after the first's time (TTFT and the
		// uncached prompt's prefill, none here: no rate) and the rest.
		if min := tm.Due(0, rec.Steps[i].Reasoning+rec.Steps[i].Tokens-1); time.Since(start) < min {
			t.Errorf("step %d streamed in %v, before its last token was due (%v)", i, time.Since(start), min)
		}
	}
	// The recording's response.processed had no answer: neither has the
	// client's.
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.processed"}`)); err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if _, b, _ := c.Read(ctxTimeout(t, 50*time.Millisecond)); json.Unmarshal(b, &ev) == nil {
		t.Errorf("a frame after the recording's steps: %v", ev)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// serve serves rec with timing tm and cost to a WebSocket client, until
// the test ends.
func serve(t *testing.T, rec *Recording, tm sampler.Timing, cost Cost) (context.Context, *websocket.Conn) {
	t.Helper()
	srv, err := NewServer(rec, tm, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetCost(cost)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	ctx := ctxTimeout(t, 30*time.Second)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return ctx, c
}

// TestServerCost: a floor given a cost spends it, a step's before the
// step streams and a token's as each is released, so that an unpaced
// step's last frame comes no sooner than the step's cost and its tokens'.
func TestServerCost(t *testing.T) {
	in, marks, steps := tape()
	rec, err := Parse(in, marks, words)
	if err != nil {
		t.Fatal(err)
	}
	cost := Cost{Step: 30 * time.Millisecond, Token: 10 * time.Millisecond}
	ctx, c := serve(t, rec, sampler.Timing{}, cost)
	for i, step := range steps {
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"response.append"}`)); err != nil {
			t.Fatal(err)
		}
		last := step[len(step)-1]
		_, want, _, _ := readFrame(last)
		for {
			_, p, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(p, want) {
				break
			}
		}
		spent := cost.Step + time.Duration(rec.Steps[i].Tokens)*cost.Token
		if took := time.Since(start); took < spent {
			t.Errorf("step %d of %d tokens streamed in %v, less than its cost %v", i, rec.Steps[i].Tokens, took, spent)
		}
	}
}

// collapse adds event p to events: a delta's text to the delta before it.
func collapse(events []string, p []byte) []string {
	var ev event
	json.Unmarshal(p, &ev)
	if ev.Delta == nil {
		return append(events, string(p))
	}
	if n := len(events); n > 0 && strings.HasPrefix(events[n-1], "delta: ") {
		events[n-1] += *ev.Delta
		return events
	}
	return append(events, "delta: "+*ev.Delta)
}

// TestDeltasMerge: deltas queued while the writer has not taken the one
// before go out as one frame, as tether merges them, its header growing
// with it (past 125 bytes, two bytes more); a frame between, or the
// writer taking them, starts a new one.
func TestDeltasMerge(t *testing.T) {
	c := &conn{more: make(chan struct{}, 1), writing: true} // a writer runs: nothing is taken meanwhile
	f := Frame{Pre: []byte(`{"type":"response.output_text.delta","delta":"`), Text: []byte(`ab\"`), Post: []byte(`","logprobs":[]}`)}
	for range 40 {
		c.queueDelta(&f)
	}
	then := f
	then.Then = frame(`{"type":"response.output_text.done"}`)
	c.queueDelta(&then)
	c.queueDelta(&f)
	var texts []string
	for b := c.pending; len(b) > 0; {
		n, p, _, err := readFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
		var ev event
		if err := json.Unmarshal(p, &ev); err != nil {
			t.Fatalf("%v: %s", err, p)
		}
		if ev.Delta != nil {
			texts = append(texts, *ev.Delta)
		}
	}
	if want := []string{strings.Repeat(`ab"`, 41), `ab"`}; !slices.Equal(texts, want) {
		t.Errorf("deltas %q, want %q", texts, want)
	}
	c.pending, c.open.at = c.pending[:0], -1 // the writer took them
	c.queueDelta(&f)
	if _, p, _, err := readFrame(c.pending); err != nil || !bytes.Equal(p, slices.Concat(f.Pre, f.Text, f.Post)) {
		t.Errorf("after the writer took the rest: %s, %v", p, err)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestTapMarksMessages: a tapped client connection marks where each
// message it sends begins in what it has read: once for a message the
// library writes in pieces, once each for two messages sent with nothing
// read between (at the same offset), and not for its close.
func TestTapMarksMessages(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		for {
			_, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if !bytes.HasPrefix(msg, []byte("quiet")) {
				c.Write(r.Context(), websocket.MessageText, []byte("ok"))
			}
		}
	}))
	defer hs.Close()
	var tapes []*Tape
	hc := &http.Client{Transport: &http.Transport{DialContext: Tap((&net.Dialer{}).DialContext, func(t *Tape) { tapes = append(tapes, t) })}}
	defer hc.CloseIdleConnections()
	ctx := ctxTimeout(t, 10*time.Second)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	send := func(msg []byte) {
		if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
			t.Fatal(err)
		}
	}
	read := func() {
		if _, b, err := c.Read(ctx); err != nil || string(b) != "ok" {
			t.Fatalf("read %q, %v", b, err)
		}
	}
	send(bytes.Repeat([]byte("x"), 100_000)) // past the library's write buffer: written in pieces
	read()
	send([]byte("quiet"))
	send([]byte("y"))
	read()
	c.Close(websocket.StatusNormalClosure, "")
	if len(tapes) != 1 {
		t.Fatalf("%d tapes", len(tapes))
	}
	in, marks := tapes[0].Read()
	upgrade := bytes.Index(in, []byte("\r\n\r\n")) + 4
	ok := len(frame("ok"))
	if want := []int{upgrade, upgrade + ok, upgrade + ok}; !slices.Equal(marks, want) {
		t.Errorf("marks %v, want %v (the upgrade's %d bytes, then an answer of %d)", marks, want, upgrade, ok)
	}
}

// TestFlushersDoNotWait: over a real socket whose client does not read
// yet, the floor's flusher writes what the socket takes and hands the rest
// to a writer of the connection's own, so that no flusher is left running
// while the client still has bytes to read; once it reads, it reads every
// byte queued, in order.
func TestFlushersDoNotWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	raw := &lockedConn{Conn: sc, fd: flushers.NewSocket(sc)}
	writes := flushers.New(1)
	c := &conn{raw: raw, writes: writes, more: make(chan struct{}, 1)}
	const chunks, size = 16, 1 << 20 // far more than a loopback socket's buffers
	var want []byte
	for i := range chunks {
		b := bytes.Repeat([]byte{'a' + byte(i)}, size)
		want = append(want, b...)
		c.queue(b, true)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if running, waiting := writes.Running(); running == 0 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a flusher still runs while its client does not read")
		}
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the client read the queued bytes out of order")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		writing, err := c.writing, c.err
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if !writing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection's writer did not end once everything was written")
		}
	}
	sc.Close()
}
