package runtime_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// steerEv is response.steer of text into the response id.
func steerEv(id string, input any) map[string]any {
	return map[string]any{"type": "response.steer", "previous_response_id": id, "input": input}
}

// steerAnswer is what the tests read of a steer's answer.
type steerAnswer struct {
	Type          string `json:"type"`
	Seq           int    `json:"sequence_number"`
	StreamID      string `json:"stream_id"`
	Reason        string `json:"reason"`
	RequiredInput []struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	} `json:"required_input"`
	Steer struct {
		ID                 string          `json:"id"`
		PreviousResponseID string          `json:"previous_response_id"`
		Input              json.RawMessage `json:"input"`
	} `json:"steer"`
	Error struct{ Type, Code, Message string } `json:"error"`
}

func decodeSteer(t *testing.T, b []byte) steerAnswer {
	t.Helper()
	var a steerAnswer
	if err := json.Unmarshal(b, &a); err != nil || !strings.HasPrefix(a.Type, "response.steer.") {
		t.Fatalf("not a steer answer: %s", b)
	}
	return a
}

// steerModel is the scripted model at 100 tokens a second after 10 s to its
// first token: time for a steer to come while a step runs.
func steerModel(t *testing.T) runtime.Options {
	r := renderer(t)
	return runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		"tether-scripted": sampler.NewScripted(r, sampler.Timing{TTFT: 10 * time.Second, TPS: 100}),
	}}
}

// storedInput are the texts (or call ids) of a stored response's input
// items, oldest first.
func storedInput(t *testing.T, p *pipeHarness, id string) []string {
	t.Helper()
	resp, err := p.client.Get("http://tether.test/v1/responses/" + id + "/input_items?order=asc&limit=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var list struct {
		Data []struct {
			Type    string `json:"type"`
			CallID  string `json:"call_id"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("input_items: %s", b)
	}
	var out []string
	for _, it := range list.Data {
		switch {
		case it.CallID != "":
			out = append(out, it.Type+" "+it.CallID)
		case len(it.Content) > 0:
			out = append(out, it.Content[0].Text)
		}
	}
	return out
}

// TestSteerFinalAnswer: a steer into a response writing its final answer
// is accepted at once (on the response's lane, in its sequence). A
// cached-state turn then ends at the step's end, incomplete ("steered"),
// and its successor begins on the lane, continuing it with the steering as
// its input, and answers it (OpenAI's shape). A suspended rollout, one
// response by design, takes the steering in: the model takes another step
// in the same response.
func TestSteerFinalAnswer(t *testing.T) {
	for _, suspend := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p := newPipeHarness(t, steerModel(t))
			c := p.dial(t, "")
			c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": suspend, "stream_id": "a", "input": "Write a summary."}))
			all := [][]byte{c.recv(t), c.recv(t)} // created, in_progress
			id := respID(t, all[0])
			c.send(t, steerEv(id, "Focus on the parser."))
			all = append(all, c.recv(t))
			acc := decodeSteer(t, all[2])
			if acc.Type != "response.steer.accepted" || !strings.HasPrefix(acc.Steer.ID, "steer_") || acc.Steer.PreviousResponseID != id || acc.StreamID != "a" || acc.Seq != 2 {
				t.Fatalf("suspend %v: %+v", suspend, acc)
			}
			events := c.untilTerminal(t)
			end := decodeEv(t, last(events))
			checkSeq(t, append(all, events...))
			if suspend {
				if end.Type != "response.completed" || len(end.Response.Output) != 2 {
					t.Fatalf("suspended: %s", last(events))
				}
				for i, want := range []string{`You said: \"Write a summary.\"`, `You said: \"Focus on the parser.\"`} {
					if !strings.Contains(string(end.Response.Output[i]), want) {
						t.Errorf("suspended: output %d %s, want %s", i, end.Response.Output[i], want)
					}
				}
				return
			}
			if end.Type != "response.incomplete" || !strings.Contains(string(last(events)), `"incomplete_details":{"reason":"steered"}`) ||
				len(end.Response.Output) != 1 || !strings.Contains(string(end.Response.Output[0]), `You said: \"Write a summary.\"`) {
				t.Fatalf("the steered turn ended %s", last(events))
			}
			next := c.untilTerminal(t)
			checkSeq(t, next)
			begun, done := decodeEv(t, next[0]), decodeEv(t, last(next))
			if begun.Type != "response.created" || begun.StreamID != "a" || begun.Response.ID == id ||
				!strings.Contains(string(next[0]), `"previous_response_id":"`+id+`"`) {
				t.Fatalf("the successor began %s", next[0])
			}
			if done.Type != "response.completed" || len(done.Response.Output) != 1 ||
				!strings.Contains(string(done.Response.Output[0]), `You said: \"Focus on the parser.\"`) {
				t.Fatalf("the successor ended %s", last(next))
			}
			if got := storedInput(t, p, begun.Response.ID); len(got) != 1 || got[0] != "Focus on the parser." {
				t.Errorf("the successor's input items %q, want the steering", got)
			}
		})
	}
}

