// Package checkpointtest checks that an implementation of
// runtime.Checkpoints keeps rollouts' journals apart by tenant and
// credentials, appends only where its writer left the journal, and fences
// its writes by epoch, as the interface says: the memory one and the Redis
// one pass the same suite.
package checkpointtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/runtime"
)

// TB is what the suite reports to: a *testing.T, or a recorder that
// checks a broken store fails it (a Fatalf must end the calling goroutine,
// as testing's does).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Run checks cps. Every rollout id it writes starts with prefix, so that
// runs against one shared store do not meet.
func Run(t TB, cps runtime.Checkpoints, prefix string) {
	ctx := context.Background()
	const ttl = time.Minute
	id := prefix + "resp_a"
	w := func(epoch uint64, reset bool, at int, head string, entries ...string) *runtime.JournalWrite {
		jw := &runtime.JournalWrite{Tenant: "t1", ID: id, Creds: "c1", Epoch: epoch, Reset: reset, At: at, Head: []byte(head)}
		for _, e := range entries {
			jw.Entries = append(jw.Entries, []byte(e))
		}
		return jw
	}

	if _, err := cps.Load(ctx, "t1", id, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Fatalf("Load before any Write: %v, want ErrNoCheckpoint", err)
	}
	if err := cps.Take(ctx, "t1", id, 1, runtime.Lease{}); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Fatalf("Take before any Write: %v, want ErrNoCheckpoint", err)
	}
	if err := cps.Write(ctx, w(1, false, 0, "h0", "step"), ttl); !errors.Is(err, runtime.ErrJournalGap) {
		t.Fatalf("an append to no journal: %v, want ErrJournalGap", err)
	}
	must(t, cps.Write(ctx, w(1, true, 0, "h1", "base 1"), ttl))
	load(t, cps, "t1", id, "c1", 1, "h1", "base 1")
	for _, who := range []struct{ tenant, creds string }{{"t2", "c1"}, {"t1", "c2"}, {"", "c1"}} {
		if _, err := cps.Load(ctx, who.tenant, id, who.creds); !errors.Is(err, runtime.ErrNoCheckpoint) {
			t.Errorf("Load under tenant %q, creds %q: %v, want ErrNoCheckpoint", who.tenant, who.creds, err)
		}
	}
	if err := cps.Take(ctx, "t2", id, 1, runtime.Lease{}); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Take under another tenant: %v, want ErrNoCheckpoint", err)
	}

	// The owner appends its next pauses where it left the journal; an
	// append anywhere else changes nothing.
	must(t, cps.Write(ctx, w(1, false, 1, "h2", "step 2"), ttl))
	must(t, cps.Write(ctx, w(1, false, 2, "h3", "answer 2", "step 3"), ttl))
	load(t, cps, "t1", id, "c1", 1, "h3", "base 1", "step 2", "answer 2", "step 3")
	for _, at := range []int{0, 2, 5} {
		if err := cps.Write(ctx, w(1, false, at, "lost", "lost step"), ttl); !errors.Is(err, runtime.ErrJournalGap) {
			t.Errorf("an append at %d to a journal of 4: %v, want ErrJournalGap", at, err)
		}
	}
	load(t, cps, "t1", id, "c1", 1, "h3", "base 1", "step 2", "answer 2", "step 3")
	// Entries are bytes, whatever they hold; a journal begun anew drops
	// what it held.
	binary := string([]byte{0, 1, 0xff, '"', '\n', 0})
	must(t, cps.Write(ctx, w(1, true, 0, "h4", "base 4", binary, ""), ttl))
	load(t, cps, "t1", id, "c1", 1, "h4", "base 4", binary, "")
	must(t, cps.Write(ctx, w(1, false, 3, "h5", "step 5"), ttl))
	load(t, cps, "t1", id, "c1", 1, "h5", "base 4", binary, "", "step 5")

	// A takeover raises the epoch; the old owner is fenced out.
	must(t, cps.Take(ctx, "t1", id, 1, runtime.Lease{}))
	load(t, cps, "t1", id, "c1", 2, "h5", "base 4", binary, "", "step 5")
	if err := cps.Take(ctx, "t1", id, 1, runtime.Lease{}); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a second Take from epoch 1: %v, want ErrFenced", err)
	}
	for _, stale := range []*runtime.JournalWrite{w(1, false, 4, "stale", "stale step"), w(1, true, 0, "stale", "stale base")} {
		if err := cps.Write(ctx, stale, ttl); !errors.Is(err, runtime.ErrFenced) {
			t.Errorf("the old owner's Write (reset %v) at epoch 1: %v, want ErrFenced", stale.Reset, err)
		}
	}
	must(t, cps.Drop(ctx, "t1", id, 1, ttl)) // the old owner's drop ends nothing
	load(t, cps, "t1", id, "c1", 2, "h5", "base 4", binary, "", "step 5")
	must(t, cps.Write(ctx, w(2, false, 4, "h6", "step 6"), ttl))
	load(t, cps, "t1", id, "c1", 2, "h6", "base 4", binary, "", "step 5", "step 6")

	// Servers racing to take one rollout over: exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			switch err := cps.Take(ctx, "t1", id, 2, runtime.Lease{}); {
			case err == nil:
				wins <- struct{}{}
			case !errors.Is(err, runtime.ErrFenced):
				t.Errorf("a racing Take: %v, want nil or ErrFenced", err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Errorf("%d of 8 racing takeovers won, want 1", len(wins))
	}
	load(t, cps, "t1", id, "c1", 3, "h6", "base 4", binary, "", "step 5", "step 6")

	// The owner drops it once the rollout has ended.
	must(t, cps.Drop(ctx, "t1", id, 3, ttl))
	if _, err := cps.Load(ctx, "t1", id, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Load after Drop: %v, want ErrNoCheckpoint", err)
	}
	if err := cps.Take(ctx, "t1", id, 3, runtime.Lease{}); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Take after Drop: %v, want ErrNoCheckpoint", err)
	}
	// A server that lost the rollout before it ended cannot write it
	// again, nor can the owner's own write still in flight when it ended.
	for _, late := range []*runtime.JournalWrite{w(2, true, 0, "zombie", "zombie base"), w(3, true, 0, "late", "late base"), w(3, false, 5, "late", "late step")} {
		if err := cps.Write(ctx, late, ttl); !errors.Is(err, runtime.ErrFenced) {
			t.Errorf("a Write at epoch %d (reset %v) after Drop: %v, want ErrFenced", late.Epoch, late.Reset, err)
		}
	}
	// A rollout that ends before its first write lands leaves none.
	first := &runtime.JournalWrite{Tenant: "t1", ID: prefix + "resp_c", Creds: "c1", Epoch: 1, Reset: true, Head: []byte("h"), Entries: [][]byte{[]byte("first pause")}}
	must(t, cps.Drop(ctx, "t1", first.ID, 1, ttl))
	if err := cps.Write(ctx, first, ttl); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a first Write landing after the rollout's Drop: %v, want ErrFenced", err)
	}
	if _, err := cps.Load(ctx, "t1", first.ID, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Load of a rollout dropped before its first write: %v, want ErrNoCheckpoint", err)
	}

	// The same id under two tenants is two rollouts.
	other := &runtime.JournalWrite{Tenant: "t2", ID: prefix + "resp_b", Creds: "c1", Epoch: 1, Reset: true, Head: []byte("t2's"), Entries: [][]byte{[]byte("t2's base")}}
	mine := &runtime.JournalWrite{Tenant: "t1", ID: prefix + "resp_b", Creds: "c1", Epoch: 5, Reset: true, Head: []byte("t1's"), Entries: [][]byte{[]byte("t1's base")}}
	must(t, cps.Write(ctx, mine, ttl))
	must(t, cps.Write(ctx, other, ttl))
	load(t, cps, "t2", other.ID, "c1", 1, "t2's", "t2's base")
	load(t, cps, "t1", mine.ID, "c1", 5, "t1's", "t1's base")
	must(t, cps.Drop(ctx, "t1", mine.ID, 5, ttl))
	must(t, cps.Drop(ctx, "t2", other.ID, 1, ttl))

	leases(t, cps, prefix)
}

