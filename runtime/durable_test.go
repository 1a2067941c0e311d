package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// durableOptions are two servers' options sharing one checkpoint store.
func durableOptions(cps runtime.Checkpoints) runtime.Options {
	return runtime.Options{Checkpoints: cps, EveryDelta: true,
		Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute, Timeout: 10 * time.Minute}}
}

var durableSteps = [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}

// durableBody is a suspended rollout of durableSteps, on the default lane.
func durableBody() map[string]any {
	return map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(durableSteps)}
}

// durablePair is two servers that share one checkpoint store.
func durablePair(t *testing.T) (a, b *pipeHarness) {
	cps := runtime.NewMemoryCheckpoints()
	return newPipeHarness(t, durableOptions(cps)), newPipeHarness(t, durableOptions(cps))
}

// TestDurableTakeover: a rollout parked on server A, whose client's
// connection drops, is resumed on server B, which shares A's checkpoints:
// B replays what the client missed (the pending pause, or every frame after
// the client's sequence_number), takes the appends and runs the rollout to
// its end, its sequence numbers going on, with the same items and text as
// the same rollout never moved. Other credentials find nothing. A, fenced
// out, sends nothing more for it. Fake time, in-memory connections.
func TestDurableTakeover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cps := runtime.NewMemoryCheckpoints()
		a := newPipeHarness(t, durableOptions(cps))
		b := newPipeHarness(t, durableOptions(cps))
		body := map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "work", "input": script(durableSteps)}

		// The same rollout, never moved, on a server of its own.
		unmoved := maps.Clone(body)
		delete(unmoved, "stream_id")
		want, _ := driveSuspended(t, newPipeHarness(t, durableOptions(runtime.NewMemoryCheckpoints())).dial(t, "Bearer alice"), unmoved)

		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.send(t, appendEv(id, "work", outputsFor(t, last(events))...))
		step2 := c1.next(t)
		events = append(events, step2...)
		pause := last(events)
		c1.drop() // A's client is gone; A could be too
		// A lets the rollout go (its lease released) as it sees the drop:
		// until then B refuses a resume, response_owned_elsewhere.
		synctest.Wait()

		for _, auth := range []string{"Bearer mallory", ""} {
			other := b.dial(t, auth)
			other.send(t, refEv("response.resume", id, "work"))
			other.wantError(t, "response_not_found")
			other.drop()
		}
		wrongLane := b.dial(t, "Bearer alice")
		wrongLane.send(t, refEv("response.resume", id, ""))
		wrongLane.wantError(t, "stream_id_mismatch")
		wrongLane.drop()

		// The client says it has seen step 2's first three events: B
		// replays the rest of them, byte for byte, the pause last.
		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "work")
		resume["sequence_number"] = *decodeEv(t, step2[2]).Seq
		c2.send(t, resume)
		replayed := c2.next(t)
		if len(replayed) != len(step2)-3 {
			t.Fatalf("B replayed %d frames, want the %d after the client's sequence_number", len(replayed), len(step2)-3)
		}
		for i, f := range replayed {
			if !bytes.Equal(f, step2[3+i]) {
				t.Fatalf("replayed frame %d:\n%s\nwant\n%s", i, f, step2[3+i])
			}
		}
		c2.send(t, appendEv(id, "work", outputsFor(t, pause)...))
		rest := c2.next(t)
		c2.send(t, appendEv(id, "work", outputsFor(t, last(rest))...))
		rest = append(rest, c2.next(t)...)
		events = append(events, rest...)
		checkStreamInvariants(t, events)
		sameRollout(t, last(events), last(want))

		// A still holds its copy, detached and older: resumed there, it
		// finds in the store that the rollout ended on B, and answers as
		// for any rollout it does not hold, not from its own state (once
		// B has let the ended rollout go in the store).
		synctest.Wait()
		c3 := a.dial(t, "Bearer alice")
		c3.send(t, refEv("response.resume", id, "work"))
		c3.wantError(t, "response_not_found")
	})
}

