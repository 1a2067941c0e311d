package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// cutOff is a journal store as a server sees it that the test can cut the
// server off from (cut), as from a dead, stopped or partitioned server:
// meanwhile every call fails at once, nothing of the server's reaches the
// store, and its leases run out.
type cutOff struct {
	runtime.Checkpoints
	cut atomic.Bool
}

var errCutOff = errors.New("the server is cut off from its store")

func (c *cutOff) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	if c.cut.Load() {
		return errCutOff
	}
	return c.Checkpoints.Write(ctx, w, ttl)
}

func (c *cutOff) Load(ctx context.Context, tenant, id, creds string) (*runtime.Journal, error) {
	if c.cut.Load() {
		return nil, errCutOff
	}
	return c.Checkpoints.Load(ctx, tenant, id, creds)
}

func (c *cutOff) Take(ctx context.Context, tenant, id string, epoch uint64, lease runtime.Lease) error {
	if c.cut.Load() {
		return errCutOff
	}
	return c.Checkpoints.Take(ctx, tenant, id, epoch, lease)
}

func (c *cutOff) Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	if c.cut.Load() {
		return errCutOff
	}
	return c.Checkpoints.Drop(ctx, tenant, id, epoch, ttl)
}

func (c *cutOff) Renew(ctx context.Context, lease runtime.Lease, refs []runtime.LeaseRef, ttl time.Duration) ([]bool, error) {
	if c.cut.Load() {
		return nil, errCutOff
	}
	return c.Checkpoints.Renew(ctx, lease, refs, ttl)
}

func (c *cutOff) Release(ctx context.Context, owner string, refs []runtime.LeaseRef) error {
	if c.cut.Load() {
		return errCutOff
	}
	return c.Checkpoints.Release(ctx, owner, refs)
}

// stopAt is a journal store whose nth Write (n 0: none) stops its server
// there, as a kill would: it hangs, before its write lands or once it has,
// and the server reaches the store no more (its leases run out), until the
// test lets it go (by then another server has taken the rollout over, and
// what the stopped one does next is fenced out or goes to a client gone).
type stopAt struct {
	cutOff
	n       int32
	landed  bool
	writes  atomic.Int32
	stopped chan struct{} // closed when the nth write hangs
	release chan struct{}
}

func (s *stopAt) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	if s.writes.Add(1) != s.n {
		return s.cutOff.Write(ctx, w, ttl)
	}
	var err error
	if s.landed {
		err = s.cutOff.Write(context.Background(), w, ttl)
	}
	s.cut.Store(true)
	close(s.stopped)
	<-s.release
	s.cut.Store(false)
	if !s.landed {
		err = s.cutOff.Write(context.Background(), w, ttl)
	}
	return err
}

// TestDurableKilledBetweenWrites: a server stopped at any of its journal
// writes of a rollout (each pause's, each answer's), before the write
// lands or once it has, loses nothing its client saw: the client resumes
// on another server with the last sequence_number it saw and, taking the
// events after it (and the pending pause again, which it answers again),
// gets every event once, without a gap, and the rollout ends as one never
// stopped. Only before the first pause is written is there nothing to
// resume: the rollout was never durable, and its client never saw a pause.
func TestDurableKilledBetweenWrites(t *testing.T) {
	t.Parallel()
	// The rollout never stopped: its final response, and how many journal
	// writes it makes (a pause's and an answer's for each of its pauses).
	var want []byte
	var writes int32
	synctest.Test(t, func(t *testing.T) {
		counted := &stopAt{cutOff: cutOff{Checkpoints: runtime.NewMemoryCheckpoints()}} // n 0: it never stops
		want = last(driveRollout(t, newPipeHarness(t, durableOptions(counted)).dial(t, "Bearer alice"), maps.Clone(durableBody())))
		writes = counted.writes.Load()
	})
	if pauses := int32(len(durableSteps)); writes != 2*pauses {
		t.Fatalf("the rollout made %d journal writes, want %d: a pause's and an answer's for each of its %d pauses", writes, 2*pauses, pauses)
	}
	for n := int32(1); n <= writes && !t.Failed(); n++ {
		for _, landed := range []bool{false, true} {
			t.Run(fmt.Sprintf("write=%d/landed=%v", n, landed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { killedAtWrite(t, n, landed, want) })
			})
		}
	}
}

