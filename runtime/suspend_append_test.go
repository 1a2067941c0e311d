package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// This file tests the window right after a complete response.append: the
// rollout runs its next step, no longer parked, while the client sends a
// create on the same lane or drops and resumes on another connection.

// raceRounds is how many fresh rollouts a race test drives.
const raceRounds = 50

// twoSteps is a rollout that pauses twice, on one client call each time.
var twoSteps = [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}}}

// gatedSteps pauses on read_file while the step's web search still runs
// (the search's item comes after the call's, so its output_item.done does
// not hold the pause back): from the append of read_file's output to the
// end of the search, the step has every client output and is not parked.
var gatedSteps = [][]dcall{{{"read_file", `{"path":"a.go"}`}, {"web_search", `{"query":"gated"}`}}, {{"grep", `{"pattern":"x"}`}}}

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
		held := &holdSecondStep{Sampler: sampler.NewScripted(r, sampler.Timing{})}
		h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
			"tether-scripted": sampler.NewScripted(r, sampler.Timing{}),
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

// TestSuspendedInProgressAfterStep: the append that answers a pause resumes
// the response (its response.in_progress) only when the step holds nothing
// more: while the step's web search still runs, the in_progress waits for
// the search's output_item.done, and follows it once the search returns.
func TestSuspendedInProgressAfterStep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		p := newPipeHarness(t, runtime.Options{HostedTools: []runtime.Tool{websearch.New(gatedSearcher{gate})}})
		c := p.dial(t, "")
		c.send(t, create(suspendedBody("tether-scripted", gatedSteps, true)))
		pause := last(c.next(t))
		c.send(t, appendEv(respID(t, pause), "", outputsFor(t, pause)...))
		synctest.Wait() // the server has taken the append; the search still runs
		close(gate)
		step := c.next(t)
		searchDone, inProgress := -1, -1
		for i, b := range step {
			e := decodeEv(t, b)
			switch {
			case e.Type == "response.output_item.done" && bytes.Contains(e.Item, []byte(`"web_search_call"`)):
				searchDone = i
			case e.Type == "response.in_progress" && inProgress < 0:
				inProgress = i
			}
		}
		if searchDone < 0 || inProgress < searchDone {
			t.Fatalf("search's output_item.done at %d, response.in_progress at %d:\n%s", searchDone, inProgress, bytes.Join(step, []byte("\n")))
		}
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
