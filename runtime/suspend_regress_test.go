package runtime_test

// Regression tests for four defects of suspended rollouts and hosted tools,
// each of which made its test fail: a create right after a complete append
// refused as stream_suspended; a resume in that window replaying the
// answered pause; a tool result that does not replace its call's item lost
// to the next step; a read loop blocked, during a flood to a client that
// does not read, on a lock the rollout held while it waited for room.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// raceRounds is how many fresh rollouts a race test drives.
const raceRounds = 50

// twoSteps is a rollout that pauses twice, on one client call each time.
var twoSteps = [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}}}

// gatedSteps pauses on read_file while the step's web search still runs
// (the search's item comes after the call's, so its output_item.done does
// not hold the pause back): from the append of read_file's output to the
// end of the search, the step has every client output and is not parked.
var gatedSteps = [][]dcall{{{"read_file", `{"path":"a.go"}`}, {"web_search", `{"query":"gated"}`}}, {{"grep", `{"pattern":"x"}`}}}

// suspendedBody is a suspended create of steps by model, offering web_search if asked.
func suspendedBody(model string, steps [][]dcall, search bool) map[string]any {
	body := map[string]any{"model": model, "store": false, "suspend": true, "input": script(steps)}
	if search {
		body["tools"] = []any{webSearchTool}
	}
	return body
}

// gatedSearcher finds nothing until its gate is closed. Built in a synctest
// bubble, a search waiting on it is durably blocked.
type gatedSearcher struct{ gate chan struct{} }

func (s gatedSearcher) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return stubSearcher{}.Search(ctx, query, limit)
}

// pendingCallIDs lists the call ids a pause waits on.
func pendingCallIDs(tb testing.TB, done []byte) []string {
	tb.Helper()
	e := decodeEv(tb, done)
	if e.Type != "response.done" || e.Response == nil || e.Response.RequiredAction == nil {
		tb.Fatalf("not a pause: %s", done)
	}
	var ids []string
	for _, c := range e.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
		ids = append(ids, c.CallID)
	}
	return ids
}

// createAfterAppend sends body, a suspended create on c's default lane, and
// at its first pause sends the complete response.append and at once,
// without reading, a plain response.create on the same lane; between runs
// after both are sent. It answers the rest of the rollout, then reads the
// create's response. It returns "" when the create waited for the rollout
// and completed after it, else what went wrong.
//
// With probed set, a response.cancel of an unknown response on another lane
// follows the create: the read loop answers it at once, so its error event
// tells that the server has handled the create, and probed runs then.
func createAfterAppend(t *testing.T, c *wsConn, body map[string]any, between, probed func()) string {
	t.Helper()
	c.send(t, create(body))
	rollout := c.next(t)
	pause := last(rollout)
	if eventType(t, pause) != "response.done" {
		t.Fatalf("no first pause: %s", pause)
	}
	id := respID(t, pause)
	answered := map[string]bool{}
	for _, cid := range pendingCallIDs(t, pause) {
		answered[cid] = true
	}
	c.send(t, appendEv(id, "", outputsFor(t, pause)...))
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "hello"}))
	if probed != nil {
		c.send(t, refEv("response.cancel", "resp_probe", "probe"))
	}
	if between != nil {
		between()
	}

	// The lane is FIFO: every frame of it up to the rollout's end is the
	// rollout's; the create's response follows it.
	var refused []byte
	for {
		b := c.recv(t)
		e := decodeEv(t, b)
		if e.Type == "error" {
			switch {
			case probed != nil && e.StreamID == "probe" && e.Error != nil && e.Error.Code == protocol.CodeResponseNotFound:
				probed()
				probed = nil
			case e.StreamID == "" && e.Error != nil && e.Error.Code == protocol.CodeStreamSuspended && refused == nil:
				refused = b // the create is gone; finish the rollout all the same
			default:
				t.Fatalf("error event during the rollout: %s", b)
			}
			continue
		}
		if e.Response != nil && e.Response.ID != id {
			t.Fatalf("response %s started before rollout %s ended: %s", e.Response.ID, id, b)
		}
		rollout = append(rollout, b)
		if e.Type == "response.done" {
			for _, cid := range pendingCallIDs(t, b) {
				if answered[cid] {
					t.Fatalf("the rollout paused again on call %s, already answered: %s", cid, b)
				}
				answered[cid] = true
			}
			c.send(t, appendEv(id, "", outputsFor(t, b)...))
			continue
		}
		if isEnd(e.Type) {
			break
		}
	}
	checkSeq(t, rollout)
	if end := decodeEv(t, last(rollout)); end.Type != "response.completed" {
		t.Fatalf("rollout ended with %s", last(rollout))
	}
	if probed != nil {
		t.Fatal("no answer to the probe")
	}
	if refused != nil {
		return fmt.Sprintf("the create sent right after a complete append was refused: %s", refused)
	}
	turn := c.next(t)
	checkSeq(t, turn)
	if end := decodeEv(t, last(turn)); end.Type != "response.completed" || end.Response.ID == id {
		return fmt.Sprintf("the queued create ended with %s", last(turn))
	}
	return ""
}