// TestDurableTakeBack: a rollout taken over by B while its copy on A was
// detached is resumed on A again: A finds in the store that B holds it,
// fences out its own older copy, and takes the rollout back from B's
// checkpoint (the pause B parked at, not A's), which fences B out.
func TestDurableTakeBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, b := durablePair(t)
		body := durableBody()
		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		events := c1.next(t)
		id := respID(t, last(events))
		c1.drop()
		synctest.Wait() // A has let the rollout go: its lease with it

		c2 := b.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		events = append(events[:len(events)-1], c2.recv(t)) // the pause again
		c2.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		events = append(events, c2.next(t)...) // B parks at the second pause
		c2.drop()
		synctest.Wait() // and B too (CI once resumed on A first: response_owned_elsewhere)

		c3 := a.dial(t, "Bearer alice")
		c3.send(t, refEv("response.resume", id, ""))
		again := c3.recv(t)
		if !bytes.Equal(again, last(events)) {
			t.Fatalf("A's resume sent %s, want B's pending pause %s", again, last(events))
		}
		for p := again; eventType(t, p) == "response.done"; {
			c3.send(t, appendEv(id, "", outputsFor(t, p)...))
			evs := c3.next(t)
			events = append(events, evs...)
			p = last(evs)
		}
		checkStreamInvariants(t, events)
		if end := decodeEv(t, last(events)); end.Type != "response.completed" {
			t.Fatalf("the rollout taken back ended with %s", last(events))
		}
	})
}

// sameRollout checks that two rollouts' terminal events have the same
// items, in order, with the same calls and text, and the same output
// tokens: ids differ (and with them, by a few tokens, the input).
func sameRollout(t *testing.T, got, want []byte) {
	t.Helper()
	type item struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	var g, w struct {
		Response struct {
			Status string `json:"status"`
			Output []item `json:"output"`
			Usage  struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(g)
	wj, _ := json.Marshal(w)
	if !bytes.Equal(gj, wj) || g.Response.Status != "completed" {
		t.Fatalf("the moved rollout ended with\n%s\nwant, as never moved,\n%s", gj, wj)
	}
}

// TestDurableHandover: at Shutdown, a server with checkpoints hands its
// parked rollouts over instead of failing them: their clients get no
// response.failed, their connections close with 1012 (service restart),
// and each resumes on another server that shares the store and runs to its
// end.
func TestDurableHandover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, b := durablePair(t)
		body := durableBody()

		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		events := c1.next(t)
		pause := last(events)
		id := respID(t, pause)

		if sent := handOver(t, a, c1); len(sent) > 0 {
			t.Fatalf("A sent %s while handing its rollout over", sent[0])
		}

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, pause).Seq
		c2.send(t, resume)
		if again := c2.recv(t); !bytes.Equal(again, pause) {
			t.Fatalf("B's resume sent %s, want the pending pause", again)
		}
		for p := pause; ; {
			c2.send(t, appendEv(id, "", outputsFor(t, p)...))
			evs := c2.next(t)
			events = append(events, evs...)
			if p = last(evs); eventType(t, p) != "response.done" {
				break
			}
		}
		checkStreamInvariants(t, events)
		if end := decodeEv(t, last(events)); end.Type != "response.completed" {
			t.Fatalf("the handed-over rollout ended with %s", last(events))
		}
	})
}

// handOver shuts server a down and reads c, its client, until a closes it
// with 1012 (service restart): it returns the frames read meanwhile.
func handOver(t *testing.T, a *pipeHarness, c *wsConn) (sent [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- a.srv.Shutdown(ctx) }()
	for {
		f, err := c.read(t, ctx)
		if err != nil {
			if status := websocket.CloseStatus(err); status != websocket.StatusServiceRestart {
				t.Fatalf("the server closed the connection with %v (%v), want 1012", status, err)
			}
			break
		}
		sent = append(sent, f)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	return sent
}

// TestDurableHandoverMidStep: a rollout running a step when its server
// begins to shut down is handed over at the step's pause, not run to its
// end: its client is not shown the pause there, its connection closes
// with 1012 once the drain is over (which it does not last), and the pause
// is replayed to it on the server it resumes on, where the rollout runs to
// its end.
func TestDurableHandoverMidStep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cps := runtime.NewMemoryCheckpoints()
		a := durableServer(t, cps, func(r *sampler.Renderer) runtime.Sampler {
			return sampler.NewScripted(r, sampler.Timing{TTFT: 5 * time.Second})
		})
		b := newPipeHarness(t, durableOptions(cps))
		body := durableBody()

		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		events := [][]byte{c1.recv(t)} // response.created: the step runs, waiting on its model
		id := respID(t, events[0])
		start := time.Now()
		for _, f := range handOver(t, a, c1) {
			if eventType(t, f) == "response.done" {
				t.Fatalf("A showed the pause while handing the rollout over: %s", f)
			}
			events = append(events, f)
		}
		if d := time.Since(start); d >= runtime.DefaultDrainTimeout {
			t.Errorf("the shutdown took %v: the drain waited for the rollout's end, not its pause", d)
		}

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, last(events)).Seq
		c2.send(t, resume)
		for {
			evs := c2.next(t)
			events = append(events, evs...)
			p := last(evs)
			if eventType(t, p) != "response.done" {
				break
			}
			c2.send(t, appendEv(id, "", outputsFor(t, p)...))
		}
		checkStreamInvariants(t, events)
		if end := decodeEv(t, last(events)); end.Type != "response.completed" {
			t.Fatalf("the rollout handed over mid-step ended with %s", last(events))
		}
	})
}