// TestSteerPending: a steer into a step that ends on a call its client
// answers is pending just before the pause (suspended: response.done) or
// after the completion (cached-state turn), with the output still
// required; a steer into a parked rollout is accepted and pending at once.
// Its input then joins the context after the outputs: appended, or put
// after them in the create that continues the turn.
func TestSteerPending(t *testing.T) {
	tools := []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, steerModel(t))
		c := p.dial(t, "")

		// Cached-state turn: pending after response.completed.
		c.send(t, create(map[string]any{"model": "tether-scripted", "tools": tools, "input": "Look it up.\ncall: lookup {\"q\":\"x\"}"}))
		id := respID(t, c.recv(t))
		c.recv(t)
		c.send(t, steerEv(id, []any{map[string]any{"type": "message", "role": "user", "content": "Only the parser."}}))
		if a := decodeSteer(t, c.recv(t)); a.Type != "response.steer.accepted" {
			t.Fatalf("%+v", a)
		}
		events := c.untilTerminal(t)
		if eventType(t, last(events)) != "response.completed" {
			t.Fatalf("%s", last(events))
		}
		pend := decodeSteer(t, c.recv(t))
		if pend.Type != "response.steer.pending" || pend.Reason != "waiting_for_required_input" || len(pend.RequiredInput) != 1 ||
			pend.RequiredInput[0].Type != "function_call_output" || pend.RequiredInput[0].Name != "lookup" {
			t.Fatalf("after the completion: %+v", pend)
		}
		callID := pend.RequiredInput[0].CallID
		c.send(t, create(map[string]any{"model": "tether-scripted", "tools": tools, "previous_response_id": id,
			"input": []any{fco(callID, "found it")}}))
		next := respID(t, c.untilTerminal(t)[0])
		if got := strings.Join(storedInput(t, p, next), " | "); got != "function_call_output "+callID+" | Only the parser." {
			t.Errorf("the continuation's input: %s", got)
		}

		// Suspended, steered while its step runs: pending after response.done.
		c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": tools, "input": "Look it up.\ncall: lookup {\"q\":\"y\"}"}))
		sid := respID(t, c.recv(t))
		c.recv(t)
		c.send(t, steerEv(sid, "Only the lexer."))
		decodeSteer(t, c.recv(t))
		pause := c.next(t)
		if len(pause) < 2 || eventType(t, last(pause)) != "response.done" {
			t.Fatalf("%s", last(pause))
		}
		pend = decodeSteer(t, pause[len(pause)-2])
		if pend.Type != "response.steer.pending" || len(pend.RequiredInput) != 1 {
			t.Fatalf("before the pause: %+v", pend)
		}
		// Parked: accepted and pending at once.
		c.send(t, steerEv(sid, "And the tests."))
		if a, b := decodeSteer(t, c.recv(t)), decodeSteer(t, c.recv(t)); a.Type != "response.steer.accepted" || b.Type != "response.steer.pending" || b.Steer.ID != a.Steer.ID || b.RequiredInput[0].CallID != pend.RequiredInput[0].CallID {
			t.Fatalf("parked: %+v then %+v", a, b)
		}
		c.send(t, appendEv(sid, "", outputsFor(t, last(pause))...))
		for {
			evs := c.next(t)
			e := last(evs)
			if eventType(t, e) != "response.done" {
				if eventType(t, e) != "response.completed" {
					t.Fatalf("%s", e)
				}
				break
			}
			c.send(t, appendEv(sid, "", outputsFor(t, e)...))
		}
		items := storedInput(t, p, sid)
		if len(items) < 4 || items[2] != "Only the lexer." || items[3] != "And the tests." {
			t.Errorf("the suspended rollout's context: %q (want the steering after the first output)", items)
		}
	})
}