// holdSecondStep is a model whose second step of a rollout (its context
// ends with the first step's only output) waits until the current release
// is closed.
type holdSecondStep struct {
	runtime.Sampler
	mu      sync.Mutex
	release chan struct{} // guarded by mu
}

// hold makes the next second step wait until the returned func is called.
func (s *holdSecondStep) hold() func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release = make(chan struct{})
	return sync.OnceFunc(func() { close(s.release) })
}

func (s *holdSecondStep) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	outputs := 0
	for _, it := range req.Items {
		if _, ok := it.(*protocol.FunctionCallOutput); ok {
			outputs++
		}
	}
	if _, ok := req.Items[len(req.Items)-1].(*protocol.FunctionCallOutput); ok && outputs == 1 {
		s.mu.Lock()
		release := s.release
		s.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return sampler.Result{}, ctx.Err()
		}
	}
	return s.Sampler.Sample(ctx, req, emit)
}

// TestSuspendedCreateAfterAppendQueues: once a response.append has answered
// every pending call, the rollout is running, not parked, so a
// response.create on its lane waits its turn (FIFO) rather than being
// refused with stream_suspended, however soon after the append it comes.
func TestSuspendedCreateAfterAppendQueues(t *testing.T) {
	t.Parallel()
	t.Run("race", func(t *testing.T) {
		t.Parallel()
		// The second step waits until the server has handled the create:
		// parked on that step, the rollout would refuse it, as it should.
		// That step starts after the window under test.
		r := renderer(t)
		held := &holdSecondStep{Sampler: sampler.NewScripted(r, sampler.Pacing{})}
		h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
			"tether-scripted": sampler.NewScripted(r, sampler.Pacing{}),
			"held":            held,
		}})
		var failures []string
		for range raceRounds {
			c := h.dial(t, nil)
			release := held.hold()
			if msg := createAfterAppend(t, c, suspendedBody("held", twoSteps, false), nil, release); msg != "" {
				failures = append(failures, msg)
			}
			release()
			c.c.CloseNow()
		}
		if len(failures) > 0 {
			t.Errorf("%d/%d rounds failed; the first: %s", len(failures), raceRounds, failures[0])
		}
	})
	// The same window held open: the step's web search still runs when the
	// append and the create arrive. Deterministic, in fake time.
	t.Run("hosted call still running", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			gate := make(chan struct{})
			p := newPipeHarness(t, runtime.Options{HostedTools: []runtime.Tool{websearch.New(gatedSearcher{gate})}})
			c := p.dial(t, "")
			msg := createAfterAppend(t, c, suspendedBody("tether-scripted", gatedSteps, true), func() {
				synctest.Wait() // the server has taken both frames
				close(gate)
			}, nil)
			if msg != "" {
				t.Error(msg)
			}
		})
	})
}

// resumeOutcome is what a resume after an append gave.
type resumeOutcome int

const (
	resumedClean resumeOutcome = iota // the rollout went on from the append
	appendLost                        // the server did not take the append (the resume came first, or the drop lost it): the replay was due
	staleReplay                       // the server had the outputs, yet replayed the pause
)