// hangAfter is a model that hangs (until its context ends) from its
// (n+1)th step on: a server stuck, or dying, in the middle of a step.
type hangAfter struct {
	runtime.Sampler
	mu sync.Mutex
	n  int
}

func (h *hangAfter) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	h.mu.Lock()
	h.n--
	hang := h.n < 0
	h.mu.Unlock()
	if hang {
		<-ctx.Done()
		return sampler.Result{}, ctx.Err()
	}
	return h.Sampler.Sample(ctx, req, emit)
}

// hungServer is a server checkpointing to cps whose model hangs in the
// third step of a rollout: a server that stops mid-step. die ends it as
// far as the store can tell: it is cut off, and its leases run out.
func hungServer(t *testing.T, cps runtime.Checkpoints) (h *pipeHarness, die func()) {
	store := &cutOff{Checkpoints: cps}
	h = durableServer(t, store, func(r *sampler.Renderer) runtime.Sampler {
		return &hangAfter{Sampler: sampler.NewScripted(r, sampler.Timing{}), n: 2}
	})
	return h, func() {
		store.cut.Store(true)
		time.Sleep(runtime.DefaultLeaseTTL)
	}
}

// durableServer is a server checkpointing to cps whose tether-scripted is
// the model that model makes.
func durableServer(t *testing.T, cps runtime.Checkpoints, model func(*sampler.Renderer) runtime.Sampler) *pipeHarness {
	r := renderer(t)
	o := durableOptions(cps)
	o.Renderer = r
	o.Models = map[string]runtime.Sampler{sampler.ScriptedModel: model(r)}
	return newPipeHarness(t, o)
}

// intoThirdStep creates the rollout on c, answers its two pauses, and
// reads the third step's first event (response.in_progress: the loop went
// on, the second answer taken); it returns the events read and the id.
func intoThirdStep(t *testing.T, c *wsConn, body map[string]any) (events [][]byte, id string) {
	c.send(t, create(body))
	events = c.next(t)
	id = respID(t, last(events))
	c.send(t, appendEv(id, "", outputsFor(t, last(events))...))
	events = append(events, c.next(t)...)
	c.send(t, appendEv(id, "", outputsFor(t, last(events))...))
	begun := c.recv(t)
	if eventType(t, begun) != "response.in_progress" {
		t.Fatalf("after the second append: %s", begun)
	}
	return append(events, begun), id
}

// TestDurableMidStep: a server that stops in the middle of a step, after
// its client's append was accepted (the client has seen the step begin),
// leaves the pause and its answer in the store; the rollout resumed on
// another server runs the step again from its start, and the client gets
// only what it has not seen, the same items as a rollout never moved.
func TestDurableMidStep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cps := runtime.NewMemoryCheckpoints()
		a, die := hungServer(t, cps)
		b := newPipeHarness(t, durableOptions(cps))
		body := durableBody()
		want, _ := driveSuspended(t, newPipeHarness(t, durableOptions(runtime.NewMemoryCheckpoints())).dial(t, "Bearer alice"), maps.Clone(body))

		c1 := a.dial(t, "Bearer alice")
		events, id := intoThirdStep(t, c1, body) // the step begins: the answer is in the store
		resumed := last(events)
		synctest.Wait() // A's model hangs in the step
		c1.drop()
		die()

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, resumed).Seq
		c2.send(t, resume)
		for {
			evs := c2.next(t)
			events = append(events, evs...)
			if eventType(t, last(evs)) != "response.done" {
				break
			}
			c2.send(t, appendEv(id, "", outputsFor(t, last(evs))...))
		}
		checkStreamInvariants(t, events)
		sameRollout(t, last(events), last(want))
	})
}