// killedAtWrite runs the rollout on a server stopped at its nth journal
// write and resumes it on another.
func killedAtWrite(t *testing.T, n int32, landed bool, want []byte) {
	mem := runtime.NewMemoryCheckpoints()
	store := &stopAt{cutOff: cutOff{Checkpoints: mem}, n: n, landed: landed, stopped: make(chan struct{}), release: make(chan struct{})}
	defer close(store.release)
	a := newPipeHarness(t, durableOptions(store))
	b := newPipeHarness(t, durableOptions(mem))

	// On A until it stops: the client answers each pause it sees.
	c1 := a.dial(t, "Bearer alice")
	frames := readAll(t, c1)
	c1.send(t, create(durableBody()))
	var seen [][]byte
	var answer []any // the outputs of the last pause the client answered
	for {
		synctest.Wait()
		select {
		case f := <-frames:
			seen = append(seen, f)
			switch eventType(t, f) {
			case "response.done":
				answer = outputsFor(t, f)
				c1.send(t, appendEv(respID(t, f), "", answer...))
			case "response.completed":
				t.Fatalf("the rollout ended on A before its write %d", n)
			}
			continue
		default:
		}
		break
	}
	select {
	case <-store.stopped:
	default:
		t.Fatalf("A is stuck short of its write %d", n)
	}
	c1.drop()
	id := respID(t, seen[0])
	lastSeq := *decodeEv(t, seen[len(seen)-1]).Seq
	time.Sleep(runtime.DefaultLeaseTTL) // A's lease runs out

	// On B: the events after the last one seen; a pause seen before comes
	// again when B does not have its answer, and is answered again.
	c2 := b.dial(t, "Bearer alice")
	resume := refEv("response.resume", id, "")
	resume["sequence_number"] = lastSeq
	c2.send(t, resume)
	events := seen
	for {
		f := c2.recv(t)
		typ := eventType(t, f)
		if typ == "error" {
			if n == 1 && !landed && bytes.Contains(f, []byte(`"response_not_found"`)) {
				return // its first pause was never written: nothing was durable, and its client never saw a pause
			}
			t.Fatalf("the resume on B: %s", f)
		}
		seq := *decodeEv(t, f).Seq
		if seq <= lastSeq {
			if typ != "response.done" || seq != lastSeq || answer == nil {
				t.Fatalf("B sent again event %d (%s), which the client had", seq, typ)
			}
			c2.send(t, appendEv(id, "", answer...)) // its answer was lost with A: sent again
			continue
		}
		events, lastSeq = append(events, f), seq
		switch typ {
		case "response.done":
			answer = outputsFor(t, f)
			c2.send(t, appendEv(id, "", answer...))
		case "response.completed", "response.failed", "response.incomplete":
			checkStreamInvariants(t, events)
			sameRollout(t, f, want)
			return
		}
	}
}

// readAll reads c's frames into a channel, until c fails.
func readAll(t *testing.T, c *wsConn) <-chan []byte {
	out := make(chan []byte, 1024)
	go func() {
		defer close(out)
		for {
			f, err := c.read(t, context.Background())
			if err != nil {
				return
			}
			out <- f
		}
	}()
	return out
}

// driveRollout runs a suspended rollout of body to its end on c, answering
// each pause, and returns its events.
func driveRollout(t *testing.T, c *wsConn, body map[string]any) [][]byte {
	events, _ := driveSuspended(t, c, body)
	return events
}

// TestDurableTimeoutCutOff: a server cut off from its store does not time
// out a rollout it let go of. Its client dropped, the rollout parked on A
// is taken over on B and completed there while A cannot reach the store;
// A's copy, at its pause's timeout, cannot ask the store who owns it, and
// holds no lease: it ends without an outcome, and once A reaches the store
// again a resume there finds the rollout ended elsewhere
// (response_not_found). A's copy ends released, not failed: had it timed
// out, it would have ended the response a second time (its hooks, its
// store).
func TestDurableTimeoutCutOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := runtime.NewMemoryCheckpoints()
		store := &cutOff{Checkpoints: mem}
		o := durableOptions(store)
		o.Suspension.Timeout = 30 * time.Second // within the resume window of A's copy
		ended := &endedStatuses{}
		o.Observer = ended
		a := newPipeHarness(t, o)
		b := newPipeHarness(t, durableOptions(mem))
		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(durableBody()))
		pause := last(c1.next(t))
		id := respID(t, pause)
		c1.drop()
		synctest.Wait() // A lets its lease go
		store.cut.Store(true)

		c2 := b.dial(t, "Bearer alice")
		c2.send(t, refEv("response.resume", id, ""))
		if again := c2.recv(t); !bytes.Equal(again, pause) {
			t.Fatalf("the resume on B sent %s, want the pending pause", again)
		}
		for p := pause; eventType(t, p) == "response.done"; {
			c2.send(t, appendEv(id, "", outputsFor(t, p)...))
			p = last(c2.next(t))
			if typ := eventType(t, p); typ != "response.done" && typ != "response.completed" {
				t.Fatalf("on B the rollout ended with %s", p)
			}
		}
		time.Sleep(31 * time.Second) // past A's copy's timeout
		store.cut.Store(false)

		c3 := a.dial(t, "Bearer alice")
		c3.send(t, refEv("response.resume", id, ""))
		c3.wantError(t, "response_not_found")
		if got := ended.list(); len(got) != 1 || got[0] != runtime.StatusReleased {
			t.Fatalf("A's copy ended %v, want released once", got)
		}
	})
}

