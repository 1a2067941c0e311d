package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
)

// TestAgentTreeTakeover: a multi-agent response whose two sub-agents wait
// on their client's calls, on a durable server that then dies (cut off
// from its store, its lease running out), is taken over on another
// server that shares the store: woken by the injects that answer the two
// calls, in the reverse of the order they came, or resumed first with
// the last sequence_number its client saw. The tree goes on from its
// journal: each inject acknowledged, the sequence gapless from where the
// client was, and the response completes with both agents' answers and
// every item the first server had sent. Fake time, in-memory connections.
func TestAgentTreeTakeover(t *testing.T) {
	t.Parallel()
	for _, resume := range []bool{false, true} {
		name := "wake"
		if resume {
			name = "resume"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := runtime.NewMemoryCheckpoints()
				store := &cutOff{Checkpoints: mem}
				a := newPipeHarness(t, durableOptions(store))
				b := newPipeHarness(t, durableOptions(mem))

				c1 := a.dial(t, "Bearer alice")
				frames := readAll(t, c1)
				c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
				var id string
				seq := -1
				var calls []callItem
				var agents []string // each call's agent
				// Everything A sends until the tree is at rest, and in the
				// store: both agents' calls, the root's wait.
				for {
					synctest.Wait()
					var f []byte
					select {
					case f = <-frames:
					default:
					}
					if f == nil {
						break
					}
					e := decodeEv(t, f)
					if e.Seq == nil || *e.Seq != seq+1 {
						t.Fatalf("on A: %s after sequence_number %d", f, seq)
					}
					seq = *e.Seq
					if e.Response != nil {
						id = e.Response.ID
					}
					if it, ok := functionCall(e.Item); ok && e.Type == "response.output_item.done" {
						var by struct {
							Agent struct {
								Name string `json:"agent_name"`
							} `json:"agent"`
						}
						json.Unmarshal(e.Item, &by)
						calls, agents = append(calls, it), append(agents, by.Agent.Name)
					}
				}
				if len(calls) != 2 {
					t.Fatalf("A sent %d client calls before it rested, want 2", len(calls))
				}
				store.cut.Store(true)
				c1.drop()
				time.Sleep(runtime.DefaultLeaseTTL) // A's lease runs out

				c2 := b.dial(t, "Bearer alice")
				if resume {
					ev := refEv("response.resume", id, "")
					ev["sequence_number"] = seq
					c2.send(t, ev)
				}
				c2.send(t, injectEv(id, calls[1].output()))
				c2.send(t, injectEv(id, calls[0].output()))
				created := 0
				for {
					f := c2.recv(t)
					e := decodeEv(t, f)
					if e.Seq == nil || *e.Seq != seq+1 {
						t.Fatalf("on B: %s after sequence_number %d", f, seq)
					}
					seq = *e.Seq
					switch e.Type {
					case "response.inject.created":
						created++
					case "response.output_item.done":
						if _, ok := functionCall(e.Item); ok {
							t.Fatalf("B made a client call again: %s", f)
						}
					case "response.completed":
						if created != 2 {
							t.Fatalf("completed after %d injects acknowledged, want 2", created)
						}
						if e.Response.ID != id {
							t.Errorf("completed %s, want %s", e.Response.ID, id)
						}
						said := map[string]string{}
						for _, raw := range e.Response.Output {
							var m struct {
								Type    string
								Author  string
								Content []struct{ Text string }
							}
							if json.Unmarshal(raw, &m) == nil && m.Type == "agent_message" && len(m.Content) > 0 {
								said[m.Author] = m.Content[0].Text
							}
						}
						for i, c := range calls {
							if !strings.Contains(said[agents[i]], toolOutput(c.Name, c.Arguments)) {
								t.Errorf("%s's call %s: it said %q, want its tool's output", agents[i], c.Name, said[agents[i]])
							}
						}
						return
					case "response.failed", "error", "response.inject.failed":
						t.Fatalf("on B: %s", f)
					}
				}
			})
		})
	}
}

// countingStore counts the journal writes and drops a server makes.
type countingStore struct {
	runtime.Checkpoints
	writes, drops atomic.Int32
}

func (c *countingStore) Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	c.drops.Add(1)
	return c.Checkpoints.Drop(ctx, tenant, id, epoch, ttl)
}

func (c *countingStore) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	c.writes.Add(1)
	return c.Checkpoints.Write(ctx, w, ttl)
}

// TestAgentTreeJournal: on a durable server a tree runs as on one that
// keeps nothing, its sub-agents' calls answered by injects, and is
// journaled as it goes: at its first rest (both agents waiting on their
// calls) and with each inject taken; once it completes, its journal is
// gone.
func TestAgentTreeJournal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Checkpoints: runtime.NewMemoryCheckpoints()}
		c := newPipeHarness(t, durableOptions(store)).dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
		var id string
		var calls []callItem
		for {
			f := c.recv(t)
			e := decodeEv(t, f)
			if e.Response != nil {
				id = e.Response.ID
			}
			switch e.Type {
			case "response.output_item.done":
				if it, ok := functionCall(e.Item); ok {
					if calls = append(calls, it); len(calls) == 2 {
						synctest.Wait()
						if n := store.writes.Load(); n != 1 {
							t.Fatalf("%d journal writes once both agents wait, want 1: the tree at rest", n)
						}
						for _, it := range calls {
							c.send(t, injectEv(id, it.output()))
						}
					}
				}
			case "response.completed":
				if n := store.writes.Load(); n < 2 {
					t.Errorf("%d journal writes, want the tree at rest and at least one inject's", n)
				}
				synctest.Wait()
				if n := store.drops.Load(); n != 1 {
					t.Errorf("the completed response's journal dropped %d times, want once", n)
				}
				return
			case "response.failed", "error", "response.inject.failed":
				t.Fatalf("the tree sent %s", f)
			}
		}
	})
}