// upstreamLike is a model that does not say it is deterministic, as an
// upstream one: a step it runs again may come out otherwise.
type upstreamLike struct{ runtime.Sampler }

// TestDurableRestartAnnounced: a rollout taken over in the middle of a
// step, whose new server's model may not say the same twice, announces
// the step's run again (response.step_restarted, discarding what the
// client saw of the first run) and sends all of it, numbered on from
// what the client has, without a gap; the rollout ends as one never
// moved does.
func TestDurableRestartAnnounced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cps := runtime.NewMemoryCheckpoints()
		a, die := hungServer(t, cps)
		b := durableServer(t, cps, func(r *sampler.Renderer) runtime.Sampler {
			return upstreamLike{sampler.NewScripted(r, sampler.Timing{})}
		})
		body := durableBody()
		unmoved := newPipeHarness(t, durableOptions(runtime.NewMemoryCheckpoints())).dial(t, "Bearer alice")
		want, _ := driveSuspended(t, unmoved, maps.Clone(body))
		unmoved.drop()

		c1 := a.dial(t, "Bearer alice")
		events, id := intoThirdStep(t, c1, body)
		begun := last(events) // the third step's response.in_progress: seen of its first run
		pause := events[len(events)-2]
		synctest.Wait()
		c1.drop()
		die()

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, begun).Seq
		c2.send(t, resume)
		rest := c2.next(t)
		var restart struct {
			Type         string `json:"type"`
			Seq          int    `json:"sequence_number"`
			DiscardAfter int    `json:"discard_after"`
			OutputIndex  int    `json:"output_index"`
		}
		if err := json.Unmarshal(rest[0], &restart); err != nil || restart.Type != "response.step_restarted" ||
			restart.Seq != *decodeEv(t, begun).Seq+1 || restart.DiscardAfter != *decodeEv(t, pause).Seq || restart.OutputIndex != 3 {
			t.Fatalf("the step run again began with %s, want response.step_restarted after %d, discarding after the pause %d, from output 3",
				rest[0], *decodeEv(t, begun).Seq, *decodeEv(t, pause).Seq)
		}
		if typ := eventType(t, rest[1]); typ != "response.in_progress" {
			t.Fatalf("after the announcement: %s, want the step's response.in_progress", typ)
		}
		for eventType(t, last(rest)) == "response.done" {
			c2.send(t, appendEv(id, "", outputsFor(t, last(rest))...))
			rest = append(rest, c2.next(t)...)
		}
		for i, f := range rest { // numbered on from what the client had, without a gap
			if seq := *decodeEv(t, f).Seq; seq != restart.Seq+i {
				t.Fatalf("frame %d from B has sequence_number %d, want %d", i, seq, restart.Seq+i)
			}
		}
		// Checked as the client sees it: the first run's in_progress and
		// the announcement dropped.
		events = append(events[:len(events)-1], rest[1:]...)
		for i := range events[1:] {
			events[i+1] = renumber(t, events[i+1], *decodeEv(t, events[i]).Seq+1)
		}
		checkStreamInvariants(t, events)
		sameRollout(t, last(events), last(want))
	})
}

