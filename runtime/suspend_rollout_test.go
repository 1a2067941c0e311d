package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// longScript is a 17-step agent rollout: 28 client calls (single steps,
// steps of three parallel calls) and 10 web searches, eight steps mixing
// client calls with a hosted search, the last step searching only.
// (TestSuspendedHostedOrder puts searches first.) A step of searches only
// is last: the scripted model counts a step of searches and the next step
// as one run of calls, and would repeat the next step.
func longScript() (steps [][]dcall, clientCalls int) {
	for i := range 16 {
		switch i % 4 {
		case 0:
			steps = append(steps, []dcall{{"read_file", fmt.Sprintf(`{"path":"pkg/file%d.go"}`, i)}})
		case 1:
			steps = append(steps, []dcall{
				{"grep", fmt.Sprintf(`{"pattern":"sym%d","path":"."}`, i)},
				{"list_dir", fmt.Sprintf(`{"path":"dir%d"}`, i)},
				{"read_file", fmt.Sprintf(`{"path":"x%d.go"}`, i)},
			})
		case 2:
			steps = append(steps, []dcall{
				{"read_file", fmt.Sprintf(`{"path":"doc%d.md"}`, i)},
				{"web_search", fmt.Sprintf(`{"query":"golang topic %d"}`, i)},
			})
		case 3:
			steps = append(steps, []dcall{
				{"run_tests", fmt.Sprintf(`{"pkg":"./p%d"}`, i)},
				{"apply_patch", fmt.Sprintf(`{"patch":"--- a/f%d.go\n+++ b/f%d.go"}`, i, i)},
				{"web_search", fmt.Sprintf(`{"query":"error %d | fix"}`, i)},
			})
		}
	}
	steps = append(steps, []dcall{{"web_search", `{"query":"release notes"}`}, {"web_search", `{"query":"changelog"}`}})
	for _, s := range steps {
		for _, c := range s {
			if c.name != "web_search" {
				clientCalls++
			}
		}
	}
	return steps, clientCalls
}

// itemKey is what two designs must agree on for an output item: ids differ,
// call_ids are deterministic.
type itemKey struct {
	Type, Name, CallID, Args, Text, Query, Status string
}

func itemKeys(t testing.TB, items []json.RawMessage) []itemKey {
	t.Helper()
	var out []itemKey
	for _, raw := range items {
		var it struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
			Status    string `json:"status"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
			Action *struct {
				Query string `json:"query"`
			} `json:"action"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		k := itemKey{Type: it.Type, Name: it.Name, CallID: it.CallID, Args: it.Arguments, Status: it.Status}
		for _, c := range it.Content {
			k.Text += c.Text
		}
		if it.Action != nil {
			k.Query = it.Action.Query
		}
		out = append(out, k)
	}
	return out
}

// inCallOrder is keys with each call id replaced by "#n", n its call's
// place among the calls of keys, failing t when two calls share an id.
// One rollout served in two designs, or through two servers, runs in
// responses of its own, each of which draws its own ids (unique, as a real
// server's are): the ids differ, while which calls there are, in what
// order, must not.
func inCallOrder(t testing.TB, keys []itemKey) []itemKey {
	t.Helper()
	out := slices.Clone(keys)
	seen := map[string]string{}
	for i := range out {
		out[i].CallID = callOrdinal(t, seen, out[i].CallID)
	}
	return out
}

// callOrdinal is "#n" for the nth call id of an output seen, "" for no id;
// a call id seen before fails t.
func callOrdinal(t testing.TB, seen map[string]string, id string) string {
	t.Helper()
	if id == "" {
		return ""
	}
	if _, dup := seen[id]; dup {
		t.Errorf("two calls have the call id %s", id)
	}
	seen[id] = fmt.Sprintf("#%d", len(seen)+1)
	return seen[id]
}

