package runtime_test

import (
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// slowModel serves "slow": the scripted model at 50 tokens per second, so
// that a response is still streaming when the next frame arrives.
func slowModel(tb testing.TB) runtime.Options {
	r := renderer(tb)
	return runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		"tether-scripted": sampler.NewScripted(r, sampler.Timing{}),
		"slow":            sampler.NewScripted(r, sampler.Timing{TPS: 50}),
	}}
}

// longText makes the scripted model answer with about 50 tokens (a second
// at 50 tokens per second).
var longText = "Please read this back: " + strings.Repeat("the quick brown fox jumps over the lazy dog ", 6)

func isDelta(e ev) bool { return strings.HasSuffix(e.Type, ".delta") }

// TestSuspendedErrors: every refused frame gets its error event, the
// connection stays usable, and a refused append changes nothing: the parked
// response completes when the right outputs come.
func TestSuspendedErrors(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, slowModel(t), w)
		c := h.dial(t, nil)
		l := newLanes(c)
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}, {"grep", `{"pattern":"TODO"}`}}, {{"list_dir", `{"path":"."}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "a", "input": script(steps)}))
		events := l.next(t, "a")
		pause := last(events)
		id := respID(t, pause)
		outs := outputsFor(t, pause)
		if len(outs) != 2 {
			t.Fatalf("pause on %s", pause)
		}
		callA := outs[0].(map[string]any)["call_id"].(string)

		cases := []struct {
			name  string
			frame map[string]any
			lane  string
			code  string
		}{
			{"unknown call_id", appendEv(id, "a", fco("call_unknown", "x")), "a", "tool_call_not_found"},
			{"valid and unknown call_id", appendEv(id, "a", outs[0], fco("call_unknown", "x")), "a", "tool_call_not_found"},
			{"duplicate within one append", appendEv(id, "a", outs[0], outs[0]), "a", "duplicate_tool_output"},
			{"default lane for lane a's response", appendEv(id, "", outs...), "", "stream_id_mismatch"},
			{"lane b for lane a's response", appendEv(id, "b", outs...), "b", "stream_id_mismatch"},
			{"unknown response", appendEv("resp_unknown", "a", outs...), "a", "response_not_found"},
			{"create on the suspended lane", create(map[string]any{"model": "tether-scripted", "stream_id": "a", "input": "hi"}), "a", "stream_suspended"},
			{"resume of an unknown response", refEv("response.resume", "resp_unknown", "a"), "a", "response_not_found"},
			{"resume of a response attached here", refEv("response.resume", id, "a"), "a", "response_not_found"},
			{"cancel of an unknown response", refEv("response.cancel", "resp_unknown", "a"), "a", "response_not_found"},
			{"cancel on another lane", refEv("response.cancel", id, "b"), "b", "stream_id_mismatch"},
			{"steering by an assistant message", appendEv(id, "a", map[string]any{"type": "message", "role": "assistant", "content": "done"}), "a", "invalid_value"},
		}
		// Frames that do not decode: an append, cancel or resume is answered at
		// once, not after the response it names (which waits for it).
		for _, tc := range []struct {
			name, frame, code string
		}{
			{"append without response_id", `{"type":"response.append","stream_id":"a","input":[]}`, "missing_required_parameter"},
			{"append of a malformed item", `{"type":"response.append","stream_id":"a","response_id":"` + id + `","input":[{"type":"function_call_output","output":"x"}]}`, ""},
			{"cancel without response_id", `{"type":"response.cancel","stream_id":"a"}`, "missing_required_parameter"},
			{"resume without response_id", `{"type":"response.resume","stream_id":"a"}`, "missing_required_parameter"},
		} {
			c.send(t, []byte(tc.frame))
			evs := l.take(t, "a", func(e ev) bool { return e.Type == "error" })
			if e := decodeEv(t, last(evs)); len(evs) > 1 || tc.code != "" && e.Error.Code != tc.code {
				t.Fatalf("%s: got %s", tc.name, last(evs))
			}
		}
		for _, tc := range cases {
			c.send(t, tc.frame)
			if evs := l.wantError(t, tc.lane, tc.code); len(evs) > 0 {
				t.Fatalf("%s: frames before the error: %s", tc.name, evs[0])
			}
		}

		// A partial append is taken silently; the same output again is a duplicate.
		c.send(t, appendEv(id, "a", outs[0]))
		c.send(t, appendEv(id, "a", fco(callA, "again")))
		if evs := l.wantError(t, "a", "duplicate_tool_output"); len(evs) > 0 {
			t.Fatalf("a partial append answered with %s", evs[0])
		}

		// The connection serves other lanes meanwhile.
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "b", "input": "hello"}))
		bEvents := l.next(t, "b")
		if eventType(t, last(bEvents)) != "response.completed" {
			t.Fatalf("lane b: %s", last(bEvents))
		}
		completed := respID(t, last(bEvents))
		for _, tc := range []struct {
			name  string
			frame map[string]any
			code  string
		}{
			{"append to a completed response", appendEv(completed, "b", fco("call_x", "x")), "response_not_found"},
			{"cancel of a completed response", refEv("response.cancel", completed, "b"), "response_not_found"},
			{"resume of a completed response", refEv("response.resume", completed, "b"), "response_not_found"},
		} {
			c.send(t, tc.frame)
			if evs := l.wantError(t, "b", tc.code); len(evs) > 0 {
				t.Fatalf("%s: frames before the error: %s", tc.name, evs[0])
			}
		}

		// Appends to responses that are running, not parked: a cached-state
		// response, and a suspended one still sampling its first step.
		for _, suspend := range []bool{false, true} {
			c.send(t, create(map[string]any{"model": "slow", "store": false, "stream_id": "c", "suspend": suspend, "input": longText}))
			first := l.take(t, "c", isDelta)
			running := respID(t, first[0])
			c.send(t, appendEv(running, "c", fco("call_x", "x")))
			l.wantError(t, "c", "response_not_suspended")
			// A create on a lane that is merely busy waits its turn.
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "c", "input": "next"}))
			c.send(t, refEv("response.cancel", running, "c"))
			end := l.next(t, "c")
			if e := decodeEv(t, last(end)); e.Type != "response.cancelled" || e.Response.Status != "cancelled" || e.Response.ID != running {
				t.Fatalf("cancelled running response (suspend %v) ended with %s", suspend, last(end))
			}
			if queued := l.next(t, "c"); eventType(t, last(queued)) != "response.completed" {
				t.Fatalf("the create queued behind it: %s", last(queued))
			}
		}

		// The parked response took none of the refused frames: the second
		// output completes the step, and the rollout goes on.
		l.quiet(t, "a")
		c.send(t, appendEv(id, "a", outs[1]))
		more := l.next(t, "a")
		events = append(events, more...)
		c.send(t, appendEv(id, "a", outputsFor(t, last(more))...))
		more = l.next(t, "a")
		events = append(events, more...)
		checkStreamInvariants(t, events)
		end := decodeEv(t, last(events))
		if n := len(itemKeys(t, end.Response.Output)); n != 4 {
			t.Fatalf("output has %d items, want 4", n)
		}
		if got := itemKeys(t, end.Response.Output)[3].Text; !strings.HasPrefix(got, "list_dir returned: ") {
			t.Fatalf("answer %q", got)
		}
		// A finished suspended response takes no more frames.
		c.send(t, appendEv(id, "a", fco(callA, "late")))
		l.wantError(t, "a", "response_not_found")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "a", "previous_response_id": id, "input": "thanks"}))
		if evs := l.next(t, "a"); eventType(t, last(evs)) != "response.completed" {
			t.Fatalf("continuation of the suspended rollout: %s", last(evs))
		}
	})
}