// renumber is the frame b with sequence_number seq.
func renumber(t *testing.T, b []byte, seq int) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["sequence_number"] = seq
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDurableTakeoverBounded: a server that holds as many suspended
// rollouts as it may refuses a takeover before it takes the rollout: its
// epoch stays, and the server that holds it goes on with it, not fenced
// out.
func TestDurableTakeoverBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cps := runtime.NewMemoryCheckpoints()
		a := newPipeHarness(t, durableOptions(cps))
		full := durableOptions(cps)
		full.Suspension.Max = 1
		b := newPipeHarness(t, full)
		body := durableBody()

		onB := b.dial(t, "Bearer bob")
		onB.send(t, create(body))
		onB.next(t) // B's one place is taken

		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		pause := last(c1.next(t))
		id := respID(t, pause)
		c1.drop()

		c2 := b.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		c2.wantError(t, "too_many_suspended")

		c3 := a.dial(t, "Bearer alice")
		c3.send(t, refEv("response.resume", id, ""))
		if again := c3.recv(t); !bytes.Equal(again, pause) {
			t.Fatalf("A's resume sent %s, want the pending pause", again)
		}
		c3.send(t, appendEv(id, "", outputsFor(t, pause)...))
		if next := last(c3.next(t)); eventType(t, next) != "response.done" {
			t.Fatalf("A went on to %s, want its next pause", next)
		}
	})
}

// failNth is a checkpoint store whose nth Write fails.
type failNth struct {
	runtime.Checkpoints
	n      int32
	writes atomic.Int32
}

func (f *failNth) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	if f.writes.Add(1) == f.n {
		return errors.New("store down")
	}
	return f.Checkpoints.Write(ctx, w, ttl)
}

// TestDurableCheckpointBehind: the store fails to take a pause (the
// rollout goes on in memory), and its server stops in the step after the
// client answered it: the rollout taken over elsewhere runs from the older
// checkpoint, and when it comes to the pause the client has answered
// already, the client is told (response.failed, store_unavailable), not
// left waiting on a pause it will not be shown again.
func TestDurableCheckpointBehind(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := runtime.NewMemoryCheckpoints()
		a, die := hungServer(t, &failNth{Checkpoints: mem, n: 3}) // pause 1, its answer, then pause 2 fails
		b := newPipeHarness(t, durableOptions(mem))
		body := durableBody()
		c1 := a.dial(t, "Bearer alice")
		events, id := intoThirdStep(t, c1, body) // its second pause not in the store
		seen := last(events)
		synctest.Wait() // A's model hangs in the third step
		c1.drop()
		die()

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", id, "")
		resume["sequence_number"] = *decodeEv(t, seen).Seq
		c2.send(t, resume)
		end := decodeEv(t, last(c2.next(t)))
		if end.Type != "response.failed" || end.Response.Error == nil || end.Response.Error.Code != "store_unavailable" {
			t.Fatalf("the client was told %s %+v, want response.failed with store_unavailable", end.Type, end.Response)
		}
	})
}

// hibernatePair is two servers that share one checkpoint store, whose
// parked rollouts hibernate after a minute.
func hibernatePair(t *testing.T, released *releaseCounter) (a, b *pipeHarness) {
	cps := runtime.NewMemoryCheckpoints()
	counted := func(o *runtime.Options) { o.Observer = released }
	return hibernatingServer(t, cps, counted), hibernatingServer(t, cps, counted)
}

// hibernated waits for the rollouts parked to hibernate, and checks that
// n have, in all, on the servers counted.
func (c *releaseCounter) hibernated(t *testing.T, n int64) {
	t.Helper()
	time.Sleep(2 * time.Minute)
	synctest.Wait()
	if got := c.n.Load(); got != n {
		t.Fatalf("%d hibernations, want %d", got, n)
	}
}

