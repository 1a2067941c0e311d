package runtime_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/runtime"
)

// checkCancelled checks a cancelled response's stream as checkStreamInvariants
// checks a finished one: every item added is done, in order, and the
// cancelled response's output is those items.
func checkCancelled(t *testing.T, events [][]byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(last(events), &m); err != nil || m["type"] != "response.cancelled" {
		t.Fatalf("not cancelled: %s", last(events))
	}
	m["type"] = "response.incomplete"
	b, _ := json.Marshal(m)
	checkStreamInvariants(t, append(slices.Clip(events[:len(events)-1]), b))
}

// checkSeq checks that a response's events number from 0 without gaps and
// that only the last one ends it.
func checkSeq(t *testing.T, events [][]byte) {
	t.Helper()
	for i, raw := range events {
		e := decodeEv(t, raw)
		if e.Seq == nil || *e.Seq != i {
			t.Fatalf("event %d (%s) has sequence_number %v", i, e.Type, e.Seq)
		}
		if isEnd(e.Type) != (i == len(events)-1) {
			t.Fatalf("event %d of %d is %s", i, len(events), e.Type)
		}
	}
}

// TestSuspendedCancel: response.cancel ends a response mid-stream or parked
// with response.cancelled, and the lane takes the next create.
func TestSuspendedCancel(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, slowModel(t), w)
		// The second step's arguments stream for about a second at 50 tokens/s.
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"` + strings.Repeat("fox|dog|", 25) + `"}`}}}
		for _, tc := range []struct {
			name    string
			model   string
			suspend bool
			input   string
			parked  bool
		}{
			{"sampling, cached-state", "slow", false, longText, false},
			{"sampling, suspended", "slow", true, longText, false},
			{"sampling the second step, suspended", "slow", true, script(steps), false},
			{"parked", "tether-scripted", true, script(steps), true},
			{"parked, paced", "slow", true, script(steps), true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := h.dial(t, nil)
				c.send(t, create(map[string]any{"model": tc.model, "store": false, "suspend": tc.suspend, "input": tc.input}))
				var events [][]byte
				if tc.input == longText {
					for len(events) == 0 || !isDelta(decodeEv(t, last(events))) {
						events = append(events, c.recv(t))
					}
				} else {
					events = c.next(t)
					if eventType(t, last(events)) != "response.done" {
						t.Fatalf("no pause: %s", last(events))
					}
					if !tc.parked {
						// Resume, then cancel while the next step streams.
						c.send(t, appendEv(respID(t, last(events)), "", outputsFor(t, last(events))...))
						for !isDelta(decodeEv(t, last(events))) {
							events = append(events, c.recv(t))
						}
					}
				}
				id := respID(t, events[0])
				c.send(t, refEv("response.cancel", id, ""))
				events = append(events, c.next(t)...)
				checkSeq(t, events)
				checkCancelled(t, events)
				end := decodeEv(t, last(events))
				if end.Type != "response.cancelled" || end.Response.Status != "cancelled" || end.Response.ID != id {
					t.Fatalf("ended with %s", last(events))
				}
				if end.Response.RequiredAction != nil {
					t.Fatalf("a cancelled response still requires action: %s", last(events))
				}
				if !tc.parked {
					// The message cut off mid-stream ends incomplete.
					keys := itemKeys(t, end.Response.Output)
					if k := keys[len(keys)-1]; k.Type != "message" && k.Type != "function_call" || k.Status != "incomplete" {
						t.Fatalf("last item %+v, want an incomplete one", k)
					}
				}
				// The response is gone; the connection and its lane serve on.
				c.send(t, refEv("response.cancel", id, ""))
				c.wantError(t, "response_not_found")
				c.send(t, appendEv(id, "", fco("call_x", "x")))
				c.wantError(t, "response_not_found")
				c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": tc.suspend, "input": "hello"}))
				if evs := c.next(t); eventType(t, last(evs)) != "response.completed" {
					t.Fatalf("next create: %s", last(evs))
				}
			})
		}
	})
}

// TestSuspendedTimeout: a rollout parked longer than Suspension.Timeout fails
// with client_tool_timeout; the connection serves on. Fake time.
func TestSuspendedTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, runtime.Options{Suspension: runtime.SuspensionOptions{Timeout: 5 * time.Minute, ResumeWindow: time.Minute}})
		c := p.dial(t, "Bearer alice")
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		events := c.next(t)
		id := respID(t, last(events))
		// The first step is answered in time: the timeout is per pause.
		time.Sleep(4 * time.Minute)
		c.send(t, appendEv(id, "", outputsFor(t, last(events))...))
		events = append(events, c.next(t)...)
		pause := last(events)
		if eventType(t, pause) != "response.done" {
			t.Fatalf("second step: %s", pause)
		}
		start := time.Now()
		// One of two outputs: the step still waits, and times out.
		c.send(t, appendEv(id, "", outputsFor(t, pause)[0]))
		end := recvWithin(t, c, time.Hour)
		if waited := time.Since(start); waited != 5*time.Minute {
			t.Fatalf("timed out after %v, want 5m", waited)
		}
		events = append(events, end)
		checkSeq(t, events)
		e := decodeEv(t, end)
		if e.Type != "response.failed" || e.Response.Status != "failed" || e.Response.Error == nil || e.Response.Error.Code != "client_tool_timeout" {
			t.Fatalf("ended with %s", end)
		}
		c.send(t, appendEv(id, "", outputsFor(t, pause)[1]))
		c.wantError(t, "response_not_found")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": "hello"}))
		if evs := c.next(t); eventType(t, last(evs)) != "response.completed" {
			t.Fatalf("next create: %s", last(evs))
		}
	})
}

// TestSuspendedCancelDuringSearch: a cancel while a step's search runs ends
// the search's item incomplete, with its output_item.done before the other
// items' and the response.cancelled. Both designs; fake time.
func TestSuspendedCancelDuringSearch(t *testing.T) {
	t.Parallel()
	for _, suspend := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			p := newPipeHarness(t, runtime.Options{HostedTools: []runtime.Tool{websearch.New(fakeTimeSearcher{})}})
			c := p.dial(t, "")
			steps := [][]dcall{{{"web_search", `{"query":"slow"}`}, {"read_file", `{"path":"a.go"}`}}}
			c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": suspend,
				"tools": []any{webSearchTool}, "input": script(steps)}))
			var events [][]byte
			for len(events) == 0 || eventType(t, last(events)) != "response.web_search_call.searching" {
				events = append(events, c.recv(t))
			}
			c.send(t, refEv("response.cancel", respID(t, events[0]), ""))
			events = append(events, c.next(t)...)
			checkCancelled(t, events)
			keys := itemKeys(t, decodeEv(t, last(events)).Response.Output)
			if len(keys) != 2 || keys[0].Type != "web_search_call" || keys[0].Status != "incomplete" || keys[1].Status != "completed" {
				t.Fatalf("suspend %v: output %+v", suspend, keys)
			}
			for _, raw := range events {
				if eventType(t, raw) == "response.done" {
					t.Fatalf("suspend %v: paused while the search ran: %s", suspend, raw)
				}
			}
		})
	}
}
