// Package backgroundtest checks that an implementation of
// runtime.BackgroundStore keeps background responses apart by tenant,
// appends to a log only where its writer left it, fences its writes by
// epoch, leases a response to its owner, lets an ended one go after its
// Keep, and wakes a reader that follows a log live, as the interface says:
// the memory one and the Redis one pass the same suite.
//
// Leases and Keep run on the store's clock, which the suite cannot set (a
// Redis store's is Redis's TIME): it gives them a fraction of a second and
// polls until the store says they have run out, within a bound far past
// what even a loaded machine takes. Nothing it asserts depends on how soon.
package backgroundtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/checkpointtest"
)

// TB is what the suite reports to, as checkpointtest's: a Fatalf must end
// the calling goroutine. The suite calls Fatalf only from Run's.
type TB = checkpointtest.TB

const (
	// patience bounds every wait of the suite: for a lease or a Keep to
	// run out, for a follower to wake. Only a broken store reaches it.
	patience = 10 * time.Second
	// brief is the lease or the Keep the suite waits out.
	brief = 300 * time.Millisecond
)

// Run checks store. Every response id it creates starts with prefix, so
// that runs against one shared store do not meet.
func Run(t TB, store runtime.BackgroundStore, prefix string) {
	s := &suite{t: t, store: store, prefix: prefix}
	s.createAndRead()
	s.writes()
	s.follow()
	s.cancel()
	s.takeover()
	s.end()
	s.tenants()
}

type suite struct {
	t      TB
	store  runtime.BackgroundStore
	prefix string
}

var (
	ctx  = context.Background()
	srvA = runtime.Lease{Owner: "srv_a", TTL: time.Minute}
	srvB = runtime.Lease{Owner: "srv_b", TTL: time.Minute}
	srvC = runtime.Lease{Owner: "srv_c", TTL: time.Minute}
)

// create records a streamed response id of tenant t1 with events, leased
// to srvA.
func (s *suite) create(id string, events ...string) {
	s.t.Helper()
	rec := &runtime.BackgroundRecord{Tenant: "t1", ID: id, Request: []byte(`{"background":true,"stream":true}`),
		Response: []byte(`{"status":"queued"}`), Stream: true}
	must(s.t, s.store.CreateBackground(ctx, rec, frames(events...), srvA))
}

// write is srvA's write at epoch of events to id of tenant t1, with a
// Keep of a minute.
func write(id string, epoch uint64, at int, events ...string) *runtime.BackgroundWrite {
	return &runtime.BackgroundWrite{Tenant: "t1", ID: id, Epoch: epoch, Lease: srvA, At: at, Events: frames(events...), Keep: time.Minute}
}

// createAndRead: a create is read back whole, its events after any
// sequence number; the caller's bytes and the store's are not shared.
func (s *suite) createAndRead() {
	t, id := s.t, s.prefix+"resp_create"
	s.absent("t1", id, "before its create")
	binary := string([]byte{0, 1, 0xff, '"', '\n', 0})
	rec := &runtime.BackgroundRecord{Tenant: "t1", ID: id, Request: []byte(`{"model":"m","background":true}`),
		Response: []byte(`{"status":"queued"}`), Stream: true}
	events := frames("created", binary, "")
	must(t, s.store.CreateBackground(ctx, rec, events, srvA))
	// What the create was given is the caller's again: a caller may reuse
	// its buffers.
	rec.Request[2], rec.Response[2], events[0][0] = 'X', 'X', 'X'
	want := runtime.BackgroundRecord{Tenant: "t1", ID: id, Epoch: 1, Owner: "srv_a", Leased: true,
		Request: []byte(`{"model":"m","background":true}`), Response: []byte(`{"status":"queued"}`), Stream: true, Events: 3}
	got := s.get("t1", id, want)
	s.events("t1", id, -1, 0, "created", binary, "")
	s.events("t1", id, 0, 0, binary, "")
	s.events("t1", id, 2, 0)
	s.events("t1", id, 9, 0)
	// Any after below 0 is every event, as -1 is.
	s.events("t1", id, -7, 0, "created", binary, "")

	// What the store returns is the caller's: changing it changes nothing
	// another reader sees.
	got.Request[2], got.Response[2] = 'X', 'X'
	if read, err := s.store.BackgroundEvents(ctx, "t1", id, -1, 0); err == nil && len(read) > 0 && len(read[0]) > 0 {
		read[0][0] = 'X'
	}
	s.get("t1", id, want)
	s.events("t1", id, -1, 0, "created", binary, "")
}

