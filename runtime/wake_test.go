package runtime_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
)

// slowStore is a checkpoint store whose Load or Take waits (ignoring the
// context) while its delay is set: a wake caught in the middle.
type slowStore struct {
	runtime.Checkpoints
	loadDelay, takeDelay atomic.Int64
}

func (s *slowStore) Load(_ context.Context, tenant, id, creds string) (*runtime.Journal, error) {
	time.Sleep(time.Duration(s.loadDelay.Load()))
	return s.Checkpoints.Load(context.Background(), tenant, id, creds)
}

func (s *slowStore) Take(_ context.Context, tenant, id string, epoch uint64, lease runtime.Lease) error {
	time.Sleep(time.Duration(s.takeDelay.Load()))
	return s.Checkpoints.Take(context.Background(), tenant, id, epoch, lease)
}

// hibernatingServer is a server whose parked rollouts hibernate after a
// minute, checkpointing to cps.
func hibernatingServer(t *testing.T, cps runtime.Checkpoints, tune func(*runtime.Options)) *pipeHarness {
	o := durableOptions(cps)
	o.Suspension.HibernateAfter = time.Minute
	if tune != nil {
		tune(&o)
	}
	return newPipeHarness(t, o)
}

// TestWakeDropped: a wake whose connection ends before the rollout parks
// leaves it detached, in its resume window, not tied to the dead
// connection: cancelled by the wake, it ends and frees its place
// (Suspension.Max of one lets another rollout begin).
func TestWakeDropped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowStore{Checkpoints: runtime.NewMemoryCheckpoints()}
		a := hibernatingServer(t, store, func(o *runtime.Options) { o.Suspension.Max = 1 })
		c := a.dial(t, "Bearer alice")
		c.send(t, create(durableBody()))
		id := respID(t, last(c.next(t)))
		time.Sleep(2 * time.Minute) // hibernated
		synctest.Wait()

		store.takeDelay.Store(int64(time.Second))
		c.send(t, refEv("response.cancel", id, ""))
		synctest.Wait() // the wake is in Take
		c.drop()
		store.takeDelay.Store(0)
		time.Sleep(10 * time.Minute)
		synctest.Wait()

		c2 := a.dial(t, "Bearer alice")
		c2.send(t, create(durableBody()))
		if got := last(c2.next(t)); eventType(t, got) != "response.done" {
			t.Fatalf("a create after the woken rollout's connection left: %s", got)
		}
	})
}

// TestWakeOneAtATime: a lane wakes one rollout at a time. On a connection
// that holds no place for either, an append naming a second hibernated
// rollout on the lane where the first wakes is refused at once
// (stream_suspended, naming the first), as a create there is, and so is
// one once the first has parked again, which its lane then follows; the
// second wakes on its own lane.
func TestWakeOneAtATime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowStore{Checkpoints: runtime.NewMemoryCheckpoints()}
		a := hibernatingServer(t, store, nil)
		steps := [][]dcall{{{"grep", `{"pattern":"x"}`}}, {{"run_tests", `{}`}}}
		c := a.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		pause := last(c.next(t))
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "b", "input": script(steps)}))
		pauseB := last(c.next(t))
		time.Sleep(2 * time.Minute) // hibernated
		synctest.Wait()
		c.drop()

		first, second := respID(t, pause), respID(t, pauseB)
		c2 := a.dial(t, "Bearer alice")
		refused := func(when string) {
			t.Helper()
			f := c2.recv(t)
			if eventType(t, f) != "error" || !strings.Contains(string(f), `"stream_suspended"`) || !strings.Contains(string(f), first) {
				t.Fatalf("an append to a second rollout on the lane where the first %s: %s, want stream_suspended naming the first", when, f)
			}
		}
		store.loadDelay.Store(int64(time.Second))
		c2.send(t, appendEv(first, "", outputsFor(t, pause)...))
		synctest.Wait() // the wake is in Load
		c2.send(t, appendEv(second, "", outputsFor(t, pauseB)...))
		refused("wakes")
		store.loadDelay.Store(0)
		if p := last(c2.next(t)); eventType(t, p) != "response.done" || respID(t, p) != first {
			t.Fatalf("the first rollout, woken, went on to %s, want its second pause", p)
		}
		c2.send(t, appendEv(second, "", outputsFor(t, pauseB)...))
		refused("has woken and parked on")
		c2.send(t, appendEv(second, "b", outputsFor(t, pauseB)...))
		if p := last(c2.next(t)); eventType(t, p) != "response.done" || respID(t, p) != second {
			t.Fatalf("the second rollout woken on its own lane went on to %s, want its second pause", p)
		}
	})
}