// leases checks the leases: a live owner's rollout is not taken, renewals
// and releases act only at their owner's epoch, and a lease runs out.
func leases(t TB, cps runtime.Checkpoints, prefix string) {
	ctx := context.Background()
	const ttl = time.Minute
	a, b, c := runtime.Lease{Owner: "srv_a", TTL: ttl}, runtime.Lease{Owner: "srv_b", TTL: ttl}, runtime.Lease{Owner: "srv_c", TTL: ttl}
	id := prefix + "resp_l"
	ref := func(epoch uint64) runtime.LeaseRef { return runtime.LeaseRef{Tenant: "t1", ID: id, Epoch: epoch} }
	write := &runtime.JournalWrite{Tenant: "t1", ID: id, Creds: "c1", Epoch: 1, Reset: true, Head: []byte("h"), Entries: [][]byte{[]byte("base")}, Lease: a}
	must(t, cps.Write(ctx, write, ttl))

	// A's write leased it to A: another server may not take it; A may.
	if err := cps.Take(ctx, "t1", id, 1, b); !errors.Is(err, runtime.ErrOwnedElsewhere) {
		t.Errorf("Take of a rollout another server's write leased: %v, want ErrOwnedElsewhere", err)
	}
	must(t, cps.Take(ctx, "t1", id, 1, a))
	load(t, cps, "t1", id, "c1", 2, "h", "base")

	// Renewals answer each rollout at its epoch, in order.
	lost, err := cps.Renew(ctx, a, []runtime.LeaseRef{ref(1), ref(2), {Tenant: "t1", ID: prefix + "resp_none", Epoch: 1}, {Tenant: "t2", ID: id, Epoch: 2}}, ttl)
	if want := []bool{true, false, true, true}; err != nil || fmt.Sprint(lost) != fmt.Sprint(want) {
		t.Errorf("Renew at epochs 1 and 2, of no journal and of another tenant's: lost %v (%v), want %v", lost, err, want)
	}
	if lost, err := cps.Renew(ctx, a, nil, ttl); err != nil || len(lost) != 0 {
		t.Errorf("Renew of nothing: %v %v", lost, err)
	}

	// Only A's release at its epoch lets the rollout go.
	must(t, cps.Release(ctx, "srv_b", []runtime.LeaseRef{ref(2)}))
	must(t, cps.Release(ctx, "srv_a", []runtime.LeaseRef{ref(1)}))
	if err := cps.Take(ctx, "t1", id, 2, b); !errors.Is(err, runtime.ErrOwnedElsewhere) {
		t.Errorf("Take after releases of another owner and another epoch: %v, want ErrOwnedElsewhere", err)
	}
	must(t, cps.Release(ctx, "srv_a", []runtime.LeaseRef{ref(2), {Tenant: "t1", ID: prefix + "resp_none", Epoch: 1}}))
	must(t, cps.Take(ctx, "t1", id, 2, b))
	load(t, cps, "t1", id, "c1", 3, "h", "base")

	// B's takeover leased it to B: A lost it, and neither A nor C takes it.
	if lost, err := cps.Renew(ctx, a, []runtime.LeaseRef{ref(2)}, ttl); err != nil || len(lost) != 1 || !lost[0] {
		t.Errorf("A's Renew after B's takeover: lost %v (%v), want [true]", lost, err)
	}
	for _, l := range []runtime.Lease{a, c} {
		if err := cps.Take(ctx, "t1", id, 3, l); !errors.Is(err, runtime.ErrOwnedElsewhere) {
			t.Errorf("%s's Take of a rollout B took: %v, want ErrOwnedElsewhere", l.Owner, err)
		}
	}

	// A lease runs out; a renewal keeps the journal past its TTL.
	short := 40 * time.Millisecond
	if lost, err := cps.Renew(ctx, runtime.Lease{Owner: "srv_b", TTL: short}, []runtime.LeaseRef{ref(3)}, ttl); err != nil || lost[0] {
		t.Fatalf("B's Renew: lost %v (%v)", lost, err)
	}
	time.Sleep(3 * short)
	must(t, cps.Take(ctx, "t1", id, 3, c))
	brief := &runtime.JournalWrite{Tenant: "t1", ID: id, Creds: "c1", Epoch: 4, At: 1, Head: []byte("h2"), Entries: [][]byte{[]byte("step")}, Lease: c}
	must(t, cps.Write(ctx, brief, short))
	if lost, err := cps.Renew(ctx, c, []runtime.LeaseRef{ref(4)}, ttl); err != nil || lost[0] {
		t.Fatalf("C's Renew: lost %v (%v)", lost, err)
	}
	time.Sleep(3 * short)
	load(t, cps, "t1", id, "c1", 4, "h2", "base", "step")

	// A dropped journal has no lease: taken by nobody, lost to its owner.
	must(t, cps.Drop(ctx, "t1", id, 4, ttl))
	if lost, err := cps.Renew(ctx, c, []runtime.LeaseRef{ref(4), ref(5)}, ttl); err != nil || !lost[0] || !lost[1] {
		t.Errorf("Renew of a dropped journal: lost %v (%v), want [true true]", lost, err)
	}
}

func load(t TB, cps runtime.Checkpoints, tenant, id, creds string, epoch uint64, head string, entries ...string) {
	t.Helper()
	got, err := cps.Load(context.Background(), tenant, id, creds)
	if err != nil {
		t.Fatalf("Load %s: %v", id, err)
		return
	}
	if got.Epoch != epoch || !bytes.Equal(got.Head, []byte(head)) || got.ID != id || got.Tenant != tenant || got.Creds != creds {
		t.Fatalf("Load %s: epoch %d head %q (%s, %s, %s), want epoch %d head %q", id, got.Epoch, got.Head, got.ID, got.Tenant, got.Creds, epoch, head)
		return
	}
	if want := fmt.Sprintf("%q", entries); len(got.Entries) != len(entries) || fmt.Sprintf("%q", got.Entries) != want {
		t.Fatalf("Load %s: entries %q, want %s", id, got.Entries, want)
	}
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}
