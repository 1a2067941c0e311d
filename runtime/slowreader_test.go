package runtime_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// floodModel streams one message of n deltas of piece, unpaced, and closes
// done when it has streamed the last.
type floodModel struct {
	n     int
	piece string
	done  chan struct{}
}

func (m floodModel) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	for i := 0; i < m.n && ctx.Err() == nil; i++ {
		emit(sampler.Delta{Kind: sampler.TextDelta, Text: m.piece})
	}
	emit(sampler.Delta{Kind: sampler.PartEnd})
	close(m.done)
	return sampler.Result{OutputTokens: m.n}, ctx.Err()
}

// TestSlowReaderMemory: a client that stops reading while a response
// streams half a million deltas (2 MiB of text) to it costs the server memory of
// the order of the text, not of the deltas: the rollout runs to its end
// without waiting (the deltas the client has not taken are merged), and the
// client, reading at last, gets deltas whose concatenation is the text a
// client that kept up got, in far fewer frames, with gapless sequence
// numbers.
func TestSlowReaderMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	const n, piece = 1 << 19, "abcd"
	models := map[string]runtime.Sampler{}
	fast, slow := floodModel{n, piece, make(chan struct{})}, floodModel{n, piece, make(chan struct{})}
	models["fast"], models["slow"] = fast, slow
	// A loaded machine may take longer than the default slow-client cut
	// to stream the flood; this test is about memory, not that cut.
	h := newHarness(t, runtime.Options{Models: models, Timeouts: runtime.Timeouts{SlowClient: time.Hour, Write: time.Hour}})
	want := strings.Repeat(piece, n)

	read := func(c *wsConn, events [][]byte) (text string, deltas int) {
		events = append(events, c.untilTerminal(t)...)
		if e := decodeEv(t, last(events)); e.Type == "error" {
			t.Fatalf("after %d events: %s", len(events), last(events))
		}
		checkSeq(t, events)
		var b strings.Builder
		for _, raw := range events {
			if e := decodeEv(t, raw); e.Type == "response.output_text.delta" {
				b.WriteString(e.Delta)
				deltas++
			}
		}
		if typ := eventType(t, last(events)); typ != "response.completed" {
			t.Fatalf("the stream ends with %s", typ)
		}
		return b.String(), deltas
	}

	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "fast", "store": false, "input": "go"}))
	fastText, fastDeltas := read(c, nil)

	c = h.dial(t, nil)
	var first []byte
	peak, total := heapPeak(func() {
		c.send(t, create(map[string]any{"model": "slow", "store": true, "input": "go"}))
		first = c.recv(t)
		<-slow.done // the model has streamed everything; the client has read one frame
		id := respID(t, first)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if status, _ := h.get(t, "/responses/"+id); status == http.StatusOK {
				break // the response ended and was stored: nothing waited for the client
			}
			if time.Now().After(deadline) {
				t.Fatal("the response did not end while its client was not reading")
			}
		}
	})
	slowText, slowDeltas := read(c, [][]byte{first})
	t.Logf("%d deltas of %q: peak live heap %.1f MiB (heap with garbage %.1f MiB) while the client read nothing; "+
		"%d delta frames to it, %d to a client that kept up", n, piece, float64(peak)/mib, float64(total)/mib, slowDeltas, fastDeltas)
	if fastText != want || slowText != want {
		t.Fatalf("deltas join to %d bytes (kept up) and %d (stopped reading), want %d", len(fastText), len(slowText), len(want))
	}
	// The frames the writer put on the socket before it first waited are
	// unmerged, as many as the writer took one by one while the kernel's
	// buffers (autotuned: tcp_wmem to 4 MiB, tcp_rmem to 32 MiB here) had
	// room, which is scheduling: 234 on an idle machine, 5,454 and 5,923 in
	// two CI runs. Unmerged, all n would come.
	if slowDeltas > n/20 {
		t.Errorf("%d delta frames to a client that read nothing: want them merged", slowDeltas)
	}
	// msgpack: the writer transcodes each batch it takes, so the frames in
	// hand are held twice (JSON as queued, msgpack as written).
	bound := 32 * mib
	if testEncoding == protocol.EncodingMsgpack {
		bound += 8 * mib
	}
	if peak > uint64(bound) {
		t.Errorf("peak live heap %.1f MiB, bound %d (16× the text, more in msgpack)", float64(peak)/mib, bound/mib)
	}
}

// stallModel streams a delta, waits stall (fake time in a bubble), then
// ends its message.
type stallModel struct{ stall time.Duration }

func (m stallModel) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	emit(sampler.Delta{Kind: sampler.TextStart})
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: "first"})
	select {
	case <-time.After(m.stall):
	case <-ctx.Done():
		return sampler.Result{}, ctx.Err()
	}
	emit(sampler.Delta{Kind: sampler.TextDelta, Text: " second"})
	emit(sampler.Delta{Kind: sampler.PartEnd})
	return sampler.Result{OutputTokens: 2}, nil
}