// endedStatuses is an Observer that records how each response ended.
type endedStatuses struct {
	releaseCounter
	mu       sync.Mutex
	statuses []protocol.ResponseStatus
}

func (e *endedStatuses) ResponseEnded(_ runtime.ServePath, status protocol.ResponseStatus, _ protocol.Timings) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses = append(e.statuses, status)
}

func (e *endedStatuses) list() []protocol.ResponseStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.statuses)
}

// TestDurableOwnerTold: a rollout has one owner, and one outcome. While
// its client is attached to server A (A's lease is live), a resume of it
// on server B is refused (response_owned_elsewhere), and the client on A
// runs it to its end. Once A is cut off from the store (stopped,
// partitioned), A tells its client, before its lease can run out in the
// store, with response_owned_elsewhere and a close 1012, never a terminal
// event; B then takes the rollout over and runs it to its end.
func TestDurableOwnerTold(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := durablePair(t)
			c1 := a.dial(t, "Bearer alice")
			c1.send(t, create(durableBody()))
			pause := last(c1.next(t))
			id := respID(t, pause)
			time.Sleep(time.Minute) // A renews its lease meanwhile

			c2 := b.dial(t, "Bearer alice")
			c2.send(t, refEv("response.resume", id, ""))
			c2.wantError(t, "response_owned_elsewhere")
			c2.send(t, appendEv(id, "", outputsFor(t, pause)...)) // a wake of it, on B
			c2.wantError(t, "response_owned_elsewhere")

			events := [][]byte{pause}
			for p := pause; eventType(t, p) == "response.done"; {
				c1.send(t, appendEv(id, "", outputsFor(t, p)...))
				evs := c1.next(t)
				events, p = append(events, evs...), last(evs)
			}
			if end := last(events); eventType(t, end) != "response.completed" {
				t.Fatalf("on A the rollout ended with %s", end)
			}
		})
	})
	t.Run("cut off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := runtime.NewMemoryCheckpoints()
			store := &cutOff{Checkpoints: mem}
			a := newPipeHarness(t, durableOptions(store))
			b := newPipeHarness(t, durableOptions(mem))
			c1 := a.dial(t, "Bearer alice")
			c1.send(t, create(durableBody()))
			pause := last(c1.next(t))
			id := respID(t, pause)
			type read struct {
				frame []byte
				err   error
			}
			reads := make(chan read, 2)
			go func() {
				f, err := c1.read(t, context.Background())
				reads <- read{f, err}
				_, err = c1.read(t, context.Background())
				reads <- read{nil, err}
			}()

			store.cut.Store(true)
			cut := time.Now()
			told, closed := <-reads, <-reads
			if told.err != nil || eventType(t, told.frame) != "error" || !bytes.Contains(told.frame, []byte(`"response_owned_elsewhere"`)) {
				t.Fatalf("A told its client %s (%v), want response_owned_elsewhere", told.frame, told.err)
			}
			if websocket.CloseStatus(closed.err) != websocket.StatusServiceRestart {
				t.Fatalf("A's connection then: %v, want a close 1012", closed.err)
			}
			if after := time.Since(cut); after >= runtime.DefaultLeaseTTL {
				t.Fatalf("A told its client %v after it was cut off: its lease had run out in the store by then", after)
			}

			// B takes it over once A's lease has run out in the store.
			var c2 *wsConn
			for {
				c2 = b.dial(t, "Bearer alice")
				c2.send(t, refEv("response.resume", id, ""))
				f := c2.recv(t)
				if eventType(t, f) == "response.done" {
					break
				}
				if !bytes.Contains(f, []byte(`"response_owned_elsewhere"`)) || time.Since(cut) > runtime.DefaultLeaseTTL {
					t.Fatalf("the resume on B %v after A was cut off: %s", time.Since(cut), f)
				}
				c2.drop()
				time.Sleep(time.Second)
			}
			for p := pause; eventType(t, p) == "response.done"; {
				c2.send(t, appendEv(id, "", outputsFor(t, p)...))
				p = last(c2.next(t))
				if typ := eventType(t, p); typ != "response.done" && typ != "response.completed" {
					t.Fatalf("on B the rollout ended with %s", p)
				}
			}
		})
	})
}