// TestSteerFailures: each steer the server cannot take is answered
// response.steer.failed with its code and the input given back, and the
// connection goes on.
func TestSteerFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeHarness(t, steerModel(t))
		c := p.dial(t, "")
		fail := func(ev map[string]any, code string) steerAnswer {
			t.Helper()
			c.send(t, ev)
			a := decodeSteer(t, c.recv(t))
			if a.Type != "response.steer.failed" || a.Error.Code != code || a.Error.Type != "invalid_request_error" || a.Steer.ID != "" {
				t.Fatalf("%v: %+v, want failed %s", ev, a, code)
			}
			return a
		}
		if a := fail(steerEv("resp_nope", "hi"), "response_not_found"); string(a.Steer.Input) != `"hi"` || a.Steer.PreviousResponseID != "resp_nope" {
			t.Errorf("the input given back: %+v", a)
		}
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Write a summary."}))
		done := c.untilTerminal(t)
		id := respID(t, done[0])
		fail(steerEv(id, "too late"), "response_already_completed")
		fail(steerEv("", "hi"), "invalid_input")
		fail(map[string]any{"type": "response.steer", "previous_response_id": id}, "invalid_input")
		fail(steerEv(id, []any{}), "invalid_input")
		fail(steerEv(id, []any{map[string]any{"role": "assistant", "content": "I decide"}}), "invalid_input")
		fail(steerEv(id, []any{map[string]any{"type": "function_call_output", "call_id": "c", "output": "x"}}), "invalid_input")
		fail(steerEv(id, []any{map[string]any{"role": "user", "content": "x", "status": "completed"}}), "invalid_input")
		withLane := steerEv(id, "hi")
		withLane["stream_id"] = "a"
		fail(withLane, "invalid_input")

		// Too many waiting: the 17th.
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Write a summary."}))
		id = respID(t, c.recv(t))
		c.recv(t)
		for range 16 {
			c.send(t, steerEv(id, "more"))
			if a := decodeSteer(t, c.recv(t)); a.Type != "response.steer.accepted" {
				t.Fatalf("%+v", a)
			}
		}
		fail(steerEv(id, "one too many"), "too_many_pending_steers")
		c.untilTerminal(t) // steered
		c.untilTerminal(t) // its successor, with the 16

		// A conversation's response takes none.
		resp, err := p.client.Post("http://tether.test/v1/conversations", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		var conv struct{ ID string }
		json.NewDecoder(resp.Body).Decode(&conv)
		resp.Body.Close()
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Write a summary.", "conversation": conv.ID}))
		id = respID(t, c.recv(t))
		c.recv(t)
		fail(steerEv(id, "hi"), "steering_not_supported")
		c.untilTerminal(t)

		// Nor does one that compacts its context.
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Write a summary.",
			"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 1000}}}))
		id = respID(t, c.recv(t))
		c.recv(t)
		fail(steerEv(id, "hi"), "steering_not_supported")
		c.untilTerminal(t)

		// Nor does a multi-agent one, as OpenAI's beta has it.
		c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Write a summary.", "multi_agent": map[string]any{"enabled": true}}))
		id = respID(t, c.recv(t))
		c.recv(t)
		fail(steerEv(id, "hi"), "steering_not_supported")
		c.untilTerminal(t)
	})
}

// TestSteerDurablePause: a durable rollout (Options.Checkpoints) takes a
// steer while its step runs (its pause's checkpoint then holds it), not at
// its pause, whose checkpoint would not: steering_not_supported, and
// response.append carries steering there.
func TestSteerDurablePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := steerModel(t)
		opts.Checkpoints = runtime.NewMemoryCheckpoints()
		p := newPipeHarness(t, opts)
		c := p.dial(t, "")
		tools := []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": tools, "input": "Look it up.\ncall: lookup {\"q\":\"y\"}"}))
		id := respID(t, c.recv(t))
		c.recv(t)
		c.send(t, steerEv(id, "While it runs."))
		if a := decodeSteer(t, c.recv(t)); a.Type != "response.steer.accepted" {
			t.Fatalf("%+v", a)
		}
		pause := c.next(t)
		if eventType(t, last(pause)) != "response.done" || decodeSteer(t, pause[len(pause)-2]).Type != "response.steer.pending" {
			t.Fatalf("the pause: %s", pause[len(pause)-2:])
		}
		c.send(t, steerEv(id, "At the pause."))
		if a := decodeSteer(t, c.recv(t)); a.Type != "response.steer.failed" || a.Error.Code != "steering_not_supported" {
			t.Fatalf("at a durable pause: %+v", a)
		}
		c.send(t, appendEv(id, "", append(outputsFor(t, last(pause)), userMsg("With the outputs."))...))
		for {
			evs := c.next(t)
			if e := last(evs); eventType(t, e) != "response.done" {
				if eventType(t, e) != "response.completed" {
					t.Fatalf("%s", e)
				}
				break
			} else {
				c.send(t, appendEv(id, "", outputsFor(t, e)...))
			}
		}
	})
}