// TestDurableHibernate: a rollout parked past Suspension.HibernateAfter
// leaves memory (no goroutine of the server's is left for it once its
// client is gone), and whatever names it next wakes it from its
// checkpoint: an append on the connection it hibernated on, which keeps
// its lane (a create there is refused as before); a resume on another
// server; a bad append, refused with the rollout parked, then a good one.
// The rollout ends as one never hibernated does, every event once.
func TestDurableHibernate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var released releaseCounter
		a, b := hibernatePair(t, &released)
		body := durableBody()
		unmoved := newPipeHarness(t, durableOptions(runtime.NewMemoryCheckpoints())).dial(t, "Bearer alice")
		want, _ := driveSuspended(t, unmoved, maps.Clone(body))
		unmoved.drop()

		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(body))
		events := c1.next(t)
		id := respID(t, last(events))
		released.hibernated(t, 1)
		c1.send(t, create(body))
		c1.wantError(t, "stream_suspended")
		c1.send(t, appendEv(id, "", outputsFor(t, last(events))...)) // wakes it here
		events = append(events, c1.next(t)...)
		pause := last(events)
		if eventType(t, pause) != "response.done" {
			t.Fatalf("the rollout woken by an append went on to %s, want its second pause", pause)
		}

		released.hibernated(t, 2)
		c1.drop()
		synctest.Wait()
		if g := serverGoroutines(t); len(g) != 0 {
			t.Fatalf("a hibernated rollout, its client gone, left %d goroutines of the server's:\n%s", len(g), g[0])
		}

		c2 := b.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		if again := c2.recv(t); !bytes.Equal(again, pause) {
			t.Fatalf("the resume on B sent %s, want the pending pause", again)
		}
		released.hibernated(t, 3) // on B, its client attached
		c2.send(t, appendEv(id, "", fco("call_nobody", "x")))
		c2.wantError(t, "tool_call_not_found")
		c2.send(t, appendEv(id, "", outputsFor(t, pause)...))
		for p := []byte(nil); ; {
			evs := c2.next(t)
			events = append(events, evs...)
			if p = last(evs); eventType(t, p) != "response.done" {
				break
			}
			c2.send(t, appendEv(id, "", outputsFor(t, p)...))
		}
		checkStreamInvariants(t, events)
		sameRollout(t, last(events), last(want))
	})
}

// TestDurableWakeQueued: events that name a hibernated rollout while it
// wakes are taken in order: two appends sent back to back, each with one
// of the pause's two outputs, answer it (the second is not left behind
// the first's wake); an append of one output then a cancel cancel it. An
// append from another connection to a rollout held here awake is
// refused, as it was before hibernation, and the rollout goes on.
func TestDurableWakeQueued(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var released releaseCounter
		a, _ := hibernatePair(t, &released)
		steps := [][]dcall{{{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}
		c := a.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		pause := last(c.next(t))
		id := respID(t, pause)
		other := a.dial(t, "Bearer alice")
		other.send(t, appendEv(id, "", fco("call_x", "x")))
		other.wantError(t, "response_not_found")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "b", "input": script(steps)}))
		pauseB := last(c.next(t))
		idB := respID(t, pauseB)
		released.hibernated(t, 2)

		outs := outputsFor(t, pause)
		c.send(t, appendEv(id, "", outs[0]))
		c.send(t, appendEv(id, "", outs[1]))
		if p := last(c.next(t)); eventType(t, p) != "response.done" {
			t.Fatalf("after two appends to a waking rollout: %s, want its second pause", p)
		}
		c.send(t, appendEv(idB, "b", outputsFor(t, pauseB)[0]))
		c.send(t, refEv("response.cancel", idB, "b"))
		if end := last(c.next(t)); eventType(t, end) != "response.cancelled" {
			t.Fatalf("an append then a cancel to a waking rollout: %s, want it cancelled", end)
		}
	})
}

// TestDurableAnsweredTimeout: a pause answered in time, whose server then
// stops in the step, is not timed out by the server that takes the
// rollout over after the pause's timeout: the answer came in time. A
// cancel sent to that server, rather than a resume, cancels the rollout.
func TestDurableAnsweredTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		for _, cancel := range []bool{false, true} {
			cps := runtime.NewMemoryCheckpoints()
			a, die := hungServer(t, cps)
			b := newPipeHarness(t, durableOptions(cps))
			c1 := a.dial(t, "Bearer alice")
			c1.send(t, create(durableBody()))
			events := c1.next(t)
			id := respID(t, last(events))
			c1.send(t, appendEv(id, "", outputsFor(t, last(events))...))
			events = append(events, c1.next(t)...)
			time.Sleep(9*time.Minute + 30*time.Second) // the second pause answered near its timeout
			c1.send(t, appendEv(id, "", outputsFor(t, last(events))...))
			seen := c1.recv(t) // the third step begins; A's model hangs in it
			synctest.Wait()
			c1.drop()
			die()                        // 10 s
			time.Sleep(40 * time.Second) // past the second pause's timeout, within the resume window of A's copy

			c2 := b.dial(t, "Bearer alice")
			if cancel {
				c2.send(t, refEv("response.cancel", id, ""))
			} else {
				resume := refEv("response.resume", id, "")
				resume["sequence_number"] = *decodeEv(t, seen).Seq
				c2.send(t, resume)
			}
			end := last(c2.next(t))
			want := map[bool]string{false: "response.done", true: "response.cancelled"}[cancel]
			if eventType(t, end) != want {
				t.Fatalf("cancel %v: the rollout taken over after its answered pause's timeout: %s, want %s", cancel, end, want)
			}
		}
	})
}