// TestSuspendedLongRollout runs a whole agent rollout of 28 client calls and
// 10 hosted searches as one suspended response over a real WebSocket, then
// the same rollout as cached-state turns, and compares them.
func TestSuspendedLongRollout(t *testing.T) {
	t.Parallel()
	steps, clientCalls := longScript()
	if clientCalls < 25 {
		t.Fatalf("script has %d client calls", clientCalls)
	}
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{searchTool()}}, w)
		body := func() map[string]any {
			return map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool},
				"input": script(steps)}
		}

		c := h.dial(t, nil)
		events, pauses := driveSuspended(t, c, body())
		// Every step with a client call pauses once; the all-hosted step does not.
		if want := len(steps) - 1; pauses != want {
			t.Fatalf("%d pauses, want %d", pauses, want)
		}
		last := events[len(events)-1]
		if eventType(t, last) != "response.completed" {
			t.Fatalf("rollout ended with %s", last)
		}
		// One response: gapless sequence numbers and output indexes across every
		// pause, and the completed output is every output_item.done in order.
		checkStreamInvariants(t, events)
		id := respID(t, events[0])
		var doneItems []json.RawMessage
		var seenCalls []string
		var addedIDs []string // by output index
		prevEnd := 0          // where the last pause's items end
		lastPause := -1       // the output_offset of the last pause
		prevUsage := -1
		for _, raw := range events {
			e := decodeEv(t, raw)
			if e.Response != nil && e.Response.ID != id {
				t.Fatalf("%s of response %s inside %s", e.Type, e.Response.ID, id)
			}
			switch e.Type {
			case "response.output_item.added":
				addedIDs = append(addedIDs, itemID(t, e.Item))
			case "response.in_progress":
				// The in_progress that ends a pause shows the same step.
				if lastPause >= 0 && (e.Response.OutputOffset == nil || *e.Response.OutputOffset != lastPause) {
					t.Fatalf("in_progress after the pause at output %d has output_offset %v", lastPause, e.Response.OutputOffset)
				}
			case "response.output_item.done":
				doneItems = append(doneItems, e.Item)
			case "response.done":
				if e.Response.Status != "requires_action" {
					t.Fatalf("pause with status %s", e.Response.Status)
				}
				// Each pause asks for the calls of its step only, and its output
				// is the rollout so far (a search of the step may still run).
				for _, pc := range e.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
					if slices.Contains(seenCalls, pc.CallID) {
						t.Fatalf("call %s asked for twice", pc.CallID)
					}
					seenCalls = append(seenCalls, pc.CallID)
				}
				// Its output is its step's items only (a search of the step may
				// still run), from output_offset: it does not grow with the rollout.
				off := e.Response.OutputOffset
				if off == nil || *off < prevEnd || *off+len(e.Response.Output) != len(addedIDs) {
					t.Fatalf("pause output_offset %v with %d items; %d added so far, the last pause ended at %d",
						off, len(e.Response.Output), len(addedIDs), prevEnd)
				}
				for i, it := range e.Response.Output {
					if id := itemID(t, it); id != addedIDs[*off+i] {
						t.Fatalf("pause output[%d] is %s, output_index %d was %s", i, id, *off+i, addedIDs[*off+i])
					}
				}
				lastPause, prevEnd = *off, len(addedIDs)
				if e.Response.Usage != nil {
					if e.Response.Usage.InputTokens <= prevUsage {
						t.Fatalf("usage did not grow across a step: %+v", e.Response.Usage)
					}
					prevUsage = e.Response.Usage.InputTokens
				}
			}
		}
		if len(seenCalls) != clientCalls {
			t.Fatalf("pauses asked for %d calls, the script makes %d", len(seenCalls), clientCalls)
		}
		final := decodeEv(t, last).Response
		keys := itemKeys(t, final.Output)
		var want []itemKey
		for _, step := range steps {
			for _, c := range step {
				if c.name == "web_search" {
					var q struct{ Query string }
					json.Unmarshal([]byte(c.args), &q)
					want = append(want, itemKey{Type: "web_search_call", Query: q.Query, Status: "completed"})
				} else {
					want = append(want, itemKey{Type: "function_call", Name: c.name, Args: c.args, Status: "completed"})
				}
			}
		}
		want = append(want, itemKey{Type: "message", Status: "completed"})
		if len(keys) != len(want) {
			t.Fatalf("output has %d items, want %d", len(keys), len(want))
		}
		for i := range want {
			got := keys[i]
			got.CallID, got.Text = "", ""
			if got != want[i] {
				t.Fatalf("output[%d] = %+v, want %+v", i, keys[i], want[i])
			}
		}
		answer := keys[len(keys)-1].Text
		if !strings.Contains(answer, `searching for "release notes" found`) || !strings.Contains(answer, `searching for "changelog" found`) {
			t.Fatalf("final answer does not read the last searches: %q", answer)
		}

		// Usage accumulates over every step: the same totals as the turns below,
		// whose responses each count their own steps.
		usage := final.Usage
		if usage == nil || usage.OutputTokens == 0 || usage.TotalTokens != usage.InputTokens+usage.OutputTokens {
			t.Fatalf("usage %+v", usage)
		}

		// The same rollout in cached-state turns: each turn a create continuing
		// from the previous response with the outputs of its open calls.
		tc := h.dial(t, nil)
		var turnItems []json.RawMessage
		var turnIn, turnOut, turns int
		prev := ""
		var input any = script(steps)
		for {
			b := body()
			b["input"] = input
			if prev != "" {
				b["previous_response_id"] = prev
			}
			tc.send(t, create(b))
			evs := tc.untilTerminal(t)
			checkStreamInvariants(t, evs)
			end := decodeEv(t, evs[len(evs)-1])
			if end.Type != "response.completed" {
				t.Fatalf("turn %d ended with %s", turns, evs[len(evs)-1])
			}
			turns++
			turnIn += end.Response.Usage.InputTokens
			turnOut += end.Response.Usage.OutputTokens
			turnItems = append(turnItems, end.Response.Output...)
			var outs []any
			for _, k := range itemKeys(t, end.Response.Output) {
				if k.Type == "function_call" {
					outs = append(outs, fco(k.CallID, toolOutput(k.Name, k.Args)))
				}
			}
			if len(outs) == 0 {
				break
			}
			prev, input = end.Response.ID, outs
		}
		if turns != pauses+1 {
			t.Fatalf("%d turns, %d pauses", turns, pauses)
		}
		// The turns' responses drew other call ids than the suspended one.
		keys = inCallOrder(t, keys)
		if got := inCallOrder(t, itemKeys(t, turnItems)); !slices.Equal(got, keys) {
			for i := range min(len(got), len(keys)) {
				if got[i] != keys[i] {
					t.Errorf("item %d: turns %+v, suspended %+v", i, got[i], keys[i])
					break
				}
			}
			t.Fatalf("turns gave %d items, suspended %d", len(got), len(keys))
		}
		if turnIn != usage.InputTokens || turnOut != usage.OutputTokens {
			t.Fatalf("usage: suspended in %d out %d, turns in %d out %d", usage.InputTokens, usage.OutputTokens, turnIn, turnOut)
		}
	})
}