// TestWakeWrongLane: an append naming a hibernated rollout on another
// lane than its own is refused at once (stream_id_mismatch), starting no
// wake; the rollout's own lane keeps its place, and at the pause's
// timeout its client is told (client_tool_timeout).
func TestWakeWrongLane(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowStore{Checkpoints: runtime.NewMemoryCheckpoints()}
		a := hibernatingServer(t, store, nil)
		c := a.dial(t, "Bearer alice")
		c.send(t, create(durableBody()))
		pause := last(c.next(t))
		id := respID(t, pause)
		time.Sleep(9*time.Minute + 30*time.Second)
		synctest.Wait()

		store.loadDelay.Store(int64(time.Minute)) // a wake, had one begun, would be in Load at the timeout
		c.send(t, appendEv(id, "x", outputsFor(t, pause)...))
		if e := decodeEv(t, recvWithin(t, c, 10*time.Second)); e.Error == nil || e.Error.Code != "stream_id_mismatch" {
			t.Fatalf("an append on another lane: %+v, want stream_id_mismatch", e)
		}
		store.loadDelay.Store(0)
		got := recvWithin(t, c, 3*time.Minute)
		if e := decodeEv(t, got); e.Type != "response.failed" || e.Response.Error == nil || e.Response.Error.Code != "client_tool_timeout" {
			t.Fatalf("at the timeout: %s, want client_tool_timeout", got)
		}
	})
}

// TestWakeDeadlineQueueFull: the wake at a hibernated rollout's timeout
// takes no place in the connection's queue (the client sent nothing): with
// the queue full it still runs, the client is told client_tool_timeout and
// nothing else, and the lane is free again.
func TestWakeDeadlineQueueFull(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := hibernatingServer(t, runtime.NewMemoryCheckpoints(), func(o *runtime.Options) { o.Limits.MaxQueued = 1 })
		c := a.dial(t, "Bearer alice")
		body := durableBody()
		c.send(t, create(body))
		c.next(t)
		time.Sleep(9*time.Minute + 30*time.Second)
		other := durableBody()
		other["stream_id"] = "b"
		c.send(t, create(other)) // parked on b at the timeout: the queue is full
		idB := respID(t, last(c.next(t)))
		got := recvWithin(t, c, 2*time.Minute)
		if e := decodeEv(t, got); e.Type != "response.failed" || e.Response.Error == nil || e.Response.Error.Code != "client_tool_timeout" {
			t.Fatalf("at the timeout, with the queue full: %s, want client_tool_timeout", got)
		}
		c.send(t, refEv("response.cancel", idB, "b")) // a place in the queue again
		c.next(t)
		c.send(t, create(body))
		if got := last(c.next(t)); eventType(t, got) != "response.done" {
			t.Fatalf("past the timeout, a create on the rollout's lane: %s", got)
		}
	})
}

// TestWakeStaleLane: a connection that kept a hibernated rollout's place
// (open, say half-open) while its client resumed it on another connection
// does not take it back at the old pause's timeout: the checkpoint is no
// longer the one it hibernated at, and the client's append on the
// connection it moved to is taken.
func TestWakeStaleLane(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := hibernatingServer(t, runtime.NewMemoryCheckpoints(), nil)
		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(durableBody()))
		id := respID(t, last(c1.next(t)))
		time.Sleep(2 * time.Minute) // hibernated; c1 stays open
		synctest.Wait()

		c2 := a.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		p := c2.recv(t)
		c2.send(t, appendEv(id, "", outputsFor(t, p)...))
		pause2 := last(c2.next(t))
		time.Sleep(8*time.Minute + 30*time.Second) // c1's timer, at the first pause's timeout; the second's is not due
		synctest.Wait()
		c2.send(t, appendEv(id, "", outputsFor(t, pause2)...))
		if got := last(c2.next(t)); eventType(t, got) != "response.done" {
			t.Fatalf("the client's append on the connection it moved to: %s, want the next pause", got)
		}
	})
}