// resumeAfterAppend runs a suspended rollout on connection a and, at its
// first pause, sends the complete response.append, drops a at once and
// resumes the rollout on b (same credentials, already open). afterAppend
// runs once the append is sent, afterResume once the resume is. It then
// finishes the rollout on b.
//
// The append and the resume travel on different connections, so the server
// may take the resume first and refuse the append of a connection the
// rollout left (or lose it with the connection): a client cannot tell. So
// b answers a pause on calls that a answered by sending their outputs
// again. If the server refuses them as already given (or not pending), it
// had them: the replayed pause was stale. If it takes them, the append was
// lost and the replay due. It returns the replayed pause, if any, and
// which of the three it was.
func resumeAfterAppend(t *testing.T, a, b *wsConn, body map[string]any, afterAppend, afterResume func()) ([]byte, resumeOutcome) {
	t.Helper()
	a.send(t, create(body))
	pause := last(a.next(t))
	if eventType(t, pause) != "response.done" {
		t.Fatalf("no first pause: %s", pause)
	}
	id := respID(t, pause)
	answered := map[string]bool{}
	for _, cid := range pendingCallIDs(t, pause) {
		answered[cid] = true
	}
	a.send(t, appendEv(id, "", outputsFor(t, pause)...))
	if afterAppend != nil {
		afterAppend()
	}
	a.c.CloseNow()
	b.send(t, refEv("response.resume", id, ""))
	if afterResume != nil {
		afterResume()
	}

	var replayed []byte // a pause on answered calls, answered again
	outcome := resumedClean
	pauses := 0
	for {
		evs := b.next(t)
		end := last(evs)
		e := decodeEv(t, end)
		switch e.Type {
		case "error":
			if e.Error == nil || replayed == nil {
				t.Fatalf("resumed rollout: %s", end)
			}
			switch e.Error.Code {
			case protocol.CodeDuplicateToolOutput, protocol.CodeNothingSuspended, protocol.CodeToolCallNotFound:
				outcome = staleReplay
			default:
				t.Fatalf("outputs sent again for a replayed pause: %s", end)
			}
		case "response.done":
			if e.Response.ID != id {
				t.Fatalf("resumed a pause of another response: %s", end)
			}
			calls := pendingCallIDs(t, end)
			if slices.ContainsFunc(calls, func(cid string) bool { return answered[cid] }) {
				if replayed != nil {
					t.Fatalf("a second pause on answered calls: %s", end)
				}
				replayed = end
				b.send(t, appendEv(id, "", outputsFor(t, end)...))
				continue
			}
			if pauses++; pauses > len(twoSteps)-1 {
				t.Fatalf("more pauses than steps: %s", end)
			}
			for _, cid := range calls {
				answered[cid] = true
			}
			b.send(t, appendEv(id, "", outputsFor(t, end)...))
		case "response.completed":
			if e.Response.ID != id {
				t.Fatalf("completed another response: %s", end)
			}
			if pauses != 1 {
				t.Fatalf("b answered %d new pauses after the resume, want the second step's only", pauses)
			}
			if replayed != nil && outcome != staleReplay {
				outcome = appendLost
			}
			return replayed, outcome
		default:
			t.Fatalf("resumed rollout: %s", end)
		}
	}
}

