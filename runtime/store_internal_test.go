package runtime

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
)

// chainOf is a conversation of turns records whose items hold about tokens
// tokens in all (a word of 4 letters and a space is about a token): each
// turn a user message and an assistant message, each record naming the
// ones before it.
func chainOf(turns, tokens int) []*Record {
	words := max(tokens/(2*turns), 1)
	text := strings.Repeat("word ", words)
	var recs []*Record
	var chain []string
	for i := range turns {
		resp := &protocol.Response{ID: newID("resp"), Object: "response", Status: protocol.ResponseCompleted, Model: "m", Store: true,
			Output: protocol.Items{&protocol.Message{ID: newID("msg"), Status: protocol.StatusCompleted, Role: protocol.RoleAssistant,
				Content: protocol.Contents{&protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}}}}}
		if i > 0 {
			prev := recs[i-1].Response.ID
			resp.PreviousResponseID = &prev
		}
		in := protocol.Items{protocol.UserMessage(text)}
		recs = append(recs, &Record{Response: resp, Input: in, Items: append(append(protocol.Items{}, in...), resp.Output...), Chain: chain})
		chain = append(chain[:len(chain):len(chain)], resp.ID)
	}
	return recs
}

// countCommands counts the commands (and pipelines) a client sends: its
// round trips.
type countCommands struct{ n atomic.Int64 }

func (c *countCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *countCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// TestRedisChainRoundTrips: a response is written in one round trip, and a
// conversation of 50 responses loads in two, with every item in order; a
// record of another tenant, or one missing from the middle, breaks the
// chain as it does in memory.
func TestRedisChainRoundTrips(t *testing.T) {
	rd := redistest.Start(t)
	st, err := NewRedisStore(rd.URL(), RedisStoreOptions{})
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
	scoped := scopedStore{st}
	head, items, chain, err := loadChain(ctx, scoped, recs[49].Response.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := rt.n.Load(); n != 2 {
		t.Errorf("loading a chain of 50 took %d round trips, want 2", n)
	}
	if head.Response.ID != recs[49].Response.ID || len(items) != 100 || len(chain) != 50 || chain[0] != recs[0].Response.ID {
		t.Fatalf("loaded head %s, %d items, chain of %d", head.Response.ID, len(items), len(chain))
	}
	for i, it := range items {
		got, _ := protocol.Marshal(it)
		want, _ := protocol.Marshal(recs[i/2].Items[i%2])
		if !bytes.Equal(got, want) {
			t.Fatalf("item %d: %s, want %s", i, got, want)
		}
	}

	// Another tenant reads none of it.
	other := withTenant(ctx, "mallory")
	if _, _, _, err := loadChain(other, scoped, recs[49].Response.ID); err != ErrNotStored {
		t.Errorf("another tenant loading the chain: %v", err)
	}
	// A record gone from the middle breaks the chain.
	if err := st.Delete(ctx, recs[20].Response.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := loadChain(ctx, scoped, recs[49].Response.ID); err != ErrNotStored {
		t.Errorf("a chain with a record deleted: %v", err)
	}
	// A record written without its chain is read a link at a time.
	older := chainOf(3, 100)
	for _, rec := range older {
		rec.Chain = nil
		st.Put(ctx, rec)
	}
	if _, items, _, err := loadChain(ctx, scoped, older[2].Response.ID); err != nil || len(items) != 6 {
		t.Errorf("a chain without ids: %d items, %v", len(items), err)
	}
}

// TestRedisUnavailable: a store whose Redis does not answer fails every
// operation with store_unavailable.
func TestRedisUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	st, err := NewRedisStore("redis://"+addr+"/0", RedisStoreOptions{})
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
// (20 turns) at 1k, 10k and 100k tokens of history, in memory and in
// Redis (a redis-server on loopback).
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	stores := map[string]func(b *testing.B) Store{
		"memory": func(*testing.B) Store { return NewMemoryStore(MemoryStoreOptions{}) },
		"redis": func(b *testing.B) Store {
			rd := redistest.Start(b)
			st, err := NewRedisStore(rd.URL(), RedisStoreOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	for _, name := range []string{"memory", "redis"} {
		for _, tokens := range []int{1000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%dk", name, tokens/1000), func(b *testing.B) {
				st := scopedStore{stores[name](b)}
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
						if _, _, _, err := loadChain(ctx, st, recs[19].Response.ID); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// TestRecordInputs: a record lists as its inputs the create's input, then
// what the client appended, in context order, without storing them twice.
func TestRecordInputs(t *testing.T) {
	t.Parallel()
	in := protocol.UserMessage("fix it")
	call := &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "read_file"}
	out := &protocol.FunctionCallOutput{ID: "fco_1", CallID: "call_1"}
	steer := protocol.UserMessage("hurry")
	answer := &protocol.Message{ID: "msg_2", Role: protocol.RoleAssistant}
	rec := &Record{Response: &protocol.Response{Output: protocol.Items{call, answer}}, Input: protocol.Items{in},
		Items: protocol.Items{in, call, out, steer, answer}}
	if got := rec.inputs(); !slices.Equal(got, protocol.Items{in, out, steer}) {
		t.Errorf("inputs %v", got)
	}
	old := &Record{Response: rec.Response, Input: protocol.Items{in}} // before Items were kept
	if got := old.inputs(); !slices.Equal(got, protocol.Items{in}) {
		t.Errorf("an old record's inputs %v", got)
	}
}