// TestDurableHibernatedTimeout: a hibernated rollout keeps its pause's
// Suspension.Timeout, counted from the pause. Its client still connected
// is told at the timeout (client_tool_timeout), with no frame before it,
// and its lane is free again; a client that left and resumes after it is
// told on resuming. A hibernated rollout cancelled ends cancelled.
func TestDurableHibernatedTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var released releaseCounter
		o := durableOptions(runtime.NewMemoryCheckpoints())
		o.Suspension.HibernateAfter, o.Observer = 30*time.Second, &released // before the detached one's resume window ends
		a := newPipeHarness(t, o)
		body := durableBody()
		c := a.dial(t, "Bearer alice")
		c.send(t, create(body))
		c.next(t)
		body["stream_id"] = "other"
		c.send(t, create(body))
		second := respID(t, last(c.next(t)))
		c2 := a.dial(t, "Bearer alice")
		delete(body, "stream_id")
		c2.send(t, create(body))
		third := respID(t, last(c2.next(t)))
		c2.drop()

		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := released.n.Load(); n != 3 {
			t.Fatalf("%d rollouts hibernated, want 3", n)
		}
		c.send(t, refEv("response.cancel", second, "other"))
		if end := decodeEv(t, last(c.next(t))); end.Type != "response.cancelled" {
			t.Fatalf("a hibernated rollout cancelled ended with %s", end.Type)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute-time.Second) // until just before the timeout
		_, err := c.read(t, ctx)
		cancel()
		if err == nil {
			t.Fatal("a frame came before the hibernated rollout's timeout")
		}
		time.Sleep(2 * time.Second)   // past the timeout
		c = a.dial(t, "Bearer alice") // the read's deadline closed that one
		c.send(t, refEv("response.resume", third, ""))
		got := last(c.next(t))
		if end := decodeEv(t, got); end.Type != "response.failed" || end.Response.Error == nil || end.Response.Error.Code != "client_tool_timeout" {
			t.Fatalf("a hibernated rollout resumed past its timeout: %s, want client_tool_timeout", got)
		}
	})
}

// TestDurableHibernatedTimeoutAttached: a hibernated rollout whose client
// is still connected is told at its pause's timeout, without a frame
// before, and its lane is free again.
func TestDurableHibernatedTimeoutAttached(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := durableOptions(runtime.NewMemoryCheckpoints())
		o.Suspension.HibernateAfter = time.Minute
		a := newPipeHarness(t, o)
		body := durableBody()
		c := a.dial(t, "Bearer alice")
		c.send(t, create(body))
		c.next(t)
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
		defer cancel()
		got, err := c.read(t, ctx)
		if err != nil {
			t.Fatal(err)
		}
		if end := decodeEv(t, got); end.Type != "response.failed" || end.Response.Error == nil || end.Response.Error.Code != "client_tool_timeout" {
			t.Fatalf("the hibernated rollout's client got %s, want client_tool_timeout", got)
		}
		if d := time.Since(start); d < 10*time.Minute-time.Second {
			t.Fatalf("told after %v, want at the 10-minute timeout", d)
		}
		c.send(t, create(body)) // the lane is free
		if eventType(t, last(c.next(t))) != "response.done" {
			t.Fatal("a create on the lane after the timeout did not run")
		}
	})
}

// releaseCounter is an Observer that counts the responses that left
// their server for their checkpoint (runtime.StatusReleased).
type releaseCounter struct{ n atomic.Int64 }

func (c *releaseCounter) ResponseEnded(_ runtime.ServePath, status protocol.ResponseStatus, _ protocol.Timings) {
	if status == runtime.StatusReleased {
		c.n.Add(1)
	}
}
func (*releaseCounter) StepSampled(time.Duration, time.Duration)  {}
func (*releaseCounter) StepDispatched(time.Duration)              {}
func (*releaseCounter) Paused()                                   {}
func (*releaseCounter) FrameWritten(time.Duration, time.Duration) {}
