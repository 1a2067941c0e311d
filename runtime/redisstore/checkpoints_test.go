package redisstore

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync/atomic"

	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
// runtime.Checkpoints passes (runSuite).
func TestCheckpoints(t *testing.T) {
	runSuite(t, func(t *testing.T, st *Store, prefix string) { checkpointtest.Run(t, st, prefix) })
}

// runSuite runs a store's conformance suite twice at once on one database
// (each run's ids under a prefix of its own), and once more through the
// server's unix socket (unix://: a Redis on the same machine).
func runSuite(t *testing.T, suite func(t *testing.T, st *Store, prefix string)) {
	t.Parallel()
	st, rd := newCheckpointStore(t)
	for _, prefix := range []string{"run1_", "run2_"} {
		t.Run(prefix, func(t *testing.T) {
			t.Parallel()
			suite(t, st, prefix)
		})
	}
	t.Run("unix", func(t *testing.T) {
		t.Parallel()
		unix, err := New(rd.UnixURL(), Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close() })
		suite(t, unix, "unix_")
	})
}

// TestCheckpointKeyTTL: a journal is the hash and the list the package doc
// names, kept for the ttl its Write gave (PTTL within (0, ttl]), which a
// takeover keeps and the next Write sets again; Drop leaves only the
// epoch, for the TTL.
func TestCheckpointKeyTTL(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	const head, list = "tether:{r:resp_ttl}:cp:7431", "tether:{r:resp_ttl}:cj:7431" // tenant "t1" hex-coded
	pttl := func(key string, within time.Duration) time.Duration {
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

	lease := runtime.Lease{Owner: "srv_ttl", TTL: 10 * time.Second}
	w := &runtime.JournalWrite{Tenant: "t1", ID: "resp_ttl", Creds: "c1", Epoch: 1, Reset: true, Head: []byte("h1"), Entries: [][]byte{[]byte("base")}, Lease: lease}
	if err := st.Write(ctx, w, time.Minute); err != nil {
		t.Fatal(err)
	}
	fields, err := st.c.HGetAll(ctx, head).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 5 || fields["epoch"] != "1" || fields["creds"] != "c1" || fields["head"] != "h1" || fields["owner"] != "srv_ttl" {
		t.Fatalf("HGETALL %s: %v, want epoch 1, creds c1, head h1, owner srv_ttl, its lease", head, fields)
	}
	// The lease ends in milliseconds of Redis's clock, 10 s after the write.
	now, err := st.c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if until, err := strconv.ParseInt(fields["lease"], 10, 64); err != nil || until <= now.UnixMilli() || until > now.Add(lease.TTL).UnixMilli() {
		t.Fatalf("the lease ends at %s, want within (%d, %d]", fields["lease"], now.UnixMilli(), now.Add(lease.TTL).UnixMilli())
	}
	if entries, err := st.c.LRange(ctx, list, 0, -1).Result(); err != nil || len(entries) != 1 || entries[0] != "base" {
		t.Fatalf("LRANGE %s: %q %v, want the base", list, entries, err)
	}
	pttl(head, time.Minute)
	pttl(list, time.Minute)

	if err := st.Take(ctx, "t1", "resp_ttl", 1, lease); err != nil {
		t.Fatal(err)
	}
	if d := pttl(head, time.Minute); d < 50*time.Second {
		t.Errorf("PTTL after Take: %v, want the minute the Write gave, less the test's time", d)
	}

	w.Epoch, w.Reset, w.At, w.Entries = 2, false, 1, [][]byte{[]byte("step")}
	if err := st.Write(ctx, w, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{head, list} {
		if d := pttl(key, time.Hour); d <= time.Minute {
			t.Errorf("PTTL of %s after a Write with an hour: %v", key, d)
		}
	}
	// A renewal keeps the journal its TTL from now, never shorter.
	ref := []runtime.LeaseRef{{Tenant: "t1", ID: "resp_ttl", Epoch: 2}}
	if _, err := st.Renew(ctx, lease, ref, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Renew(ctx, lease, ref, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{head, list} {
		if d := pttl(key, 2*time.Hour); d <= time.Hour {
			t.Errorf("PTTL of %s after renewals with two hours, then a minute: %v", key, d)
		}
	}

	if err := st.Drop(ctx, "t1", "resp_ttl", 2, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Dropped, only the epoch is kept, until the TTL ends.
	if fields, err := st.c.HKeys(ctx, head).Result(); err != nil || len(fields) != 1 || fields[0] != "epoch" {
		t.Errorf("HKEYS %s after Drop: %v %v, want only its epoch", head, fields, err)
	}
	if n, err := st.c.Exists(ctx, list).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after Drop: %d %v, want its entries gone", list, n, err)
	}
	if d := pttl(head, time.Hour); d <= time.Minute {
		t.Errorf("PTTL after Drop: %v, want the TTL kept", d)
	}
}

// TestCheckpointRoundTrips: Write, Load, Take and Drop are one round trip
// each (a script's EVALSHA), once Redis knows the scripts; so are Renew and
// Release, of however many rollouts (one pipeline).
func TestCheckpointRoundTrips(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	w := &runtime.JournalWrite{Tenant: "t1", ID: "resp_rt", Creds: "c1", Epoch: 1, Reset: true, Head: []byte("h"), Entries: [][]byte{[]byte("pause")}}
	refs := func(epoch uint64) []runtime.LeaseRef { // three rollouts' keys, in different slots
		return []runtime.LeaseRef{{Tenant: "t1", ID: "resp_rt", Epoch: epoch}, {Tenant: "t1", ID: "resp_rt2", Epoch: 1}, {Tenant: "t2", ID: "resp_rt3", Epoch: 1}}
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"write", func() error { return st.Write(ctx, w, time.Minute) }},
		{"load", func() error { _, err := st.Load(ctx, "t1", "resp_rt", "c1"); return err }},
		{"take", func() error { w.Epoch++; return st.Take(ctx, "t1", "resp_rt", w.Epoch-1, runtime.Lease{}) }},
		{"renew 3", func() error { _, err := st.Renew(ctx, runtime.Lease{}, refs(w.Epoch), time.Minute); return err }},
		{"release 3", func() error { return st.Release(ctx, "", refs(w.Epoch)) }},
		{"drop", func() error { w.Epoch++; return st.Drop(ctx, "t1", "resp_rt", w.Epoch-1, time.Minute) }}, // raises the epoch
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

// TestCheckpointsUnavailable: with Redis killed, every journal operation
// fails, in a time its Timeout bounds, with store_unavailable, never as a
// fence, a gap or a missing journal; once Redis is back (having forgotten
// the scripts) the journal written before is there and the scripts run.
func TestCheckpointsUnavailable(t *testing.T) {
	t.Parallel()
	st, rd := newCheckpointStore(t)
	ctx := context.Background()
	w := &runtime.JournalWrite{Tenant: "t1", ID: "resp_down", Creds: "c1", Epoch: 1, Reset: true, Head: []byte("h"), Entries: [][]byte{[]byte("before")}}
	if err := st.Write(ctx, w, time.Minute); err != nil {
		t.Fatal(err)
	}

	ref := []runtime.LeaseRef{{Tenant: "t1", ID: "resp_down", Epoch: 1}}
	rd.Kill()
	during := &runtime.JournalWrite{Tenant: "t1", ID: "resp_down", Creds: "c1", Epoch: 1, At: 1, Head: []byte("h2"), Entries: [][]byte{[]byte("during")}}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"write", func() error { return st.Write(ctx, during, time.Minute) }},
		{"load", func() error { _, err := st.Load(ctx, "t1", "resp_down", "c1"); return err }},
		{"take", func() error { return st.Take(ctx, "t1", "resp_down", 1, runtime.Lease{}) }},
		{"drop", func() error { return st.Drop(ctx, "t1", "resp_down", 1, time.Minute) }},
		{"renew", func() error { _, err := st.Renew(ctx, runtime.Lease{}, ref, time.Minute); return err }},
		{"release", func() error { return st.Release(ctx, "", ref) }},
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
	if err != nil || len(got.Entries) != 1 || string(got.Entries[0]) != "before" || got.Epoch != 1 {
		t.Fatalf("Load once Redis is back: %+v %v, want the journal written before", got, err)
	}
	if lost, err := st.Renew(ctx, runtime.Lease{}, ref, time.Minute); err != nil || lost[0] {
		t.Fatalf("Renew once Redis is back: lost %v (%v), want [false]", lost, err)
	}
	if err := st.Release(ctx, "", ref); err != nil {
		t.Fatalf("Release once Redis is back: %v", err)
	}
	if err := st.Take(ctx, "t1", "resp_down", 1, runtime.Lease{}); err != nil {
		t.Fatalf("Take once Redis is back: %v", err)
	}
	if err := st.Write(ctx, during, time.Minute); !errors.Is(err, runtime.ErrFenced) {
		t.Fatalf("the old owner's Write once Redis is back: %v, want ErrFenced", err)
	}
}

// BenchmarkCheckpoints: a 20 KB snapshot written, 2 KB steps appended,
// and a journal of the snapshot and 16 steps loaded, in a redis-server on
// loopback that fsyncs every write (as BenchmarkStore's).
func BenchmarkCheckpoints(b *testing.B) {
	ctx := context.Background()
	rd := redistest.Start(b)
	st, err := New(rd.URL(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	base := []byte(strings.Repeat("word ", 20<<10/5))
	step := []byte(strings.Repeat("word ", 2<<10/5))
	w := &runtime.JournalWrite{Tenant: "t1", ID: "resp_bench", Creds: "c1", Epoch: 1, Reset: true, Head: []byte(`{"entries":1}`), Entries: [][]byte{base}}
	b.Run("snapshot-20KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(base)))
		for b.Loop() {
			if err := st.Write(ctx, w, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step-2KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(step)))
		at := 1
		for b.Loop() {
			if at == 17 { // a journal of the snapshot and 16 steps, begun anew
				if err := st.Write(ctx, w, time.Minute); err != nil {
					b.Fatal(err)
				}
				at = 1
			}
			if err := st.Write(ctx, &runtime.JournalWrite{Tenant: "t1", ID: "resp_bench", Creds: "c1", Epoch: 1, At: at, Head: []byte(`{"entries":2}`), Entries: [][]byte{step}}, time.Minute); err != nil {
				b.Fatal(err)
			}
			at++
		}
	})
	if err := st.Write(ctx, w, time.Minute); err != nil {
		b.Fatal(err)
	}
	for at := 1; at <= 16; at++ {
		if err := st.Write(ctx, &runtime.JournalWrite{Tenant: "t1", ID: "resp_bench", Creds: "c1", Epoch: 1, At: at, Head: []byte(`{}`), Entries: [][]byte{step}}, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	if got, err := st.Load(ctx, "t1", "resp_bench", "c1"); err != nil || len(got.Entries) != 17 || !bytes.Equal(got.Entries[0], base) {
		b.Fatalf("Load: %v", err)
	}
	b.Run("load-20KB+16x2KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(base) + 16*len(step)))
		for b.Loop() {
			if _, err := st.Load(ctx, "t1", "resp_bench", "c1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCheckpointScriptMutations: the suite catches each way the scripts
// could be wrong: every mutation below, run against the suite, fails it.
// (A drop that kept the entries, invisible through the interface until
// their TTL ends, is TestCheckpointKeyTTL's to catch.)
func TestCheckpointScriptMutations(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	mutations := []struct {
		name       string
		script     *string
		from, to   string
		scriptsFor func(checkpointScripts, *redis.Script) checkpointScripts
	}{
		{"write ignores the epoch", ptr(writeScript), "if stored > tonumber(ARGV[1]) then return 0 end", "", setWrite},
		{"write fences its own epoch", ptr(writeScript), "stored > tonumber(ARGV[1])", "stored >= tonumber(ARGV[1])", setWrite},
		{"write appends anywhere", ptr(writeScript), "redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[6])", "false", setWrite},
		{"write appends to no journal", ptr(writeScript), "redis.call('HEXISTS', KEYS[1], 'head') == 0 or ", "", setWrite},
		{"a reset keeps the entries", ptr(writeScript), "redis.call('DEL', KEYS[2])", "", setWrite},
		{"write keeps the head", ptr(writeScript), "'head', ARGV[3]", "'head', 'x'", setWrite},
		{"load reverses the entries", ptr(loadScript), "out[#out + 1] = e", "table.insert(out, 4, e)", setLoad},
		{"load finds a dropped journal", ptr(loadScript), "if not h[1] or not h[2] or not h[3]", "if not h[1]", setLoad},
		{"take ignores the epoch", ptr(takeScript), "if h[1] ~= ARGV[1] then return 0 end", "", setTake},
		{"take takes a dropped journal", ptr(takeScript), " or redis.call('HEXISTS', KEYS[1], 'head') == 0", "", setTake},
		{"take ignores the lease", ptr(takeScript), "if h[2] ~= ARGV[2] and leaseLive(h[3]) then return -3 end", "", setTake},
		{"take refuses its own owner", ptr(takeScript), "h[2] ~= ARGV[2] and ", "", setTake},
		{"a lease never ends", ptr(takeScript), "tonumber(v or '0') > now", "tonumber(v or '0') > 0", setTake},
		{"take leases nobody", ptr(takeScript), "'owner', ARGV[2], 'lease', leaseEnd(ARGV[3])", "'lease', '0'", setTake},
		{"write leases nobody", ptr(writeScript), "'owner', ARGV[7]", "'owner', ''", setWrite},
		{"renew ignores the epoch", ptr(renewScript), "redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] or ", "", setRenew},
		{"renew renews a dropped journal", ptr(renewScript), " or redis.call('HEXISTS', KEYS[1], 'head') == 0", "", setRenew},
		{"renew lets the journal expire", ptr(renewScript), "redis.call('PEXPIRE', KEYS[2], ARGV[4], 'GT')", "", setRenew},
		{"release ignores the owner", ptr(releaseScript), " and h[2] == ARGV[2]", "", setRelease},
		{"release ignores the epoch", ptr(releaseScript), "h[1] == ARGV[1] and ", "", setRelease},
		{"release releases nothing", ptr(releaseScript), "redis.call('HSET', KEYS[1], 'lease', '0')", "", setRelease},
		{"drop ignores the epoch", ptr(dropScript), "if stored > tonumber(ARGV[1]) then return 0 end", "", setDrop},
		{"drop keeps the epoch", ptr(dropScript), "tonumber(ARGV[1]) + 1", "ARGV[1]", setDrop},
	}
	for i, m := range mutations {
		if !strings.Contains(*m.script, m.from) {
			t.Fatalf("mutation %q: the script no longer holds %q", m.name, m.from)
		}
		mutated := *st
		mutated.scripts = m.scriptsFor(st.scripts, redis.NewScript(strings.Replace(*m.script, m.from, m.to, 1)))
		rec := &failures{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			checkpointtest.Run(rec, &mutated, fmt.Sprintf("mut%d_", i))
		}()
		<-done
		if !rec.failed.Load() {
			t.Errorf("mutation %q passed the suite", m.name)
		}
	}
}

func ptr(s string) *string { return &s }

func setWrite(s checkpointScripts, m *redis.Script) checkpointScripts { s.write = m; return s }
func setLoad(s checkpointScripts, m *redis.Script) checkpointScripts  { s.load = m; return s }
func setTake(s checkpointScripts, m *redis.Script) checkpointScripts  { s.take = m; return s }
func setDrop(s checkpointScripts, m *redis.Script) checkpointScripts  { s.drop = m; return s }
func setRenew(s checkpointScripts, m *redis.Script) checkpointScripts { s.renew = m; return s }
func setRelease(s checkpointScripts, m *redis.Script) checkpointScripts {
	s.release = m
	return s
}

// failures records whether the suite failed; a Fatalf ends the suite's
// goroutine, as testing's does.
type failures struct{ failed atomic.Bool }

func (f *failures) Helper()               {}
func (f *failures) Errorf(string, ...any) { f.failed.Store(true) }
func (f *failures) Fatalf(string, ...any) { f.failed.Store(true); goruntime.Goexit() }

// BenchmarkRenew: a server's renewal of the leases of 1,000 rollouts, one
// pipeline of 1,000 scripts, on Redis with fsync on every write (what a
// server holding that many pays every third of its lease's TTL).
func BenchmarkRenew(b *testing.B) {
	ctx := context.Background()
	st, _ := newCheckpointStore(b)
	lease := runtime.Lease{Owner: "srv_bench", TTL: 10 * time.Second}
	refs := make([]runtime.LeaseRef, 1000)
	for i := range refs {
		refs[i] = runtime.LeaseRef{Tenant: "t1", ID: fmt.Sprintf("resp_renew%d", i), Epoch: 1}
		w := &runtime.JournalWrite{Tenant: "t1", ID: refs[i].ID, Creds: "c1", Epoch: 1, Reset: true, Head: []byte(`{}`), Entries: [][]byte{[]byte("base")}, Lease: lease}
		if err := st.Write(ctx, w, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		lost, err := st.Renew(ctx, lease, refs, time.Minute)
		if err != nil || slices.Contains(lost, true) {
			b.Fatalf("Renew: %v", err)
		}
	}
}
