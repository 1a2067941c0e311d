package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/backgroundtest"
)

// TestBackgrounds: the Redis background responses pass the suite every
// runtime.BackgroundStore passes (runSuite).
func TestBackgrounds(t *testing.T) {
	runSuite(t, func(t *testing.T, st *Store, prefix string) { backgroundtest.Run(t, st, prefix) })
}

// bgRecord and bgLog are the keys of resp_bg of tenant t1 (7431,
// hex-coded), as the package doc names them.
const bgRecord, bgLog = "tether:{t7431}:b:resp_bg", "tether:{t7431}:bl:resp_bg"

// TestBackgroundKeys: a background response is the hash and the stream
// the package doc names, its events at the ids of their sequence numbers,
// both keys kept until one moment: a live response its lease and then
// Keep or another lease, whichever is longer, never shortened while it
// runs, and an ended one Keep from its end, whatever it was kept before.
func TestBackgroundKeys(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	lease := runtime.Lease{Owner: "srv_a", TTL: 10 * time.Second}
	// expires checks that both keys (only the record before the log's
	// first event) expire at one moment, within (lo, hi] from now.
	expires := func(when string, lo, hi time.Duration) time.Time {
		t.Helper()
		now, err := st.c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		at, err := st.c.PExpireTime(ctx, bgRecord).Result()
		if err != nil {
			t.Fatal(err)
		}
		if left := time.UnixMilli(int64(at / time.Millisecond)).Sub(now); left <= lo || left > hi {
			t.Errorf("%s: the record is kept %v more, want within (%v, %v]", when, left, lo, hi)
		}
		if n, _ := st.c.Exists(ctx, bgLog).Result(); n == 1 {
			if logAt, err := st.c.PExpireTime(ctx, bgLog).Result(); err != nil || logAt != at {
				t.Errorf("%s: the log expires at %v (%v), the record at %v", when, logAt, err, at)
			}
		}
		return time.UnixMilli(int64(at / time.Millisecond))
	}

	rec := &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_bg", Request: []byte(`{"req":1}`), Stream: true}
	if err := st.CreateBackground(ctx, rec, nil, lease); err != nil {
		t.Fatal(err)
	}
	fields, err := st.c.HGetAll(ctx, bgRecord).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"epoch": "1", "owner": "srv_a", "request": `{"req":1}`, "response": "", "stream": "1", "ended": "0", "cancel": "0"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("HGETALL %s: %s is %q, want %q", bgRecord, k, fields[k], v)
		}
	}
	if len(fields) != len(want)+1 { // and the lease
		t.Errorf("HGETALL %s: %v, want the fields %v and lease", bgRecord, fields, want)
	}
	expires("created", 15*time.Second, 20*time.Second) // two leases: no Keep yet

	w := &runtime.BackgroundWrite{Tenant: "t1", ID: "resp_bg", Epoch: 1, Lease: lease, Events: [][]byte{[]byte("e0"), []byte("e1")}, Keep: time.Minute}
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	entries, err := st.c.XRange(ctx, bgLog, "-", "+").Result()
	if err != nil || len(entries) != 2 || entries[0].ID != "0-1" || entries[1].ID != "0-2" || entries[1].Values["f"] != "e1" {
		t.Fatalf("XRANGE %s: %v %v, want e0 at 0-1 and e1 at 0-2", bgLog, entries, err)
	}
	live := expires("written live", 65*time.Second, 70*time.Second) // its lease, then Keep

	if err := st.TakeBackground(ctx, "t1", "resp_bg", 1, lease); err != nil {
		t.Fatal(err)
	}
	if at := expires("taken", 60*time.Second, 70*time.Second); !at.Equal(live) {
		t.Errorf("a take (two leases, 20s) moved the expiry from %v to %v, want it kept", live, at)
	}
	w.Epoch, w.At, w.Events, w.Keep = 2, 2, [][]byte{[]byte("e2")}, time.Hour
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.At, w.Keep = 3, time.Minute
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	expires("written live with an hour's Keep, then a minute's", time.Hour, time.Hour+10*time.Second)

	w.At, w.Ended, w.Events = 4, true, [][]byte{[]byte("done")}
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	ended := expires("ended with a minute's Keep", 55*time.Second, time.Minute)
	w.At, w.Ended, w.Events, w.Keep = 5, false, nil, time.Hour
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	if at := expires("written after its end", 50*time.Second, time.Minute); !at.Equal(ended) {
		t.Errorf("a write after the end moved the expiry from %v to %v, want it kept", ended, at)
	}
}