// writes: the owner appends where it left the log, at its epoch; its
// response is replaced only when it writes one; of writers racing at one
// place exactly one lands.
func (s *suite) writes() {
	t, id := s.t, s.prefix+"resp_write"
	s.create(id, "created")
	want := s.get("t1", id, runtime.BackgroundRecord{Tenant: "t1", ID: id, Epoch: 1, Owner: "srv_a", Leased: true,
		Request: []byte(`{"background":true,"stream":true}`), Response: []byte(`{"status":"queued"}`), Stream: true, Events: 1})

	s.write(write(id, 1, 1, "in_progress", "delta 1"), false)
	want.Events = 3
	s.get("t1", id, *want)
	s.events("t1", id, 0, 0, "in_progress", "delta 1")

	// A write anywhere but the log's end, or at another epoch, changes
	// nothing.
	for _, at := range []int{0, 2, 4, 9} {
		if _, err := s.store.WriteBackground(ctx, write(id, 1, at, "lost")); !errors.Is(err, runtime.ErrJournalGap) {
			t.Errorf("a write at %d to a log of 3: %v, want ErrJournalGap", at, err)
		}
	}
	for _, epoch := range []uint64{0, 2} {
		if _, err := s.store.WriteBackground(ctx, write(id, epoch, 3, "stale")); !errors.Is(err, runtime.ErrFenced) {
			t.Errorf("a write at epoch %d to a response at epoch 1: %v, want ErrFenced", epoch, err)
		}
	}
	s.get("t1", id, *want)
	s.events("t1", id, -1, 0, "created", "in_progress", "delta 1")

	// The response is replaced by a write that has one, even an empty one,
	// and kept by one that has none.
	for _, r := range []struct {
		response []byte
		want     string
	}{{[]byte(`{"status":"in_progress"}`), `{"status":"in_progress"}`}, {nil, `{"status":"in_progress"}`}, {[]byte{}, ""}, {[]byte(`{"n":2}`), `{"n":2}`}} {
		w := write(id, 1, 3)
		w.Response = r.response
		s.write(w, false)
		if len(w.Response) > 0 {
			w.Response[0] = 'X' // the caller's again
		}
		want.Response = []byte(r.want)
		s.get("t1", id, *want)
	}

	// Writers racing at the log's end: one lands, whole; the rest find a
	// gap.
	var wg sync.WaitGroup
	var mu sync.Mutex
	landed := 0
	for i := range 8 {
		wg.Go(func() {
			switch _, err := s.store.WriteBackground(ctx, write(id, 1, 3, fmt.Sprintf("racer %d", i), fmt.Sprintf("racer %d, 2", i))); {
			case err == nil:
				mu.Lock()
				landed++
				mu.Unlock()
			case !errors.Is(err, runtime.ErrJournalGap):
				t.Errorf("a racing write: %v, want nil or ErrJournalGap", err)
			}
		})
	}
	wg.Wait()
	if landed != 1 {
		t.Errorf("%d of 8 racing writes landed, want 1", landed)
	}
	got, err := s.store.BackgroundEvents(ctx, "t1", id, 2, 0)
	if err != nil || len(got) != 2 || !bytes.HasPrefix(got[0], []byte("racer ")) || !bytes.Equal(got[1], append(bytes.Clone(got[0]), ", 2"...)) {
		t.Errorf("the log after racing writes: %q %v, want one racer's two events", got, err)
	}
}

