package runtime_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// budgetOptions bound the server's memory budget at max bytes, with frames
// large enough for the tests' inputs.
func budgetOptions(max int64) runtime.Options {
	return runtime.Options{Limits: runtime.Limits{MaxMemory: max, MaxFrame: 8 * mib, ConnBytes: 8 * mib}}
}

// prose is about n bytes of text that tokenizes as prose does.
func prose(n int) string {
	const s = "the parser reads one token at a time and keeps what it has seen. "
	return strings.Repeat(s, n/len(s)+1)[:n]
}

// lookupTools offer the function the scripted steps call.
var lookupTools = []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}

// TestBudgetHolds: what a client makes the server hold is charged to the
// server's memory budget while it is held and given back once it is
// dropped, path by path: steering input waiting in a rollout, an appended
// output in a parked rollout's context, the model's output, a woken
// rollout's state (and a settled rollout's tail, kept for a resume until
// its client says it has read it). Each subtest fails when its path's
// charge is taken out.
func TestBudgetHolds(t *testing.T) {
	const size = 2 << 20
	big := prose(size)

	t.Run("steer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newPipeHarness(t, budgetOptions(256*mib))
			c := p.dial(t, "")
			c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": lookupTools, "input": "Look it up.\ncall: lookup {\"q\":\"x\"}"}))
			id := respID(t, last(c.next(t)))
			synctest.Wait() // the pause's frames are written
			before := p.srv.MemoryHeld()
			c.send(t, steerEv(id, big))
			if a, b := decodeSteer(t, c.recv(t)), decodeSteer(t, c.recv(t)); a.Type != "response.steer.accepted" || b.Type != "response.steer.pending" {
				t.Fatalf("steered: %+v then %+v", a, b)
			}
			if grew := p.srv.MemoryHeld() - before; grew < 2*size {
				t.Errorf("a waiting steer of %d bytes took %d of the budget: want twice its size (decoded, and as sent)", size, grew)
			}
			cancelAndRelease(t, p, c, id)
		})
	})

	t.Run("steer refused", func(t *testing.T) {
		// Steers held fill the budget: the next frame finds no room and is
		// refused with server_memory_full, before the 16 pending steers a
		// response takes.
		synctest.Test(t, func(t *testing.T) {
			p := newPipeHarness(t, runtime.Options{Limits: runtime.Limits{MaxMemory: 24 * mib, MaxFrame: 3 * mib, ConnBytes: 3 * mib}})
			c := p.dial(t, "")
			c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": lookupTools, "input": "Look it up.\ncall: lookup {\"q\":\"x\"}"}))
			id := respID(t, last(c.next(t)))
			for i := range 16 {
				c.send(t, steerEv(id, big))
				b := c.recv(t)
				if e := decodeEv(t, b); e.Type == "error" && e.Error.Code == protocol.CodeServerMemory {
					if i == 0 {
						t.Fatalf("the first steer refused: %s", b)
					}
					return
				}
				if a := decodeSteer(t, b); a.Type == "response.steer.failed" {
					if a.Error.Code != protocol.CodeServerMemory {
						t.Fatalf("steer %d: %s", i, b)
					}
					return
				}
				c.recv(t) // pending
			}
			t.Fatalf("16 steers of %d bytes all held under a budget of 24 MiB", size)
		})
	})

	t.Run("append", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := newPipeHarness(t, budgetOptions(256*mib))
			c := p.dial(t, "")
			// Two calls: an output for one leaves the rollout parked on the other.
			c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": lookupTools,
				"input": "Look them up.\ncall: lookup {\"q\":\"x\"} | lookup {\"q\":\"y\"}"}))
			pause := last(c.next(t))
			id, outs := respID(t, pause), outputsFor(t, pause)
			synctest.Wait() // the pause's frames are written
			before := p.srv.MemoryHeld()
			first := outs[0].(map[string]any)
			first["output"] = big
			c.send(t, appendEv(id, "", first))
			synctest.Wait()
			if grew := p.srv.MemoryHeld() - before; grew < size {
				t.Errorf("an appended output of %d bytes took %d of the budget", size, grew)
			}
			cancelAndRelease(t, p, c, id)
		})
	})

	t.Run("output", func(t *testing.T) {
		// A create the budget admits whose output does not fit: it fails
		// server_memory_full, and the connection goes on. The scripted
		// model calls lookup with the 3 MiB of one letter its input
		// scripts, which render to 393k tokens: the create holds about 12
		// MiB while served, its context 3 MiB; the call's arguments, 3 MiB
		// more, would pass 17 MiB.
		synctest.Test(t, func(t *testing.T) {
			in := "Look it up.\ncall: lookup {\"q\":\"" + strings.Repeat("x", 3<<20) + "\"}"
			p := newPipeHarness(t, runtime.Options{Limits: runtime.Limits{MaxMemory: 17 * mib, MaxFrame: 4 * mib, ConnBytes: 4 * mib}})
			c := p.dial(t, "")
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "tools": lookupTools, "input": in}))
			e := decodeEv(t, c.terminal(t))
			if e.Type != "response.failed" || e.Response.Error == nil || e.Response.Error.Code != protocol.CodeServerMemory {
				t.Fatalf("a call of 3 MiB of arguments under a 17 MiB budget: %s %+v", e.Type, e.Response.Error)
			}
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "still there?"}))
			if typ := eventType(t, c.terminal(t)); typ != "response.completed" {
				t.Fatalf("after: %s", typ)
			}
		})
	})

	t.Run("wake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			o := durableOptions(runtime.NewMemoryCheckpoints())
			o.Suspension.HibernateAfter = time.Minute
			o.Limits = budgetOptions(256 * mib).Limits
			p := newPipeHarness(t, o)
			c := p.dial(t, "Bearer alice")
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "tools": lookupTools,
				"input": big + "\ncall: lookup {\"q\":\"x\"} | lookup {\"q\":\"y\"}"}))
			pause := last(c.next(t))
			id, outs := respID(t, pause), outputsFor(t, pause)
			time.Sleep(2 * time.Minute) // hibernated: its state is in the store alone
			synctest.Wait()
			asleep := p.srv.MemoryHeld()
			c.send(t, appendEv(id, "", outs[0])) // wakes it, parked on the other call
			synctest.Wait()
			if grew := p.srv.MemoryHeld() - asleep; grew < size {
				t.Errorf("a woken rollout of a %d-byte context took %d of the budget", size, grew)
			}
		})
	})
}

// cancelAndRelease cancels rollout id, parked on c, and checks that the
// budget then holds its tail, kept for a resume, and nothing once c has
// read it (response.processed) and gone. Inside a synctest bubble.
func cancelAndRelease(t *testing.T, p *pipeHarness, c *wsConn, id string) {
	t.Helper()
	c.send(t, refEv("response.cancel", id, ""))
	if typ := eventType(t, last(c.next(t))); typ != "response.cancelled" {
		t.Fatalf("cancelled: %s", typ)
	}
	synctest.Wait()
	if held := p.srv.MemoryHeld(); held <= 0 {
		t.Errorf("the budget holds %d bytes with the ended rollout's tail kept for a resume", held)
	}
	c.send(t, map[string]any{"type": "response.processed", "response_id": id})
	c.drop()
	synctest.Wait()
	if held := p.srv.MemoryHeld(); held != 0 {
		t.Errorf("the budget holds %d bytes once the rollout and its connection are gone", held)
	}
}