// TestBackgroundFollowerWakes: a follower waiting in Redis (XREAD BLOCK,
// seen blocked there before anything is written) gets the write that lands
// meanwhile, in one answer.
func TestBackgroundFollowerWakes(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	if err := st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_bg"}, [][]byte{[]byte("created")}, runtime.Lease{Owner: "srv_a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	type read struct {
		events [][]byte
		err    error
	}
	got := make(chan read, 1)
	go func() {
		events, err := st.BackgroundEvents(ctx, "t1", "resp_bg", 0, time.Minute)
		got <- read{events, err}
	}()
	blocked(t, st, 1)
	w := &runtime.BackgroundWrite{Tenant: "t1", ID: "resp_bg", Epoch: 1, Lease: runtime.Lease{Owner: "srv_a", TTL: time.Minute}, At: 1,
		Events: [][]byte{[]byte("delta"), []byte("done")}, Keep: time.Minute}
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || len(r.events) != 2 || string(r.events[0]) != "delta" || string(r.events[1]) != "done" {
		t.Fatalf("the follower woken by a write: %q %v, want delta and done", r.events, r.err)
	}
}

// TestBackgroundFollowerLeaves: a follower whose context ends while it
// waits in Redis returns, and its connection, unblocked, goes back to the
// followers' pool rather than waiting out the hour it asked for.
func TestBackgroundFollowerLeaves(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	if err := st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_bg"}, nil, runtime.Lease{Owner: "srv_a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := st.BackgroundEvents(cctx, "t1", "resp_bg", -1, time.Hour)
		got <- err
	}()
	blocked(t, st, 1)
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a follower whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a follower whose context ended still waits after 10s")
	}
	blocked(t, st, 0)
	if ps := st.follow.PoolStats(); ps.TotalConns != 1 || ps.IdleConns != 1 {
		t.Errorf("the followers' pool after the follower left: %d connections, %d idle, want its one, idle", ps.TotalConns, ps.IdleConns)
	}
}

// blocked waits until Redis has n clients blocked, failing after 10s.
func blocked(t *testing.T, st *Store, n int) {
	t.Helper()
	want := fmt.Sprintf("blocked_clients:%d\r\n", n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := st.c.Info(context.Background(), "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis has not %d clients blocked after 10s: %s", n, info)
		}
		time.Sleep(5 * time.Millisecond) // nothing to wait on but Redis's count
	}
}

// TestBackgroundRoundTrips: each operation is one round trip (a script's
// EVALSHA) once Redis knows the scripts; a follower that finds events is
// one too (the script and CLIENT ID, pipelined), and one that waits for
// them a second, its XREAD.
func TestBackgroundRoundTrips(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	ctx := context.Background()
	lease := runtime.Lease{Owner: "srv_a", TTL: time.Minute}
	w := &runtime.BackgroundWrite{Tenant: "t1", ID: "resp_rt", Epoch: 1, Lease: lease, Events: [][]byte{[]byte("e")}, Keep: time.Minute}
	ops := []struct {
		name  string
		trips int64
		do    func() error
	}{
		{"create", 1, func() error {
			w.Epoch, w.At = 1, 0
			return st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_rt"}, nil, lease)
		}},
		{"write", 1, func() error { _, err := st.WriteBackground(ctx, w); w.At++; return err }},
		{"get", 1, func() error { _, err := st.GetBackground(ctx, "t1", "resp_rt"); return err }},
		{"events", 1, func() error { _, err := st.BackgroundEvents(ctx, "t1", "resp_rt", -1, 0); return err }},
		{"events found waiting", 1, func() error { _, err := st.BackgroundEvents(ctx, "t1", "resp_rt", -1, time.Minute); return err }},
		{"events waited for", 2, func() error {
			_, err := st.BackgroundEvents(ctx, "t1", "resp_rt", w.At-1, time.Millisecond)
			return err
		}},
		{"cancel", 1, func() error { return st.CancelBackground(ctx, "t1", "resp_rt") }},
		{"take", 1, func() error { w.Epoch++; return st.TakeBackground(ctx, "t1", "resp_rt", w.Epoch-1, lease) }},
	}
	for _, op := range ops { // a fresh Redis knows no script: EVALSHA, then EVAL
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
	}
	var rt countCommands
	st.c.AddHook(&rt)
	st.follow.AddHook(&rt)
	for _, op := range ops {
		rt.n.Store(0)
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if n := rt.n.Load(); n != op.trips {
			t.Errorf("%s took %d round trips, want %d", op.name, n, op.trips)
		}
	}
}