// follow: a reader waiting for events after the log's end gets each write
// as it lands; one that waits for nothing gets nothing, without error,
// once its wait has passed, and one whose context ends returns.
func (s *suite) follow() {
	t, id := s.t, s.prefix+"resp_follow"
	s.create(id, "created")
	type read struct {
		events [][]byte
		err    error
	}
	after := make(chan int)
	reads := make(chan read)
	var reader sync.WaitGroup
	reader.Go(func() {
		for a := range after {
			events, err := s.store.BackgroundEvents(ctx, "t1", id, a, patience)
			reads <- read{events, err}
		}
	})
	stop := sync.OnceFunc(func() { close(after); reader.Wait() })
	defer stop() // a Fatalf below ends the suite's goroutine, and the reader with it
	// The reader asks for what follows the log's end just as the write
	// lands: some reads find it at once, the rest wait for it, and a store
	// that does not wake them answers nothing after patience.
	at := 1
	for i := range 16 {
		after <- at - 1
		live := []string{fmt.Sprintf("delta %d", i)}
		if i%4 == 3 {
			live = append(live, fmt.Sprintf("delta %d, 2", i))
		}
		s.write(write(id, 1, at, live...), false)
		r := <-reads
		if r.err != nil || fmt.Sprintf("%q", r.events) != fmt.Sprintf("%q", live) {
			t.Fatalf("a follower of the log after %d: %q %v, want the write that landed meanwhile, %q", at-1, r.events, r.err, live)
		}
		at += len(live)
	}
	stop()

	// Nothing new: nothing, no error, once the wait has passed, whatever
	// the wait.
	for _, wait := range []time.Duration{-time.Second, 0, time.Microsecond, 50 * time.Millisecond} {
		if got, err := s.store.BackgroundEvents(ctx, "t1", id, at-1, wait); err != nil || len(got) != 0 {
			t.Errorf("the events after the log's end, waiting %v: %q %v, want none", wait, got, err)
		}
	}

	// A follower whose context ends returns, with its error.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.store.BackgroundEvents(cctx, "t1", id, at-1, time.Hour)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a follower whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(patience):
		t.Errorf("a follower whose context ended still waits after %v", patience)
	}
}

// cancel: a cancel is asked of the owner at its next write, and at every
// one after.
func (s *suite) cancel() {
	t, id := s.t, s.prefix+"resp_cancel"
	s.create(id)
	s.write(write(id, 1, 0, "in_progress"), false)
	must(t, s.store.CancelBackground(ctx, "t1", id))
	must(t, s.store.CancelBackground(ctx, "t1", id))
	got, err := s.store.GetBackground(ctx, "t1", id)
	if err != nil || !got.Cancel {
		t.Errorf("GetBackground after a cancel: %+v %v, want Cancel", got, err)
	}
	s.write(write(id, 1, 1, "delta"), true)
	s.write(write(id, 1, 2, "cancelled"), true)
}

// takeover: a live lease keeps a response with its owner, unless the owner
// itself takes it; once the lease has run out another server takes it, and
// the old owner is fenced out.
func (s *suite) takeover() {
	t, id := s.t, s.prefix+"resp_take"
	s.create(id, "created")
	if err := s.store.TakeBackground(ctx, "t1", id, 1, srvB); !errors.Is(err, runtime.ErrOwnedElsewhere) {
		t.Errorf("B's take while A's lease is live: %v, want ErrOwnedElsewhere", err)
	}
	must(t, s.store.TakeBackground(ctx, "t1", id, 1, srvA))
	want := s.get("t1", id, runtime.BackgroundRecord{Tenant: "t1", ID: id, Epoch: 2, Owner: "srv_a", Leased: true,
		Request: []byte(`{"background":true,"stream":true}`), Response: []byte(`{"status":"queued"}`), Stream: true, Events: 1})
	if err := s.store.TakeBackground(ctx, "t1", id, 1, srvA); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a second take from epoch 1: %v, want ErrFenced", err)
	}
	if _, err := s.store.WriteBackground(ctx, write(id, 1, 1, "stale")); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a write at epoch 1 after the take: %v, want ErrFenced", err)
	}

	// The owner's takes racing from one epoch: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			switch err := s.store.TakeBackground(ctx, "t1", id, 2, srvA); {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, runtime.ErrFenced):
				t.Errorf("a racing take: %v, want nil or ErrFenced", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of 8 racing takes won, want 1", wins)
	}
	want.Epoch = 3
	s.get("t1", id, *want)

	// A's last write leases it briefly; once the store says the lease has
	// run out, B takes it over and A is fenced out.
	w := write(id, 3, 1, "delta")
	w.Lease.TTL = brief
	s.write(w, false)
	s.eventually("A's brief lease to run out", func() bool {
		got, err := s.store.GetBackground(ctx, "t1", id)
		must(t, err)
		return !got.Leased
	})
	must(t, s.store.TakeBackground(ctx, "t1", id, 3, srvB))
	want.Epoch, want.Owner, want.Events = 4, "srv_b", 2
	s.get("t1", id, *want)
	if _, err := s.store.WriteBackground(ctx, write(id, 3, 2, "zombie")); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("A's write after B's takeover: %v, want ErrFenced", err)
	}
	if err := s.store.TakeBackground(ctx, "t1", id, 4, srvC); !errors.Is(err, runtime.ErrOwnedElsewhere) {
		t.Errorf("C's take while B's lease is live: %v, want ErrOwnedElsewhere", err)
	}
	bw := write(id, 4, 2, "resumed")
	bw.Lease = srvB
	s.write(bw, false)
	s.events("t1", id, 0, 0, "delta", "resumed")
}

