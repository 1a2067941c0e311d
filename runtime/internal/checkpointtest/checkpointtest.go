// Package checkpointtest checks that an implementation of
// runtime.Checkpoints keeps rollouts apart by tenant and credentials and
// fences its writes by epoch, as the interface says: the memory one and the
// Redis one pass the same suite.
package checkpointtest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
)

// Run checks cps. Every rollout id it writes starts with prefix, so that
// runs against one shared store do not meet.
func Run(t *testing.T, cps runtime.Checkpoints, prefix string) {
	ctx := context.Background()
	const ttl = time.Minute
	id := prefix + "resp_a"
	cp := &runtime.Checkpoint{Tenant: "t1", ID: id, Creds: "c1", Epoch: 1, Data: []byte("pause 1")}

	if _, err := cps.Load(ctx, "t1", id, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Fatalf("Load before any Save: %v, want ErrNoCheckpoint", err)
	}
	if err := cps.Take(ctx, "t1", id, 1); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Fatalf("Take before any Save: %v, want ErrNoCheckpoint", err)
	}
	must(t, cps.Save(ctx, cp, ttl))
	load(t, cps, "t1", id, "c1", 1, "pause 1")
	for _, who := range []struct{ tenant, creds string }{{"t2", "c1"}, {"t1", "c2"}, {"", "c1"}} {
		if _, err := cps.Load(ctx, who.tenant, id, who.creds); !errors.Is(err, runtime.ErrNoCheckpoint) {
			t.Errorf("Load under tenant %q, creds %q: %v, want ErrNoCheckpoint", who.tenant, who.creds, err)
		}
	}
	if err := cps.Take(ctx, "t2", id, 1); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Take under another tenant: %v, want ErrNoCheckpoint", err)
	}

	// The owner writes its next pause at its epoch.
	cp.Data = []byte("pause 2")
	must(t, cps.Save(ctx, cp, ttl))
	load(t, cps, "t1", id, "c1", 1, "pause 2")

	// A takeover raises the epoch; the old owner is fenced out.
	must(t, cps.Take(ctx, "t1", id, 1))
	load(t, cps, "t1", id, "c1", 2, "pause 2")
	if err := cps.Take(ctx, "t1", id, 1); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a second Take from epoch 1: %v, want ErrFenced", err)
	}
	cp.Data = []byte("stale pause")
	if err := cps.Save(ctx, cp, ttl); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("the old owner's Save at epoch 1: %v, want ErrFenced", err)
	}
	must(t, cps.Drop(ctx, "t1", id, 1, ttl)) // the old owner's drop ends nothing
	load(t, cps, "t1", id, "c1", 2, "pause 2")
	cp.Epoch, cp.Data = 2, []byte("pause 3")
	must(t, cps.Save(ctx, cp, ttl))
	load(t, cps, "t1", id, "c1", 2, "pause 3")

	// Servers racing to take one rollout over: exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan struct{}, 8)
	for range 8 {
		wg.Go(func() {
			switch err := cps.Take(ctx, "t1", id, 2); {
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
	load(t, cps, "t1", id, "c1", 3, "pause 3")

	// The owner drops it once the rollout has ended.
	must(t, cps.Drop(ctx, "t1", id, 3, ttl))
	if _, err := cps.Load(ctx, "t1", id, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Load after Drop: %v, want ErrNoCheckpoint", err)
	}
	if err := cps.Take(ctx, "t1", id, 3); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Take after Drop: %v, want ErrNoCheckpoint", err)
	}
	// A server that lost the rollout before it ended cannot write it again.
	cp.Epoch, cp.Data = 2, []byte("zombie pause")
	if err := cps.Save(ctx, cp, ttl); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a Save at an older epoch after Drop: %v, want ErrFenced", err)
	}
	// Nor can its own write still in flight when it ended.
	cp.Epoch, cp.Data = 3, []byte("late pause")
	if err := cps.Save(ctx, cp, ttl); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a Save at the dropping epoch after Drop: %v, want ErrFenced", err)
	}
	// A rollout that ends before its first checkpoint lands leaves none.
	first := &runtime.Checkpoint{Tenant: "t1", ID: prefix + "resp_c", Creds: "c1", Epoch: 1, Data: []byte("first pause")}
	must(t, cps.Drop(ctx, "t1", first.ID, 1, ttl))
	if err := cps.Save(ctx, first, ttl); !errors.Is(err, runtime.ErrFenced) {
		t.Errorf("a first Save landing after the rollout's Drop: %v, want ErrFenced", err)
	}
	if _, err := cps.Load(ctx, "t1", first.ID, "c1"); !errors.Is(err, runtime.ErrNoCheckpoint) {
		t.Errorf("Load of a rollout dropped before its first checkpoint: %v, want ErrNoCheckpoint", err)
	}

	// The same id under two tenants is two rollouts.
	other := &runtime.Checkpoint{Tenant: "t2", ID: prefix + "resp_b", Creds: "c1", Epoch: 1, Data: []byte("t2's")}
	mine := &runtime.Checkpoint{Tenant: "t1", ID: prefix + "resp_b", Creds: "c1", Epoch: 5, Data: []byte("t1's")}
	must(t, cps.Save(ctx, mine, ttl))
	must(t, cps.Save(ctx, other, ttl))
	load(t, cps, "t2", other.ID, "c1", 1, "t2's")
	load(t, cps, "t1", mine.ID, "c1", 5, "t1's")
	must(t, cps.Drop(ctx, "t1", mine.ID, 5, ttl))
	must(t, cps.Drop(ctx, "t2", other.ID, 1, ttl))
}

func load(t *testing.T, cps runtime.Checkpoints, tenant, id, creds string, epoch uint64, data string) {
	t.Helper()
	got, err := cps.Load(context.Background(), tenant, id, creds)
	if err != nil {
		t.Fatalf("Load %s: %v", id, err)
	}
	if got.Epoch != epoch || !bytes.Equal(got.Data, []byte(data)) || got.ID != id || got.Tenant != tenant || got.Creds != creds {
		t.Fatalf("Load %s: epoch %d data %q (%s, %s, %s), want epoch %d data %q", id, got.Epoch, got.Data, got.ID, got.Tenant, got.Creds, epoch, data)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