// TestSuspendedResumeInAppendWindow: a response.resume that follows a
// complete response.append (from a connection that then dropped) never
// replays the pause that append answered; the new connection sees the
// rollout go on to its next pause, answers it and gets response.completed.
func TestSuspendedResumeInAppendWindow(t *testing.T) {
	t.Parallel()
	auth := http.Header{"Authorization": {"Bearer x"}}
	t.Run("race", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, runtime.Options{Renderer: renderer(t)})
		var stale [][]byte
		lost := 0
		for range raceRounds {
			// b is open before a drops, to resume as soon as it does.
			a, b := h.dial(t, auth), h.dial(t, auth)
			switch replayed, outcome := resumeAfterAppend(t, a, b, suspendedBody("tether-scripted", twoSteps, false), nil, nil); outcome {
			case staleReplay:
				stale = append(stale, replayed)
			case appendLost:
				lost++
			}
			b.c.CloseNow()
		}
		t.Logf("%d/%d appends not taken before the resume (their pause replayed, as it should be)", lost, raceRounds)
		if len(stale) > 0 {
			t.Errorf("%d/%d resumes replayed a pause whose outputs the server already had; the first: %s", len(stale), raceRounds, stale[0])
		}
	})
	// The same window held open: the step's web search still runs when the
	// resume arrives, and the server has taken the append before the drop.
	// Deterministic, in fake time.
	t.Run("hosted call still running", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			gate := make(chan struct{})
			p := newPipeHarness(t, runtime.Options{HostedTools: []runtime.Tool{websearch.New(gatedSearcher{gate})}})
			a, b := p.dial(t, "Bearer x"), p.dial(t, "Bearer x")
			replayed, outcome := resumeAfterAppend(t, a, b, suspendedBody("tether-scripted", gatedSteps, true), synctest.Wait, func() {
				synctest.Wait() // the server has taken the resume
				close(gate)
			})
			if outcome != resumedClean {
				t.Errorf("the resume replayed a pause whose outputs the server already had: %s", replayed)
			}
		})
	})
}

// sideOutputTool is a hosted tool in web_search's place whose result is a
// new item (a function_call_output for its call) rather than a finished
// copy of its call's item.
type sideOutputTool struct{}

func (sideOutputTool) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolWebSearch} }

func (sideOutputTool) Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error) {
	return &protocol.FunctionCallOutput{CallID: call.CallID, Output: protocol.ToolOutput{Text: "the secret word is papaya"}}, nil
}

// checkSideOutput checks a response of the sideOutputTool script: its
// web_search_call completed, and the model's answer, sampled after it,
// quotes the tool's output, which the scripted model only does when the
// output is in its context.
func checkSideOutput(t *testing.T, via string, resp []byte) {
	t.Helper()
	var r struct {
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("%s: %v: %s", via, err, resp)
	}
	if r.Status != "completed" {
		t.Fatalf("%s: status %q: %s", via, r.Status, resp)
	}
	var search, answer *itemKey
	for _, k := range itemKeys(t, r.Output) {
		switch k.Type {
		case "web_search_call":
			search = &k
		case "message":
			answer = &k
		}
	}
	if search == nil || answer == nil {
		t.Fatalf("%s: want a web_search_call and a message, got %s", via, resp)
	}
	if search.Status != "completed" {
		t.Errorf("%s: the web_search_call ended %q, want completed: its tool returned a result", via, search.Status)
	}
	if !strings.Contains(answer.Text, "papaya") {
		t.Errorf("%s: the tool's result did not reach the next step's context: the model answered %q", via, answer.Text)
	}
}

// TestToolResultJoinsContext: a hosted tool whose result is not its call's
// item (another item, here a function_call_output) still completes the call
// and its result joins the context the next sampling step reads.
func TestToolResultJoinsContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{sideOutputTool{}}})
	input := script([][]dcall{{{"web_search", `{"query":"x"}`}}})

	t.Run("http", func(t *testing.T) {
		t.Parallel()
		status, resp := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "store": true, "tools": []any{webSearchTool}, "input": input})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, resp)
		}
		checkSideOutput(t, "POST /v1/responses", resp)
		id := obj(t, resp)["id"].(string)
		status, stored := h.get(t, "/responses/"+id)
		if status != http.StatusOK {
			t.Fatalf("GET /v1/responses/%s: status %d: %s", id, status, stored)
		}
		checkSideOutput(t, "the stored response", stored)
	})
	t.Run("websocket", func(t *testing.T) {
		t.Parallel()
		c := h.dial(t, nil)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": input}))
		events := c.untilTerminal(t)
		if eventType(t, last(events)) != "response.completed" {
			t.Fatalf("ended with %s", last(events))
		}
		for _, raw := range events {
			e := decodeEv(t, raw)
			if e.Type != "response.output_item.done" {
				continue
			}
			if k := itemKeys(t, []json.RawMessage{e.Item})[0]; k.Type == "web_search_call" && k.Status != "completed" {
				t.Errorf("output_item.done of the web_search_call has status %q, want completed: %s", k.Status, raw)
			}
		}
		checkSideOutput(t, "WebSocket", terminalResponse(t, last(events)))
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