// end: an ended response is read as ended until its Keep has passed,
// then, its log with it, not at all.
func (s *suite) end() {
	t, id := s.t, s.prefix+"resp_end"
	s.create(id, "created")
	w := write(id, 1, 1, "completed")
	w.Response, w.Ended = []byte(`{"status":"completed"}`), true
	s.write(w, false)
	s.get("t1", id, runtime.BackgroundRecord{Tenant: "t1", ID: id, Epoch: 1, Owner: "srv_a", Leased: true,
		Request: []byte(`{"background":true,"stream":true}`), Response: []byte(`{"status":"completed"}`), Stream: true, Events: 2, Ended: true})
	s.events("t1", id, -1, 0, "created", "completed")

	gone := s.prefix + "resp_gone"
	s.create(gone, "created")
	w = write(gone, 1, 1, "completed")
	w.Ended, w.Keep = true, brief
	s.write(w, false)
	s.eventually("an ended response to go after its Keep", func() bool {
		_, err := s.store.GetBackground(ctx, "t1", gone)
		if err != nil && !errors.Is(err, runtime.ErrNotStored) {
			t.Fatalf("GetBackground: %v", err)
		}
		return err != nil
	})
	s.absent("t1", gone, "after its Keep")
	// A response made again under that id begins with none of its events.
	s.create(gone)
	s.events("t1", gone, -1, 0)
	if got, err := s.store.GetBackground(ctx, "t1", gone); err != nil || got.Events != 0 || got.Ended {
		t.Errorf("a response created again after its Keep: %+v %v, want no events, not ended", got, err)
	}
	// The first response, kept a minute, is still there.
	s.events("t1", id, -1, 0, "created", "completed")
}

// tenants: the same id under two tenants is two responses, and nothing of
// one tenant's is there under the other.
func (s *suite) tenants() {
	t, id := s.t, s.prefix+"resp_tenants"
	s.create(id, "t1's")
	for _, other := range []string{"t2", ""} {
		s.absent(other, id, "under another tenant")
	}
	// What was tried under t2 changed nothing of t1's: no cancel, no take.
	s.write(write(id, 1, 1, "t1's 2"), false)

	rec := &runtime.BackgroundRecord{Tenant: "t2", ID: id, Request: []byte(`{"t2":1}`)}
	must(t, s.store.CreateBackground(ctx, rec, frames("t2's"), srvB))
	s.write(&runtime.BackgroundWrite{Tenant: "t2", ID: id, Epoch: 1, Lease: srvB, At: 1, Events: frames("t2's 2", "t2's 3"), Keep: time.Minute}, false)
	must(t, s.store.CancelBackground(ctx, "t2", id))
	s.get("t2", id, runtime.BackgroundRecord{Tenant: "t2", ID: id, Epoch: 1, Owner: "srv_b", Leased: true, Request: []byte(`{"t2":1}`), Events: 3, Cancel: true})
	s.events("t2", id, -1, 0, "t2's", "t2's 2", "t2's 3")
	s.get("t1", id, runtime.BackgroundRecord{Tenant: "t1", ID: id, Epoch: 1, Owner: "srv_a", Leased: true,
		Request: []byte(`{"background":true,"stream":true}`), Response: []byte(`{"status":"queued"}`), Stream: true, Events: 2})
	s.events("t1", id, -1, 0, "t1's", "t1's 2")
}