// TestSlowClientTimeout: a client that has not taken a frame queued longer
// ago than Timeouts.SlowClient is told so in one last error event
// (client_too_slow), after the frame the writer had in hand, and the
// connection is closed with a policy violation (1008), long before
// Timeouts.Write. Fake time, in-memory connections.
func TestSlowClientTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{
			Models:   map[string]runtime.Sampler{"stall": stallModel{stall: 3 * time.Second}},
			Timeouts: runtime.Timeouts{SlowClient: 2 * time.Second, Write: time.Hour},
		})
		c := p.dial(t, "")
		start := time.Now()
		c.send(t, create(map[string]any{"model": "stall", "store": false, "input": "go"}))
		synctest.Wait() // the model stalls; the client reads nothing
		time.Sleep(3 * time.Second)
		synctest.Wait() // the model went on: its next frame found the client 3 s behind

		// The batch the writer had in hand, then the error.
		var events [][]byte
		for {
			b := c.recv(t)
			e := decodeEv(t, b)
			if e.Type == "error" {
				if e.Error == nil || e.Error.Code != "client_too_slow" {
					t.Fatalf("error %s, want client_too_slow", b)
				}
				break
			}
			if e.Type == "response.output_text.done" || isEnd(e.Type) {
				t.Fatalf("%s reached the client: frames queued after it fell behind were not dropped", e.Type)
			}
			if e.Seq == nil || *e.Seq != len(events) {
				t.Fatalf("frame %d (%s) has sequence_number %v", len(events), e.Type, e.Seq)
			}
			events = append(events, b)
		}
		if len(events) == 0 || eventType(t, events[0]) != "response.created" {
			t.Fatalf("%d frames before the error, want the batch from response.created on", len(events))
		}
		_, _, err := c.c.Read(context.Background())
		if status := websocket.CloseStatus(err); status != websocket.StatusPolicyViolation {
			t.Fatalf("then %v (close status %d), want close 1008", err, status)
		}
		if elapsed := time.Since(start); elapsed > 4*time.Second {
			t.Fatalf("closed after %v, want soon after the 2 s timeout (Timeouts.Write is an hour)", elapsed)
		}
	})
}

// TestLargeItemReachesClient: a 6 MiB message, whose end repeats it in
// four events at once (24 MiB queued together), reaches a client that reads
// them after they were all queued; it is not taken for a slow one. Fake
// time, in-memory connections (a write waits for the client's read).
func TestLargeItemReachesClient(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		text := strings.Repeat("abcd", 6<<18)
		p := newPipeHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"big": floodModel{1, text, make(chan struct{})}}})
		c := p.dial(t, "")
		c.c.SetReadLimit(64 << 20)
		c.send(t, create(map[string]any{"model": "big", "store": false, "input": "go"}))
		synctest.Wait() // every event is queued; the writer waits for the client
		for {
			b := c.recv(t)
			e := decodeEv(t, b)
			if e.Type == "error" {
				t.Fatalf("%.200s", b)
			}
			if isEnd(e.Type) {
				if e.Type != "response.completed" {
					t.Fatalf("ended with %s", e.Type)
				}
				return
			}
		}
	})
}

// TestSlowReaderCutOnSocket: over a real socket, which the server's
// flushers write, a client that stops reading mid-stream is cut once a
// write has waited Timeouts.Write: the flusher's write, which waits on no
// client, leaves the rest of its batch to a writer of the connection's own,
// and that writer's write times out. The client, its socket buffer small,
// finds its connection gone before the response's end.
func TestSlowReaderCutOnSocket(t *testing.T) {
	if testEncoding != protocol.EncodingJSON {
		t.Skip("the socket's path is the encoding's alike")
	}
	flood := floodModel{1 << 14, strings.Repeat("x", 1<<10), make(chan struct{})} // 16 MiB of text
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"flood": flood},
		Timeouts: runtime.Timeouts{SlowClient: time.Hour, Write: 300 * time.Millisecond}})
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	c := dialWS(t, h.ws, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	c.send(t, create(map[string]any{"model": "flood", "store": false, "input": "go"}))
	c.recv(t) // response.created; then nothing is read
	<-flood.done
	time.Sleep(2 * time.Second) // the client reads nothing: past the write's timeout, many times over

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; ; n++ {
		_, data, err := c.c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("after %d frames the connection is still open", n)
			}
			return // cut
		}
		if strings.Contains(string(data), `"type":"response.completed"`) {
			t.Fatalf("the whole response reached a client that stopped reading, %d frames", n)
		}
	}
}
