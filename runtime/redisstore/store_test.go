package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// chainOf is a conversation of turns records whose items hold about tokens
// tokens in all (a word of 4 letters and a space is about a token): each
// turn a user message and an assistant message, each record naming the
// ones before it.
func chainOf(turns, tokens int) []*runtime.Record {
	words := max(tokens/(2*turns), 1)
	text := strings.Repeat("word ", words)
	var recs []*runtime.Record
	var chain []string
	for i := range turns {
		resp := &protocol.Response{ID: fmt.Sprintf("resp_%d_%d", turns, i), Object: "response", Status: protocol.ResponseCompleted, Model: "m", Store: true,
			Output: protocol.Items{&protocol.Message{ID: fmt.Sprintf("msg_%d_%d", turns, i), Status: protocol.StatusCompleted, Role: protocol.RoleAssistant,
				Content: protocol.Contents{&protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}}}}}
		if i > 0 {
			prev := recs[i-1].Response.ID
			resp.PreviousResponseID = &prev
		}
		in := protocol.Items{protocol.UserMessage(text)}
		recs = append(recs, &runtime.Record{Response: resp, Input: in, Items: append(append(protocol.Items{}, in...), resp.Output...), Chain: chain})
		chain = append(chain[:len(chain):len(chain)], resp.ID)
	}
	return recs
}

// countCommands counts the commands (and pipelines) a client sends: its
// round trips.
type countCommands struct{ n atomic.Int64 }

func (c *countCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" { // a new connection's own setup
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *countCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "client" { // a new connection's own setup (CLIENT SETINFO)
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestChainRoundTrips: a response is written in one round trip (its
// record and the index of its items, pipelined), and a
// conversation of 50 responses loads in two, newest first, with every item;
// a record of another tenant, or one missing from the middle, breaks the
// chain; a record written without its chain loads alone (the server then
// follows previous_response_id a record at a time).
func TestChainRoundTrips(t *testing.T) {
	rd := redistest.Start(t)
	st, err := New(rd.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil { // the connection's own setup is not a write's
		t.Fatal(err)
	}
	var rt countCommands
	st.c.AddHook(&rt)
	recs := chainOf(50, 5000)
	for _, rec := range recs {
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.n.Load(); n != 50 {
		t.Errorf("50 writes took %d round trips", n)
	}
	rt.n.Store(0)
	loaded, err := st.GetChain(ctx, recs[49].Response.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load(); n != 2 {
		t.Errorf("loading a chain of 50 took %d round trips, want 2", n)
	}
	if len(loaded) != 50 {
		t.Fatalf("loaded %d records, want 50", len(loaded))
	}
	for i, rec := range loaded {
		want := recs[49-i]
		if rec.Response.ID != want.Response.ID || len(rec.Items) != 2 || len(rec.Chain) != 49-i {
			t.Fatalf("record %d: %s with %d items, chain of %d; want %s", i, rec.Response.ID, len(rec.Items), len(rec.Chain), want.Response.ID)
		}
		for j, it := range rec.Items {
			got, _ := protocol.Marshal(it)
			exp, _ := protocol.Marshal(want.Items[j])
			if !bytes.Equal(got, exp) {
				t.Fatalf("record %d item %d: %s, want %s", i, j, got, exp)
			}
		}
	}

	// Another tenant reads none of it.
	other := runtime.WithTenant(ctx, "mallory")
	if _, err := st.GetChain(other, recs[49].Response.ID); err != runtime.ErrNotStored {
		t.Errorf("another tenant loading the chain: %v", err)
	}
	if _, err := st.Get(other, recs[0].Response.ID); err != runtime.ErrNotStored {
		t.Errorf("another tenant reading a record: %v", err)
	}
	// A record gone from the middle breaks the chain.
	if err := st.Delete(ctx, recs[20].Response.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetChain(ctx, recs[49].Response.ID); err != runtime.ErrNotStored {
		t.Errorf("a chain with a record deleted: %v", err)
	}
	if err := st.Delete(ctx, recs[20].Response.ID); err != runtime.ErrNotStored {
		t.Errorf("deleting it again: %v", err)
	}
	// A record written without its chain loads alone.
	older := chainOf(3, 100)
	for _, rec := range older {
		rec.Chain = nil
		st.Put(ctx, rec)
	}
	if got, err := st.GetChain(ctx, older[2].Response.ID); err != nil || len(got) != 1 {
		t.Errorf("a chain without ids: %d records, %v", len(got), err)
	}
}

// TestUnavailable: a store whose Redis does not answer fails every
// operation with store_unavailable.
func TestUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	st, err := New("redis://"+addr+"/0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	rec := chainOf(1, 10)[0]
	for name, err := range map[string]error{
		"put": st.Put(ctx, rec), "delete": st.Delete(ctx, "resp_x"), "ping": st.Ping(ctx),
		"get": func() error { _, err := st.Get(ctx, "resp_x"); return err }(),
	} {
		if perr := protocol.AsError(err); perr.Code != protocol.CodeStoreUnavailable || perr.Status != 503 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// BenchmarkStore: a turn's write and the load of its whole conversation
// (20 turns) at 1k, 10k and 100k tokens of history, in a redis-server on
// loopback (runtime's BenchmarkStore is the memory store's).
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	rd := redistest.Start(b)
	st, err := New(rd.URL(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	for _, tokens := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", tokens/1000), func(b *testing.B) {
			recs := chainOf(21, tokens*21/20) // 20 turns of history, and the turn written
			for _, rec := range recs[:20] {
				if err := st.Put(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("write", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := st.Put(ctx, recs[20]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("load", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := st.GetChain(ctx, recs[19].Response.ID); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
