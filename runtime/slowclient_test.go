package runtime_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestTrickledBody: a request body that does not arrive within Timeouts.Body
// is refused with 408 request_timeout and its connection closed, instead
// of holding a goroutine for as long as the client likes.
func TestTrickledBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Timeouts: runtime.Timeouts{Body: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and one byte of a 100-byte body, then nothing.
	if _, err := conn.Write([]byte("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on the test, not the thing measured
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	var body strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&body)
	if !strings.Contains(body.String(), `"code":"request_timeout"`) {
		t.Fatalf("body %s", body.String())
	}
}

// TestTooManyCallsPerStep: a step that makes more calls than
// Limits.MaxCallsPerStep fails the response with too_many_tool_calls, in both
// designs, instead of parking thousands of calls; the connection stays
// usable.
func TestTooManyCallsPerStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Limits: runtime.Limits{MaxCallsPerStep: 8}})
	calls := strings.TrimSuffix(strings.Repeat("f {} | ", 20), " | ")
	c := h.dial(t, nil)
	for _, suspend := range []bool{false, true} {
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": suspend,
			"tools": []any{map[string]any{"type": "function", "name": "f"}}, "input": "call: " + calls}))
		evs := untilPause(t, c)
		e := decodeEv(t, evs[len(evs)-1])
		if e.Type != "response.failed" || e.Response.Error == nil || e.Response.Error.Code != "too_many_tool_calls" {
			t.Fatalf("suspend %v: ended with %s", suspend, evs[len(evs)-1])
		}
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hi"}))
	if evs := c.untilTerminal(t); eventType(t, evs[len(evs)-1]) != "response.completed" {
		t.Fatalf("after the refusals: %s", evs[len(evs)-1])
	}
}

// blockingSampler starts a sample, says so on started, and ends it only
// with its context.
type blockingSampler struct{ started chan struct{} }

func (b blockingSampler) Sample(ctx context.Context, _ *sampler.Request, _ func(sampler.Delta)) (sampler.Result, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return sampler.Result{}, ctx.Err()
}