// TestBackgroundsUnavailable: with Redis killed, every operation, a
// follower's wait included, fails, in a time its Timeout bounds, with
// store_unavailable, never as a fence, a gap or a missing response; once
// Redis is back (having forgotten the scripts) the response written
// before is there.
func TestBackgroundsUnavailable(t *testing.T) {
	t.Parallel()
	st, rd := newCheckpointStore(t)
	ctx := context.Background()
	lease := runtime.Lease{Owner: "srv_a", TTL: time.Minute}
	if err := st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_down"}, [][]byte{[]byte("before")}, lease); err != nil {
		t.Fatal(err)
	}
	rd.Kill()
	w := &runtime.BackgroundWrite{Tenant: "t1", ID: "resp_down", Epoch: 1, Lease: lease, At: 1, Events: [][]byte{[]byte("during")}, Keep: time.Minute}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error {
			return st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: "resp_other"}, nil, lease)
		}},
		{"write", func() error { _, err := st.WriteBackground(ctx, w); return err }},
		{"get", func() error { _, err := st.GetBackground(ctx, "t1", "resp_down"); return err }},
		{"events", func() error { _, err := st.BackgroundEvents(ctx, "t1", "resp_down", 0, 0); return err }},
		{"follow", func() error { _, err := st.BackgroundEvents(ctx, "t1", "resp_down", 0, time.Second); return err }},
		{"cancel", func() error { return st.CancelBackground(ctx, "t1", "resp_down") }},
		{"take", func() error { return st.TakeBackground(ctx, "t1", "resp_down", 1, lease) }},
	} {
		start := time.Now()
		err := op.do()
		if took := time.Since(start); took > 3*st.opts.Timeout {
			t.Errorf("%s while Redis is down took %v (Timeout %v)", op.name, took, st.opts.Timeout)
		}
		if perr := protocol.AsError(err); err == nil || perr.Code != protocol.CodeStoreUnavailable || perr.Status != 503 {
			t.Errorf("%s while Redis is down: %v, want store_unavailable", op.name, err)
		}
	}

	rd.Restart()
	events, err := st.BackgroundEvents(ctx, "t1", "resp_down", -1, time.Second)
	if err != nil || len(events) != 1 || string(events[0]) != "before" {
		t.Fatalf("the events once Redis is back: %q %v, want the one written before", events, err)
	}
	if _, err := st.WriteBackground(ctx, w); err != nil {
		t.Fatalf("a write once Redis is back: %v", err)
	}
}