// TestSuspendedSteering sends user messages with tool outputs: they join the
// context (not the output) and steer what the model does next.
func TestSuspendedSteering(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{Renderer: renderer(t)}, w)
		c := h.dial(t, nil)
		steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"never_called", `{}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps)}))
		evs := c.next(t)
		events := evs
		done := evs[len(evs)-1]
		id := respID(t, done)

		// A steering message with a directive becomes the newest script: the
		// model follows it instead of the original second step.
		c.send(t, appendEv(id, "", append(outputsFor(t, done), userMsg("Stop reading files.\ncall: lookup {\"k\":\"license\"}"))...))
		evs = c.next(t)
		events = append(events, evs...)
		done = evs[len(evs)-1]
		calls := decodeEv(t, done).Response.RequiredAction
		if calls == nil || len(calls.SubmitToolOutputs.ToolCalls) != 1 || calls.SubmitToolOutputs.ToolCalls[0].Name != "lookup" {
			t.Fatalf("after steering, paused on %s", done)
		}

		// A plain steering message after the last output: the model answers it.
		c.send(t, appendEv(id, "", append(outputsFor(t, done), userMsg("Now summarize in one line."))...))
		evs = c.next(t)
		events = append(events, evs...)
		checkStreamInvariants(t, events)
		end := decodeEv(t, evs[len(evs)-1])
		if end.Type != "response.completed" {
			t.Fatalf("ended with %s", evs[len(evs)-1])
		}
		keys := itemKeys(t, end.Response.Output)
		var types []string
		for _, k := range keys {
			types = append(types, k.Type+":"+k.Name)
		}
		if want := []string{"function_call:read_file", "function_call:lookup", "message:"}; !slices.Equal(types, want) {
			t.Fatalf("output %v, want %v (steering messages are context, not output)", types, want)
		}
		if got, want := keys[2].Text, `You said: "Now summarize in one line."`; got != want {
			t.Fatalf("answer %q, want %q", got, want)
		}

		// A steering message that is not a user message is refused, and the
		// refused append delivers nothing.
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "input": script(steps[:1])}))
		done = last(c.next(t))
		id = respID(t, done)
		c.send(t, appendEv(id, "", append(outputsFor(t, done), map[string]any{"type": "message", "role": "assistant", "content": "I am the model."})...))
		c.wantError(t, "invalid_value")
		c.send(t, appendEv(id, "", outputsFor(t, done)...))
		if end := last(c.next(t)); eventType(t, end) != "response.completed" {
			t.Fatalf("ended with %s", end)
		}
	})
}

func last(evs [][]byte) []byte { return evs[len(evs)-1] }

// slowSearcher delays queries that mention "slow", so that searches of one
// step finish in another order than the model sampled them.
type slowSearcher struct{ stubSearcher }

func (s slowSearcher) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	if strings.Contains(query, "slow") {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.stubSearcher.Search(ctx, query, limit)
}

// TestSuspendedHostedOrder: searches finishing out of order, before and
// after client calls of the same step, still give output_item.done events in
// output_index order, and the pause after them; the pause lists the client
// calls in output order. Both designs.
func TestSuspendedHostedOrder(t *testing.T) {
	t.Parallel()
	forWires(t, func(t *testing.T, w wire) {
		h := newHarnessOn(t, runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{websearch.New(slowSearcher{})}}, w)
		steps := [][]dcall{
			{{"web_search", `{"query":"slow one"}`}, {"read_file", `{"path":"a.go"}`}, {"web_search", `{"query":"fast two"}`},
				{"grep", `{"pattern":"x"}`}, {"list_dir", `{"path":"."}`}},
			{{"read_file", `{"path":"b.go"}`}, {"web_search", `{"query":"slow three"}`}},
		}
		body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": script(steps)}
		for _, suspend := range []bool{true, false} {
			t.Run(fmt.Sprintf("suspend=%v", suspend), func(t *testing.T) {
				t.Parallel()
				c := h.dial(t, nil)
				b := maps.Clone(body)
				b["suspend"] = suspend
				c.send(t, create(b))
				events := c.next(t)
				checkStreamInvariantsUntil(t, events)
				done := last(events)
				e := decodeEv(t, done)
				var calls []itemKey
				if suspend {
					if e.Type != "response.done" {
						t.Fatalf("step 1 ended with %s", done)
					}
					for _, pc := range e.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
						calls = append(calls, itemKey{Name: pc.Name, CallID: pc.CallID, Args: pc.Arguments})
					}
				} else {
					if e.Type != "response.completed" {
						t.Fatalf("turn 1 ended with %s", done)
					}
					for _, k := range itemKeys(t, e.Response.Output) {
						if k.Type == "function_call" {
							calls = append(calls, itemKey{Name: k.Name, CallID: k.CallID, Args: k.Args})
						}
					}
				}
				// The pause (or the turn's end) comes after every item of the
				// step is done: the searches are complete in its output.
				var names []string
				for _, k := range itemKeys(t, e.Response.Output) {
					if k.Status != "completed" {
						t.Fatalf("step 1 ended with an item %+v", k)
					}
					names = append(names, k.Name)
				}
				if want := []string{"", "read_file", "", "grep", "list_dir"}; !slices.Equal(names, want) {
					t.Fatalf("step 1 output %v, want %v", names, want)
				}
				if len(calls) != 3 || calls[0].Name != "read_file" || calls[1].Name != "grep" || calls[2].Name != "list_dir" {
					t.Fatalf("pending calls %+v, want read_file, grep, list_dir in output order", calls)
				}
				var outs []any
				for _, k := range calls {
					outs = append(outs, fco(k.CallID, toolOutput(k.Name, k.Args)))
				}
				if suspend {
					c.send(t, appendEv(e.Response.ID, "", outs...))
					for eventType(t, last(events)) == "response.done" {
						more := c.next(t)
						events = append(events, more...)
						if d := last(more); eventType(t, d) == "response.done" {
							c.send(t, appendEv(e.Response.ID, "", outputsFor(t, d)...))
						}
					}
					checkStreamInvariants(t, events)
				} else {
					b := maps.Clone(body)
					b["previous_response_id"], b["input"] = e.Response.ID, outs
					c.send(t, create(b))
					evs := c.untilTerminal(t)
					checkStreamInvariants(t, evs)
				}
			})
		}
	})
}

// checkStreamInvariantsUntil checks a stream cut at a pause, by checking it
// as if the pause were its end.
func checkStreamInvariantsUntil(t *testing.T, events [][]byte) {
	t.Helper()
	if eventType(t, last(events)) != "response.done" {
		checkStreamInvariants(t, events)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(last(events), &m); err != nil {
		t.Fatal(err)
	}
	m["type"] = "response.completed"
	b, _ := json.Marshal(m)
	checkStreamInvariants(t, append(slices.Clip(events[:len(events)-1]), b))
}

// itemID is the id of an item in JSON.
func itemID(tb testing.TB, raw json.RawMessage) string {
	tb.Helper()
	var it struct{ ID string }
	if err := json.Unmarshal(raw, &it); err != nil || it.ID == "" {
		tb.Fatalf("item without an id: %s", raw)
	}
	return it.ID
}
