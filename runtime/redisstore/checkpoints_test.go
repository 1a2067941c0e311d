package redisstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/checkpointtest"
)

// newCheckpointStore is a Store on a redis-server of the test's own.
func newCheckpointStore(tb testing.TB) (*Store, *redistest.Server) {
	tb.Helper()
	rd := redistest.Start(tb)
	st, err := New(rd.URL(), Options{Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, rd
}

// TestCheckpoints: the Redis checkpoints pass the suite every
// runtime.Checkpoints passes, twice at once on one database (each run's
// ids under a prefix of its own).
func TestCheckpoints(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	for _, prefix := range []string{"run1_", "run2_"} {
		t.Run(prefix, func(t *testing.T) {
			t.Parallel()
			checkpointtest.Run(t, st, prefix)
		})
	}
}

// TestCheckpointKeyTTL: a checkpoint is the hash the package doc names,
// kept for the ttl its Save gave (PTTL within (0, ttl]), which a takeover
// keeps and the next Save sets again; Drop leaves only the epoch, for the TTL.
func TestCheckpointKeyTTL(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	const key = "tether:{r:resp_ttl}:cp:7431" // tenant "t1" hex-coded
	pttl := func(within time.Duration) time.Duration {
		t.Helper()
		d, err := st.c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d <= 0 || d > within {
			t.Fatalf("PTTL of %s: %v, want within (0, %v]", key, d, within)
		}
		return d
	}

	cp := &runtime.Checkpoint{Tenant: "t1", ID: "resp_ttl", Creds: "c1", Epoch: 1, Data: []byte("pause")}
	if err := st.Save(ctx, cp, time.Minute); err != nil {
		t.Fatal(err)
	}
	fields, err := st.c.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 || fields["epoch"] != "1" || fields["creds"] != "c1" || fields["data"] != "pause" {
		t.Fatalf("HGETALL %s: %v, want epoch 1, creds c1, data pause", key, fields)
	}
	pttl(time.Minute)

	if err := st.Take(ctx, "t1", "resp_ttl", 1); err != nil {
		t.Fatal(err)
	}
	if d := pttl(time.Minute); d < 50*time.Second {
		t.Errorf("PTTL after Take: %v, want the minute the Save gave, less the test's time", d)
	}

	cp.Epoch = 2
	if err := st.Save(ctx, cp, time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := pttl(time.Hour); d <= time.Minute {
		t.Errorf("PTTL after a Save with an hour: %v", d)
	}

	if err := st.Drop(ctx, "t1", "resp_ttl", 2, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Dropped, only the epoch is kept, until the TTL ends.
	if fields, err := st.c.HKeys(ctx, key).Result(); err != nil || len(fields) != 1 || fields[0] != "epoch" {
		t.Errorf("HKEYS %s after Drop: %v %v, want only its epoch", key, fields, err)
	}
	if d := pttl(time.Hour); d <= time.Minute {
		t.Errorf("PTTL after Drop: %v, want the TTL kept", d)
	}
}

// TestCheckpointRoundTrips: Save, Load, Take and Drop are one round trip
// each (a script's EVALSHA, or HMGET), once Redis knows the scripts.
func TestCheckpointRoundTrips(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	cp := &runtime.Checkpoint{Tenant: "t1", ID: "resp_rt", Creds: "c1", Epoch: 1, Data: []byte("pause")}
	ops := []struct {
		name string
		do   func() error
	}{
		{"save", func() error { return st.Save(ctx, cp, time.Minute) }},
		{"load", func() error { _, err := st.Load(ctx, "t1", "resp_rt", "c1"); return err }},
		{"take", func() error { cp.Epoch++; return st.Take(ctx, "t1", "resp_rt", cp.Epoch-1) }},
		{"drop", func() error { cp.Epoch++; return st.Drop(ctx, "t1", "resp_rt", cp.Epoch-1, time.Minute) }}, // raises the epoch
	}
	for _, op := range ops { // a fresh Redis knows no script: EVALSHA, then EVAL
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
	}
	var rt countCommands
	st.c.AddHook(&rt)
	for _, op := range ops {
		rt.n.Store(0)
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if n := rt.n.Load(); n != 1 {
			t.Errorf("%s took %d round trips, want 1", op.name, n)
		}
	}
}

// TestCheckpointsUnavailable: with Redis killed, every checkpoint
// operation fails, in a time its Timeout bounds, with store_unavailable,
// never as a fence or a missing checkpoint; once Redis is back (having
// forgotten the scripts) the checkpoint saved before is there and the
// scripts run.
func TestCheckpointsUnavailable(t *testing.T) {
	t.Parallel()
	st, rd := newCheckpointStore(t)
	ctx := context.Background()
	cp := &runtime.Checkpoint{Tenant: "t1", ID: "resp_down", Creds: "c1", Epoch: 1, Data: []byte("before")}
	if err := st.Save(ctx, cp, time.Minute); err != nil {
		t.Fatal(err)
	}

	rd.Kill()
	cp.Data = []byte("during")
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"save", func() error { return st.Save(ctx, cp, time.Minute) }},
		{"load", func() error { _, err := st.Load(ctx, "t1", "resp_down", "c1"); return err }},
		{"take", func() error { return st.Take(ctx, "t1", "resp_down", 1) }},
		{"drop", func() error { return st.Drop(ctx, "t1", "resp_down", 1, time.Minute) }},
	} {
		start := time.Now()
		err := op.do()
		if took := time.Since(start); took > 2*st.opts.Timeout {
			t.Errorf("%s while Redis is down took %v (Timeout %v)", op.name, took, st.opts.Timeout)
		}
		if perr := protocol.AsError(err); err == nil || perr.Code != protocol.CodeStoreUnavailable || perr.Status != 503 {
			t.Errorf("%s while Redis is down: %v, want store_unavailable", op.name, err)
		}
	}

	rd.Restart()
	got, err := st.Load(ctx, "t1", "resp_down", "c1")
	if err != nil || string(got.Data) != "before" || got.Epoch != 1 {
		t.Fatalf("Load once Redis is back: %+v %v, want the checkpoint saved before", got, err)
	}
	if err := st.Take(ctx, "t1", "resp_down", 1); err != nil {
		t.Fatalf("Take once Redis is back: %v", err)
	}
	if err := st.Save(ctx, cp, time.Minute); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("the old owner's Save once Redis is back: %v, want ErrFenced", err)
	}
}

// BenchmarkCheckpoints: a Save and a Load of a 20 KB checkpoint, in a
// redis-server on loopback that fsyncs every write (as BenchmarkStore's).
func BenchmarkCheckpoints(b *testing.B) {
	ctx := context.Background()
	rd := redistest.Start(b)
	st, err := New(rd.URL(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cp := &runtime.Checkpoint{Tenant: "t1", ID: "resp_bench", Creds: "c1", Epoch: 1, Data: []byte(strings.Repeat("word ", 20<<10/5))}
	b.Run("save-20KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(cp.Data)))
		for b.Loop() {
			if err := st.Save(ctx, cp, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	if got, err := st.Load(ctx, "t1", "resp_bench", "c1"); err != nil || !bytes.Equal(got.Data, cp.Data) {
		b.Fatalf("Load: %v", err)
	}
	b.Run("load-20KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(cp.Data)))
		for b.Loop() {
			if _, err := st.Load(ctx, "t1", "resp_bench", "c1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