// TestShutdownAnswersJSONCreate: a non-streaming create that outlasts
// Shutdown's drain is answered 503 server_shutting_down, not with a closed
// connection.
func TestShutdownAnswersJSONCreate(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"blocks": blockingSampler{started}}, Timeouts: runtime.Timeouts{Drain: 50 * time.Millisecond}})
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(h.base+"/responses", "application/json", strings.NewReader(`{"model":"blocks","input":"hi"}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		got <- answer{code: resp.StatusCode, body: b.String()}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, `"code":"server_shutting_down"`) {
		t.Fatalf("%d %s %v", a.code, a.body, a.err)
	}
}

// TestNonReadingWebSocket: a client that stops reading while its suspended
// rollout streams has its connection cut once a write has stalled for
// Timeouts.Write, instead of holding the writer forever; the rollout lives
// on, detached, and a resume on a new connection gets the whole stream.
// Fake time; in-memory connections, which hold no frame unread, so the
// first write stalls.
func TestNonReadingWebSocket(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{Timeouts: runtime.Timeouts{Write: 5 * time.Second}, Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute}})
		c1 := p.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": longText}))
		id := respID(t, c1.recv(t)) // response.created; then the client reads no more
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if len(serverGoroutines(t)) == 0 {
			t.Fatal("the server gave up before WriteTimeout")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		// Cut: whatever part of a frame the pipe holds, then the end.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for {
			if _, _, err := c1.c.Read(ctx); err != nil {
				if ctx.Err() != nil {
					t.Fatal("the connection is still open after WriteTimeout")
				}
				break
			}
		}

		c2 := p.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = -1
		c2.send(t, resume)
		events := c2.untilTerminal(t)
		checkStreamInvariants(t, events)
	})
}

// TestNonReadingSSE: an SSE client that stops reading has its stream cut
// once a write has stalled for Timeouts.Write: the body ends without a
// terminal event, and the handler is gone. Fake time, in-memory
// connections.
func TestNonReadingSSE(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{Timeouts: runtime.Timeouts{Write: 5 * time.Second}})
		body := `{"model":"tether-scripted","stream":true,"input":"Please read this back: ` + strings.Repeat("the quick brown fox ", 2000) + `"}`
		resp, err := p.client.Post("http://tether.test/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		time.Sleep(6 * time.Second) // the client reads nothing
		synctest.Wait()
		if n := len(serverGoroutines(t)); n != 0 {
			t.Fatalf("%d server goroutines left after WriteTimeout: the stalled stream was not cut", n)
		}
		var got strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&got)
		if strings.Contains(got.String(), "response.completed") {
			t.Fatal("the stream completed: it never stalled")
		}
	})
}

// floodArgs makes the scripted model stream a call's arguments as far more
// delta events (one per token) than a connection's send queue holds
// (session.go's outQueueFrames, 1,024).
var floodArgs = `{"pattern":"` + strings.Repeat("fox|dog|", 4000) + `"}`

// TestFloodToNonReadingClient: a response that floods a client which reads
// nothing runs to its end without waiting for it (its 16,000 argument
// deltas are merged while the client is behind, so the queue stays short);
// a response.cancel sent then is answered (the read loop never waits on a
// rollout), and the client, reading at last, gets the whole stream: gapless
// sequence numbers, and argument deltas whose concatenation is the
// arguments, in a few frames. The connection serves on. Fake time,
// in-memory connections.
//
// A server goroutine blocked on a lock that a rollout holds while it waits
// for its client would stop the bubble (a mutex wait is not durably
// blocking, so synctest.Wait would not return), so the bubble runs on its
// own goroutine under a real-time watchdog, and the test then fails rather
// than hangs.
func TestFloodToNonReadingClient(t *testing.T) {
	t.Parallel()
	var stage atomic.Pointer[string]
	starting := "starting the bubble"
	stage.Store(&starting)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		synctest.Test(t, func(t *testing.T) { floodNonReading(t, &stage) })
	}()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatalf("the bubble is stuck (its goroutines leak) at: %s", *stage.Load())
	}
}

func floodNonReading(t *testing.T, stage *atomic.Pointer[string]) {
	at := func(s string) { stage.Store(&s) }
	at("starting the server")
	p := newPipeHarness(t, runtime.Options{})
	c := p.dial(t, "")
	at("creating the response")
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false,
		"input": script([][]dcall{{{"grep", floodArgs}}})}))
	events := [][]byte{c.recv(t)}
	id := respID(t, events[0])
	at("not reading while the rollout runs: it must not wait for the client")
	synctest.Wait()
	start := time.Now()
	at("sending response.cancel")
	c.send(t, refEv("response.cancel", id, ""))
	synctest.Wait()
	at("reading the whole stream")
	var args strings.Builder
	deltas := 0
	for {
		b := recvWithin(t, c, time.Second)
		e := decodeEv(t, b)
		if e.Type == "error" {
			break // the cancel's answer: the response had already ended
		}
		events = append(events, b)
		if e.Type == "response.function_call_arguments.delta" {
			args.WriteString(e.Delta)
			deltas++
		}
		if e.Type == "response.cancelled" {
			t.Fatalf("the response was cancelled after %d frames: it waited for the client instead of running to its end", len(events))
		}
	}
	checkSeq(t, events)
	if typ := eventType(t, last(events)); typ != "response.completed" {
		t.Fatalf("the stream ends with %s", typ)
	}
	if args.String() != floodArgs {
		t.Fatalf("argument deltas join to %d bytes, want the %d of the arguments", args.Len(), len(floodArgs))
	}
	if deltas > 16 {
		t.Fatalf("%d argument delta frames for a client that read nothing: want them merged into a few", deltas)
	}
	if elapsed := time.Since(start); elapsed > 0 {
		t.Fatalf("%v of fake time passed: something waited on a timer", elapsed)
	}
	at("a create after the flood")
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hello"}))
	if evs := c.next(t); eventType(t, last(evs)) != "response.completed" {
		t.Fatalf("next create: %s", last(evs))
	}
	at("shutting down")
}