// absent checks that every method finds no response id of tenant.
func (s *suite) absent(tenant, id, when string) {
	t := s.t
	t.Helper()
	if _, err := s.store.GetBackground(ctx, tenant, id); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("GetBackground of %s of %q %s: %v, want ErrNotStored", id, tenant, when, err)
	}
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		if _, err := s.store.BackgroundEvents(ctx, tenant, id, -1, wait); !errors.Is(err, runtime.ErrNotStored) {
			t.Errorf("BackgroundEvents of %s of %q %s, waiting %v: %v, want ErrNotStored", id, tenant, when, wait, err)
		}
	}
	w := &runtime.BackgroundWrite{Tenant: tenant, ID: id, Epoch: 1, Lease: srvC, At: 1, Events: frames("intruder"), Keep: time.Minute}
	if _, err := s.store.WriteBackground(ctx, w); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("WriteBackground of %s of %q %s: %v, want ErrNotStored", id, tenant, when, err)
	}
	if err := s.store.CancelBackground(ctx, tenant, id); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("CancelBackground of %s of %q %s: %v, want ErrNotStored", id, tenant, when, err)
	}
	if err := s.store.TakeBackground(ctx, tenant, id, 1, srvC); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("TakeBackground of %s of %q %s: %v, want ErrNotStored", id, tenant, when, err)
	}
}

// get reads the record of id of tenant and checks it is want; it returns
// what it read.
func (s *suite) get(tenant, id string, want runtime.BackgroundRecord) *runtime.BackgroundRecord {
	t := s.t
	t.Helper()
	got, err := s.store.GetBackground(ctx, tenant, id)
	if err != nil {
		t.Fatalf("GetBackground of %s of %q: %v", id, tenant, err)
		return nil
	}
	if got.Tenant != want.Tenant || got.ID != want.ID || got.Epoch != want.Epoch || got.Owner != want.Owner || got.Leased != want.Leased ||
		!bytes.Equal(got.Request, want.Request) || !bytes.Equal(got.Response, want.Response) || got.Stream != want.Stream ||
		got.Events != want.Events || got.Ended != want.Ended || got.Cancel != want.Cancel {
		t.Fatalf("GetBackground of %s of %q:\n got %s\nwant %s", id, tenant, show(got), show(&want))
	}
	return got
}

func show(r *runtime.BackgroundRecord) string {
	return fmt.Sprintf("{%s %s epoch %d owner %q leased %v request %q response %q stream %v events %d ended %v cancel %v}",
		r.Tenant, r.ID, r.Epoch, r.Owner, r.Leased, r.Request, r.Response, r.Stream, r.Events, r.Ended, r.Cancel)
}

// events checks that the events of id of tenant after after are want.
func (s *suite) events(tenant, id string, after int, wait time.Duration, want ...string) {
	t := s.t
	t.Helper()
	got, err := s.store.BackgroundEvents(ctx, tenant, id, after, wait)
	if err != nil {
		t.Fatalf("BackgroundEvents of %s after %d: %v", id, after, err)
		return
	}
	if len(got) != len(want) || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("BackgroundEvents of %s after %d: %q, want %q", id, after, got, want)
	}
}

// write makes w and checks the cancel it reports.
func (s *suite) write(w *runtime.BackgroundWrite, cancelAsked bool) {
	t := s.t
	t.Helper()
	got, err := s.store.WriteBackground(ctx, w)
	if err != nil {
		t.Fatalf("WriteBackground of %s at %d, epoch %d: %v", w.ID, w.At, w.Epoch, err)
		return
	}
	if got != cancelAsked {
		t.Errorf("WriteBackground of %s at %d: cancel asked %v, want %v", w.ID, w.At, got, cancelAsked)
	}
}

// eventually polls done until it reports true, failing after patience.
func (s *suite) eventually(what string, done func() bool) {
	t := s.t
	t.Helper()
	tick := time.NewTicker(brief / 10)
	defer tick.Stop()
	deadline := time.Now().Add(patience)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", patience, what)
			return
		}
		<-tick.C
	}
}

func frames(events ...string) [][]byte {
	out := make([][]byte, len(events))
	for i, e := range events {
		out[i] = []byte(e)
	}
	return out
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}