// TestBackgroundScriptMutations: the suite catches each way the scripts
// could be wrong: every mutation below, run against the suite, fails it.
// (A log that outlived its record, invisible through the interface, is
// TestBackgroundKeys's to catch.)
func TestBackgroundScriptMutations(t *testing.T) {
	t.Parallel()
	st, _ := newCheckpointStore(t)
	mutations := []struct {
		name     string
		script   *redis.Script
		text     string
		from, to string
	}{
		{"create appends nothing", st.bgScripts.create, bgCreateScript, "appendLog(0, 9)", ""},
		{"create leases nobody", st.bgScripts.create, bgCreateScript, "'lease', leaseEnd(ARGV[2])", "'lease', '0'"},
		{"write to no record", st.bgScripts.write, bgWriteScript, "if not h[1] then return -1 end", ""},
		{"write ignores the epoch", st.bgScripts.write, bgWriteScript, "if h[1] ~= ARGV[1] then return 0 end", ""},
		{"write appends anywhere", st.bgScripts.write, bgWriteScript, "if n ~= tonumber(ARGV[2]) then return -2 end", ""},
		{"write appends nothing", st.bgScripts.write, bgWriteScript, "appendLog(n, 10)", ""},
		{"write keeps the response", st.bgScripts.write, bgWriteScript, "if ARGV[5] == '1' then", "if false then"},
		{"write replaces the response with none", st.bgScripts.write, bgWriteScript, "if ARGV[5] == '1' then", "if true then"},
		{"write never ends", st.bgScripts.write, bgWriteScript, "redis.call('HSET', KEYS[1], 'ended', '1')", ""},
		{"an ended response kept as a live one", st.bgScripts.write, bgWriteScript, "keepUntil(now + tonumber(ARGV[8]))", "keepLive(ARGV[9])"},
		{"write hides the cancel", st.bgScripts.write, bgWriteScript, "if h[3] == '1' then return 2 end", ""},
		{"write leases nobody", st.bgScripts.write, bgWriteScript, "'lease', leaseEnd(ARGV[4])", "'lease', '0'"},
		{"get: a lease never ends", st.bgScripts.get, bgGetScript, "leaseLive(h[3]) and '1' or '0'", "'1'"},
		{"get counts no events", st.bgScripts.get, bgGetScript, "tostring(redis.call('XLEN', KEYS[2]))", "'0'"},
		{"events of no record", st.bgScripts.events, bgEventsScript, "if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end", ""},
		{"events from the start", st.bgScripts.events, bgEventsScript, "'(' .. ARGV[1]", "'-'"},
		{"cancel of no record", st.bgScripts.cancel, bgCancelScript, "if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end", ""},
		{"cancel asks nothing", st.bgScripts.cancel, bgCancelScript, "redis.call('HSET', KEYS[1], 'cancel', '1')", ""},
		{"take of no record", st.bgScripts.take, bgTakeScript, "if not h[1] then return -1 end", ""},
		{"take ignores the epoch", st.bgScripts.take, bgTakeScript, "if h[1] ~= ARGV[1] then return 0 end", ""},
		{"take ignores the lease", st.bgScripts.take, bgTakeScript, "if h[2] ~= ARGV[2] and leaseLive(h[3]) then return -3 end", ""},
		{"take refuses its own owner", st.bgScripts.take, bgTakeScript, "h[2] ~= ARGV[2] and ", ""},
		{"take: a lease never ends", st.bgScripts.take, bgTakeScript, "tonumber(v or '0') > now", "tonumber(v or '0') > 0"},
		{"take keeps the epoch", st.bgScripts.take, bgTakeScript, "redis.call('HINCRBY', KEYS[1], 'epoch', 1)", ""},
		{"take leases nobody", st.bgScripts.take, bgTakeScript, "'lease', leaseEnd(ARGV[3])", "'lease', '0'"},
	}
	for i, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(m.text, m.from) {
				t.Fatalf("the script no longer holds %q", m.from)
			}
			mutated := *st
			mutant := redis.NewScript(strings.Replace(m.text, m.from, m.to, 1))
			for _, s := range []**redis.Script{&mutated.bgScripts.create, &mutated.bgScripts.write, &mutated.bgScripts.get,
				&mutated.bgScripts.events, &mutated.bgScripts.cancel, &mutated.bgScripts.take} {
				if *s == m.script {
					*s = mutant
				}
			}
			rec := &failures{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				backgroundtest.Run(rec, &mutated, fmt.Sprintf("mut%d_", i))
			}()
			<-done
			if !rec.failed.Load() {
				t.Errorf("mutation %q passed the suite", m.name)
			}
		})
	}
}

// BenchmarkBackground: the publish path of a streamed background
// response, in a redis-server on loopback: its owner's writes of 1, 8 and
// 64 events of 200 bytes each (write/N), and the same while a follower on
// another Store, as another server's, reads each write before the next is
// made (follow/N: from the write's start to the follower's having it,
// whether the follower's read found it there or waited in XREAD for it).
// ns/event is ns/op over the events of a write. Redis fsyncs every write
// (fsync=always, as in BenchmarkCheckpoints), then once a second
// (fsync=everysec, Redis's default), which leaves what the path itself
// costs. Each log is ended, and another begun, every 4,096 events, outside
// the timer.
func BenchmarkBackground(b *testing.B) {
	ctx := context.Background()
	st, rd := newCheckpointStore(b)
	other, err := New(rd.URL(), Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { other.Close() })
	frame := []byte(`{"type":"response.output_text.delta","sequence_number":0,"item_id":"msg_0123456789abcdef","output_index":0,"content_index":0,"delta":"`)
	frame = append(frame, strings.Repeat("x", 200-len(frame)-3)...)
	frame = append(frame, `"}`+"\n"...)
	for _, fsync := range []string{"always", "everysec"} {
		if err := st.c.ConfigSet(ctx, "appendfsync", fsync).Err(); err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{1, 8, 64} {
			p := &publisher{st: st, batch: batch, events: slices.Repeat([][]byte{frame}, batch)}
			b.Run(fmt.Sprintf("fsync=%s/write/%d", fsync, batch), p.benchWrite)
			b.Run(fmt.Sprintf("fsync=%s/follow/%d", fsync, batch), func(b *testing.B) { p.benchFollow(b, other) })
		}
	}
}

// publisher is BenchmarkBackground's owner of a log.
type publisher struct {
	st     *Store
	batch  int
	events [][]byte // a write's
	logs   int      // begun
	id     string   // the log written
	at     int      // its events
}

var benchLease = runtime.Lease{Owner: "srv_bench", TTL: 10 * time.Second}

// ready begins another log, outside the timer, when the one written
// would pass 4,096 events.
func (p *publisher) ready(b *testing.B) {
	if p.id == "" || p.at+p.batch > 4096 {
		b.StopTimer()
		p.begin(b)
		b.StartTimer()
	}
}

// publish writes a batch of events at the log's end.
func (p *publisher) publish(b *testing.B) {
	w := &runtime.BackgroundWrite{Tenant: "t1", ID: p.id, Epoch: 1, Lease: benchLease, At: p.at, Events: p.events, Keep: time.Minute}
	if _, err := p.st.WriteBackground(context.Background(), w); err != nil {
		b.Fatal(err)
	}
	p.at += p.batch
}

// begin ends the log written, if any, and begins another.
func (p *publisher) begin(b *testing.B) {
	ctx := context.Background()
	if p.id != "" {
		end := &runtime.BackgroundWrite{Tenant: "t1", ID: p.id, Epoch: 1, Lease: benchLease, At: p.at, Ended: true, Keep: time.Millisecond}
		if _, err := p.st.WriteBackground(ctx, end); err != nil {
			b.Fatal(err)
		}
	}
	p.logs++
	p.id, p.at = fmt.Sprintf("resp_bench_%d_%d", p.batch, p.logs), 0
	if err := p.st.CreateBackground(ctx, &runtime.BackgroundRecord{Tenant: "t1", ID: p.id, Stream: true}, nil, benchLease); err != nil {
		b.Fatal(err)
	}
}

func (p *publisher) benchWrite(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(p.batch * len(p.events[0])))
	for b.Loop() {
		p.ready(b)
		p.publish(b)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p.batch), "ns/event")
}

// benchFollow publishes while a follower on other reads each write
// before the next: it asks for the events after the log's end just before
// the write.
func (p *publisher) benchFollow(b *testing.B, other *Store) {
	b.ReportAllocs()
	b.SetBytes(int64(p.batch * len(p.events[0])))
	type ask struct {
		id    string
		after int
	}
	asks, got := make(chan ask), make(chan int)
	go func() {
		defer close(got)
		for a := range asks {
			read, err := other.BackgroundEvents(context.Background(), "t1", a.id, a.after, 10*time.Second)
			if err != nil {
				b.Error(err)
			}
			got <- len(read)
		}
	}()
	defer func() { close(asks); <-got }()
	for b.Loop() {
		p.ready(b)
		asks <- ask{p.id, p.at - 1}
		p.publish(b)
		if n := <-got; n != p.batch {
			b.Fatalf("the follower read %d events of a write of %d", n, p.batch)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*p.batch), "ns/event")
}
