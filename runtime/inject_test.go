package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestInjectSDK: openai-go's beta WebSocket client (Beta.Responses.Connect)
// answers a suspended rollout's calls with response.inject: each inject is
// acknowledged in the response's sequence (response.inject.created, read
// as the SDK's typed event), before the step it resumes, and the rollout
// runs to its end; a partial inject is acknowledged and the rollout waits
// for the rest. An inject into the ended response fails
// response_already_completed, and into an unknown one, or one parked on
// another connection of the same key, response_not_found, each with its
// input given back; an inject of 16,385 items is a plain
// error (array_above_max_length), after which the connection still serves.
func TestInjectSDK(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := betaConnect(ctx, t, h)

	send := func(v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if err := conn.SendRaw(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	next := func() openai.BetaResponsesServerEventUnion {
		t.Helper()
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	output := func(callID, text string) openai.BetaResponseInputItemUnionParam {
		return openai.BetaResponseInputItemUnionParam{OfFunctionCallOutput: &openai.BetaResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(callID), Output: openai.BetaResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(text)}}}
	}
	inject := func(id string, items ...openai.BetaResponseInputItemUnionParam) {
		t.Helper()
		if err := conn.Send(ctx, openai.BetaResponsesClientEventUnionParam{OfResponseInject: &openai.BetaResponseInjectEventParam{ResponseID: id, Input: items}}); err != nil {
			t.Fatal(err)
		}
	}

	send(create(map[string]any{"model": sdkModel, "store": false, "suspend": true,
		"input": "call: read_file {\"path\":\"a.go\"} | list_dir {}\ncall: run_tests {}"}))
	var id string
	var calls []string
	seq := -1
	step := func() string { // reads to the next pause or the end: its type
		t.Helper()
		calls = nil
		for {
			ev := next()
			var raw struct {
				Seq      int `json:"sequence_number"`
				Response struct {
					ID             string `json:"id"`
					RequiredAction struct {
						SubmitToolOutputs struct {
							ToolCalls []struct {
								CallID string `json:"call_id"`
							} `json:"tool_calls"`
						} `json:"submit_tool_outputs"`
					} `json:"required_action"`
				} `json:"response"`
			}
			json.Unmarshal([]byte(ev.RawJSON()), &raw)
			if raw.Seq != seq+1 {
				t.Fatalf("event %s has sequence_number %d after %d", ev.Type, raw.Seq, seq)
			}
			seq = raw.Seq
			switch ev.Type {
			case "response.created":
				id = raw.Response.ID
			case "response.done":
				for _, c := range raw.Response.RequiredAction.SubmitToolOutputs.ToolCalls {
					calls = append(calls, c.CallID)
				}
				return ev.Type
			case "response.completed", "response.failed", "error":
				return ev.Type
			}
		}
	}
	created := func() {
		t.Helper()
		ev := next()
		c := ev.AsBetaResponseInjectCreatedEvent()
		if ev.Type != "response.inject.created" || c.ResponseID != id || int(c.SequenceNumber) != seq+1 {
			t.Fatalf("after an inject: %s, want response.inject.created numbered %d", ev.RawJSON(), seq+1)
		}
		seq++
	}

	if typ := step(); typ != "response.done" || len(calls) != 2 {
		t.Fatalf("the rollout paused with %s on %v, want two calls", typ, calls)
	}
	inject(id, output(calls[0], "package a")) // one of two: taken, and the rollout waits
	created()
	inject(id, output(calls[1], "a.go"))
	created()
	if typ := step(); typ != "response.done" || len(calls) != 1 {
		t.Fatalf("the rollout went on to %s on %v, want its second pause", typ, calls)
	}
	inject(id, output(calls[0], "ok"))
	created()
	if typ := step(); typ != "response.completed" {
		t.Fatalf("the rollout ended with %s", typ)
	}

	failed := func(id, code string) {
		t.Helper()
		inject(id, output("call_x", "late"))
		ev := next()
		f := ev.AsBetaResponseInjectFailedEvent()
		if ev.Type != "response.inject.failed" || f.ResponseID != id || f.Error.Code != code || len(f.Input) != 1 || f.Input[0].CallID != "call_x" {
			t.Fatalf("an inject into %s: %s, want response.inject.failed %s with the input", id, ev.RawJSON(), code)
		}
	}
	failed(id, protocol.CodeResponseAlreadyCompleted)
	failed("resp_unknown", protocol.CodeResponseNotFound)
	// A rollout of the same key parked on another connection is that
	// connection's to answer.
	other := h.dial(t, http.Header{"Authorization": {"Bearer test"}})
	other.send(t, create(map[string]any{"model": sdkModel, "store": false, "suspend": true, "input": "call: run_tests {}"}))
	failed(respID(t, last(other.next(t))), protocol.CodeResponseNotFound)

	many := make([]map[string]any, protocol.MaxInjectItems+1)
	for i := range many {
		many[i] = map[string]any{"type": "function_call_output", "call_id": "call_x", "output": "x"}
	}
	send(map[string]any{"type": "response.inject", "response_id": id, "input": many})
	if ev := next(); ev.Type != "error" || !strings.Contains(ev.RawJSON(), `"array_above_max_length"`) {
		t.Fatalf("an inject of %d items: %.200s, want an error array_above_max_length", len(many), ev.RawJSON())
	}
	failed("resp_unknown", protocol.CodeResponseNotFound) // the connection still serves
}

// TestInjectWakes: an inject naming a hibernated rollout wakes it from its
// journal, as an append does, and is acknowledged in the response's
// sequence (response.inject.created); the rollout goes on to its next
// pause. One naming a rollout no server has fails response_not_found, the
// input given back. Fake time, in-memory connections.
func TestInjectWakes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := hibernatingServer(t, runtime.NewMemoryCheckpoints(), nil)
		c := a.dial(t, "Bearer alice")
		c.send(t, create(durableBody()))
		pause := last(c.next(t))
		id := respID(t, pause)
		time.Sleep(2 * time.Minute) // hibernated
		synctest.Wait()

		ev := appendEv(id, "", outputsFor(t, pause)...)
		ev["type"] = "response.inject"
		c.send(t, ev)
		got := c.next(t)
		ack := decodeEv(t, got[0])
		if ack.Type != "response.inject.created" || *ack.Seq != *decodeEv(t, pause).Seq+1 {
			t.Fatalf("the woken rollout's first event: %s, want response.inject.created after the pause", got[0])
		}
		if end := last(got); eventType(t, end) != "response.done" {
			t.Fatalf("the woken rollout went on to %s, want its next pause", end)
		}
		for i, f := range got {
			if seq := *decodeEv(t, f).Seq; seq != *decodeEv(t, pause).Seq+1+i {
				t.Fatalf("the woken rollout's event %d has sequence_number %d", i, seq)
			}
		}

		ev["response_id"], ev["stream_id"] = "resp_gone", "other" // its own lane: this one follows the rollout parked on it
		c.send(t, ev)
		f := c.recv(t)
		if eventType(t, f) != "response.inject.failed" || !bytes.Contains(f, []byte(`"response_not_found"`)) || !bytes.Contains(f, []byte(`"function_call_output"`)) {
			t.Fatalf("an inject naming no rollout: %s, want response.inject.failed response_not_found with the input", f)
		}
	})
}

// TestMultiAgentMalformed: a malformed multi_agent is invalid, and one
// that contradicts a suspended rollout ("suspend": false) is refused, over
// HTTP and over WebSocket, as is /responses/compact with one; one left
// disabled is served as any request.
func TestMultiAgentMalformed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	body := func(ma any) map[string]any {
		return map[string]any{"model": sdkModel, "input": "hi", "multi_agent": ma}
	}
	for _, c := range []struct {
		body       map[string]any
		status     int
		code, want string
	}{
		{body(map[string]any{"max_concurrent_subagents": 2}), 400, protocol.CodeMissingRequired, "multi_agent.enabled"},
		{body(map[string]any{"enabled": true, "max_concurrent_subagents": 0}), 400, protocol.CodeInvalidValue, "multi_agent.max_concurrent_subagents"},
		{map[string]any{"model": sdkModel, "input": "hi", "suspend": false, "multi_agent": map[string]any{"enabled": true}}, 400, protocol.CodeInvalidValue, "suspend"},
		{body(map[string]any{"enabled": false}), 200, "", ""},
		{body(map[string]any{"enabled": true, "max_concurrent_subagents": 2}), 200, "", ""},
	} {
		status, resp := h.post(t, "/responses", c.body)
		if status != c.status || c.code != "" && (!bytes.Contains(resp, []byte(`"code":"`+c.code+`"`)) || !bytes.Contains(resp, []byte(`"param":"`+c.want+`"`))) {
			t.Errorf("%v over HTTP: %d %.300s, want %d %s on %s", c.body, status, resp, c.status, c.code, c.want)
		}
	}
	// Compaction on request is not the beta's: it compacts itself.
	status, resp := h.post(t, "/responses/compact", map[string]any{"model": sdkModel, "input": "hi", "multi_agent": map[string]any{"enabled": true}})
	if status != 400 || !bytes.Contains(resp, []byte(`"code":"unsupported_parameter"`)) || !bytes.Contains(resp, []byte(`"param":"multi_agent"`)) {
		t.Errorf("/responses/compact with multi_agent: %d %.300s, want 400 unsupported_parameter on multi_agent", status, resp)
	}
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": sdkModel, "input": "hi", "suspend": false, "multi_agent": map[string]any{"enabled": true}}))
	if f := c.recv(t); eventType(t, f) != "error" || !bytes.Contains(f, []byte(`"param":"suspend"`)) {
		t.Fatalf("multi_agent with suspend false over WebSocket: %s, want an invalid_value error on suspend", f)
	}
}

// betaConnect opens openai-go's beta WebSocket connection to h, closed
// when the test ends.
func betaConnect(ctx context.Context, t *testing.T, h *harness) *openai.BetaResponseConnection {
	t.Helper()
	client := sdkClient(t, h)
	conn, err := client.Beta.Responses.Connect(ctx, openai.BetaResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// betaScript is a rollout of three steps, two calls in the second, for
// the multi-agent beta's waiting response.
var betaScript = script([][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}})

// TestMultiAgentWaits: openai-go's beta WebSocket client
// (Beta.Responses.Connect) creates a response with multi_agent enabled,
// whose agent calls client tools: the response stays in_progress (no
// response.done, no requires_action in any event), each call is told by
// its output_item.done, and the client answers each at once with
// response.inject, which may come before the agent parks on it (the
// step's second call still streams): each inject is acknowledged in the
// response's sequence, and the response completes, every event a variant
// the SDK knows, its sequence numbers gapless.
func TestMultiAgentWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := betaConnect(ctx, t, h)
	b, _ := json.Marshal(create(map[string]any{"model": sdkModel, "store": false, "multi_agent": map[string]any{"enabled": true}, "input": betaScript}))
	if err := conn.SendRaw(ctx, b); err != nil {
		t.Fatal(err)
	}
	seq, injects, created := -1, 0, 0
	var id string
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := ev.AsAny(); v == nil {
			t.Fatalf("an event the SDK does not know: %s", ev.RawJSON())
		}
		var raw struct {
			Seq      int `json:"sequence_number"`
			Response *struct {
				ID             string          `json:"id"`
				Status         string          `json:"status"`
				RequiredAction json.RawMessage `json:"required_action"`
			} `json:"response"`
			Item struct {
				Type      string `json:"type"`
				CallID    string `json:"call_id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"item"`
		}
		json.Unmarshal([]byte(ev.RawJSON()), &raw)
		if raw.Seq != seq+1 {
			t.Fatalf("event %s has sequence_number %d after %d", ev.Type, raw.Seq, seq)
		}
		seq = raw.Seq
		if r := raw.Response; r != nil {
			id = r.ID
			if ev.Type != "response.completed" && r.Status != "in_progress" || len(r.RequiredAction) > 0 && string(r.RequiredAction) != "null" {
				t.Fatalf("%s shows the response %s: %s", ev.Type, r.Status, ev.RawJSON())
			}
		}
		switch ev.Type {
		case "response.done", "response.failed", "error":
			t.Fatalf("the waiting response sent %s", ev.RawJSON())
		case "response.output_item.done":
			if raw.Item.Type != "function_call" {
				continue
			}
			err := conn.Send(ctx, openai.BetaResponsesClientEventUnionParam{OfResponseInject: &openai.BetaResponseInjectEventParam{ResponseID: id,
				Input: []openai.BetaResponseInputItemUnionParam{{OfFunctionCallOutput: &openai.BetaResponseInputItemFunctionCallOutputParam{
					CallID: openai.String(raw.Item.CallID), Output: openai.BetaResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(toolOutput(raw.Item.Name, raw.Item.Arguments))}}}}}})
			if err != nil {
				t.Fatal(err)
			}
			injects++
		case "response.inject.created":
			created++
		case "response.completed":
			if injects != 4 || created != 4 {
				t.Fatalf("the response completed after %d injects, %d acknowledged; want 4 and 4", injects, created)
			}
			return
		}
	}
}

// betaCalls runs betaScript in the beta's waiting response over c,
// answering each call as its output_item.done comes, and returns the
// calls, in order, and the text the response ends with.
func betaCalls(t *testing.T, c *wsConn) (calls []string, text string) {
	t.Helper()
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": betaScript}))
	var id string
	for {
		b := c.recv(t)
		e := decodeEv(t, b)
		if e.Response != nil {
			id = e.Response.ID
		}
		switch e.Type {
		case "response.output_item.done":
			if it, ok := functionCall(e.Item); ok {
				calls = append(calls, it.Name+" "+it.Arguments)
				c.send(t, injectEv(id, it.output()))
			}
		case "response.completed":
			return calls, outputText(t, b)
		case "response.done", "response.failed", "response.incomplete", "error":
			t.Fatalf("the waiting response sent %s", b)
		}
	}
}

// TestMultiAgentForms: the beta's three forms of one rollout give the same
// calls and the same answer: over WebSocket, one response answered by
// inject; over HTTP, a response per step, each completing at its calls,
// continued with previous_response_id and the outputs, or with store false
// and every item sent again.
func TestMultiAgentForms(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	wsCalls, wsText := betaCalls(t, h.dial(t, nil))

	httpRun := func(store bool) (calls []string, text string) {
		t.Helper()
		input := []any{map[string]any{"role": "user", "content": betaScript}}
		prev := ""
		for range 10 {
			body := map[string]any{"model": "tether-scripted", "store": store, "multi_agent": map[string]any{"enabled": true}, "input": input}
			if prev != "" {
				body["previous_response_id"] = prev
			}
			status, resp := h.post(t, "/responses", body)
			if status != 200 {
				t.Fatalf("POST /responses: %d %s", status, resp)
			}
			var r struct {
				ID     string            `json:"id"`
				Status string            `json:"status"`
				Output []json.RawMessage `json:"output"`
			}
			json.Unmarshal(resp, &r)
			if r.Status != "completed" {
				t.Fatalf("an HTTP multi-agent response: %s", resp)
			}
			var outs []any
			for _, raw := range r.Output {
				if it, ok := functionCall(raw); ok {
					calls = append(calls, it.Name+" "+it.Arguments)
					outs = append(outs, it.output())
				}
			}
			if len(outs) == 0 {
				return calls, outputTextOf(t, resp)
			}
			if store {
				prev, input = r.ID, outs
				continue
			}
			for _, raw := range r.Output {
				input = append(input, json.RawMessage(raw))
			}
			input = append(input, outs...)
		}
		t.Fatal("no answer in 10 steps")
		return nil, ""
	}
	for _, form := range []struct {
		name  string
		store bool
	}{{"chained", true}, {"replayed", false}} {
		calls, text := httpRun(form.store)
		if !slices.Equal(calls, wsCalls) || text != wsText {
			t.Errorf("HTTP %s: calls %q and %q; over WebSocket %q and %q", form.name, calls, text, wsCalls, wsText)
		}
	}
	if len(wsCalls) != 4 || wsText == "" {
		t.Errorf("over WebSocket: calls %q, answer %q", wsCalls, wsText)
	}
}

// outputTextOf is the text of a response object's messages.
func outputTextOf(t *testing.T, resp []byte) string {
	t.Helper()
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("a response that is not JSON: %v: %s", err, resp)
	}
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type == "message" {
			for _, c := range it.Content {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// outputText is the text of the response a response event carries.
func outputText(t *testing.T, event []byte) string {
	t.Helper()
	var e struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(event, &e); err != nil {
		t.Fatal(err)
	}
	return outputTextOf(t, e.Response)
}

// TestMultiAgentWakes: the beta's waiting response is durable as a
// suspended rollout is: it hibernates at its checkpointed wait, an inject
// of the step's outputs wakes it from its journal and is acknowledged next
// in its sequence (the wait took no sequence number), and it runs on,
// hibernating and waking at each wait, to its end, its sequence numbers
// gapless. Fake time, in-memory connections.
func TestMultiAgentWakes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := hibernatingServer(t, runtime.NewMemoryCheckpoints(), nil)
		c := a.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script(durableSteps)}))
		r := &betaReader{seq: -1}
		read := func() ev { e, _ := r.read(t, c); return e }
		for i, step := range durableSteps {
			var outs []any
			for len(outs) < len(step) {
				if e := read(); e.Type == "response.output_item.done" {
					if it, ok := functionCall(e.Item); ok {
						outs = append(outs, it.output())
					}
				}
			}
			time.Sleep(2 * time.Minute) // it waits, and hibernates
			synctest.Wait()
			c.send(t, injectEv(r.id, outs...))
			if e := read(); e.Type != "response.inject.created" {
				t.Fatalf("step %d: the woken response's first event is %s, want response.inject.created", i, e.Type)
			}
		}
		for read().Type != "response.completed" {
		}
	})
}

// callItem is the part of an output item the beta tests read.
type callItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// functionCall reads item as a function call.
func functionCall(item json.RawMessage) (callItem, bool) {
	var it callItem
	json.Unmarshal(item, &it)
	return it, it.Type == "function_call"
}

// output is the call's output, as the tests' tools give it.
func (it callItem) output() map[string]any { return fco(it.CallID, toolOutput(it.Name, it.Arguments)) }

// injectEv is a response.inject of input for response id.
func injectEv(id string, input ...any) map[string]any {
	return map[string]any{"type": "response.inject", "response_id": id, "input": input}
}

// gatedStore holds every journal write while its gate is shut.
type gatedStore struct {
	runtime.Checkpoints
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (s *gatedStore) shut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

func (s *gatedStore) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = nil
}

func (s *gatedStore) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.Checkpoints.Write(ctx, w, ttl)
}

// TestMultiAgentEarly: a beta client answers each call as its
// output_item.done comes, before the response waits on it: while the
// step's second call still streams (a paced model), and while the wait is
// written to the store. Those injects are taken as the response comes to
// its wait, in order, and acknowledged then, in its sequence; one that
// answers no call of the wait is refused then (inject.failed, its input
// given back). Fake time, in-memory connections.
func TestMultiAgentEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{Checkpoints: runtime.NewMemoryCheckpoints()}
		o := durableOptions(store)
		o.Models = map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{TPS: 50})}
		a := newPipeHarness(t, o)
		c := a.dial(t, "Bearer alice")
		steps := [][]dcall{{{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script(steps)}))
		var id string
		seq, calls, created, failed := -1, 0, 0, 0
		for {
			b := c.recv(t)
			e := decodeEv(t, b)
			if e.Type == "response.inject.failed" {
				if failed++; !bytes.Contains(b, []byte(`"call_nope"`)) || !bytes.Contains(b, []byte(`"function_call_output"`)) {
					t.Fatalf("an inject refused: %s", b)
				}
				continue
			}
			if *e.Seq != seq+1 {
				t.Fatalf("%s has sequence_number %d after %d", b, *e.Seq, seq)
			}
			seq = *e.Seq
			if e.Response != nil {
				id = e.Response.ID
			}
			switch e.Type {
			case "response.output_item.done":
				it, ok := functionCall(e.Item)
				if !ok {
					continue
				}
				if calls++; calls == 2 {
					store.shut() // the wait on both calls is written as the second's output comes
				}
				c.send(t, injectEv(id, it.output()))
				switch calls {
				case 1: // the step's second call still streams
					c.send(t, injectEv(id, fco("call_nope", "x")))
				case 2:
					synctest.Wait()
					store.open()
				}
			case "response.inject.created":
				created++
			case "response.completed":
				if calls != 3 || created != 3 || failed != 1 {
					t.Fatalf("the response completed after %d calls, %d injects taken and %d refused; want 3, 3 and 1", calls, created, failed)
				}
				return
			case "response.done", "response.failed", "error":
				t.Fatalf("the waiting response sent %s", b)
			}
		}
	})
}

// TestMultiAgentTakeover: a waiting beta response whose client's
// connection drops is resumed on another server that shares the
// checkpoints: it replays what the client missed after its
// sequence_number (no response.done: its wait has none), takes the
// injects, and runs the response to its end, its sequence numbers going
// on gapless. Fake time, in-memory connections.
func TestMultiAgentTakeover(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, b := durablePair(t)
		c1 := a.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script(durableSteps)}))
		r := &betaReader{seq: -1}
		read := func(c *wsConn) (ev, []byte) { return r.read(t, c) }
		// Its first wait, on read_file: the client has every frame to it.
		var out any
		for out == nil {
			if e, _ := read(c1); e.Type == "response.output_item.done" {
				if it, ok := functionCall(e.Item); ok {
					out = it.output()
				}
			}
		}
		synctest.Wait() // the wait is in the store
		c1.drop()
		synctest.Wait() // and A has let it go, its lease with it: before, B may find it leased (response_owned_elsewhere)

		c2 := b.dial(t, "Bearer alice")
		resume := refEv("response.resume", r.id, "")
		resume["sequence_number"] = r.seq
		c2.send(t, resume)
		c2.send(t, injectEv(r.id, out)) // at once: nothing tells it the resume is done
		if e, f := read(c2); e.Type != "response.inject.created" {
			t.Fatalf("on B, after the resume and the inject: %s, want response.inject.created", f)
		}
		for calls := 0; ; {
			e, _ := read(c2)
			switch e.Type {
			case "response.output_item.done":
				if it, ok := functionCall(e.Item); ok {
					calls++
					c2.send(t, injectEv(r.id, it.output()))
				}
			case "response.completed":
				if calls != 3 {
					t.Fatalf("B ran %d calls after the takeover, want 3", calls)
				}
				return
			}
		}
	})
}

// TestMultiAgentFork: a waiting beta response is forked as a suspended
// rollout is: the fork begins with its response.created (and
// in_progress), whose output lists the waiting step's call, waits
// in_progress on it with no event, and is answered by its own inject; the
// original waits on, and is answered by its own. Fake time, in-memory
// connections.
func TestMultiAgentFork(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newPipeHarness(t, runtime.Options{})
		c := a.dial(t, "")
		l := newLanes(c)
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "orig", "multi_agent": map[string]any{"enabled": true},
			"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
		var id string
		var call callItem
		l.take(t, "orig", func(e ev) bool {
			if e.Type == "response.created" {
				id = e.Response.ID
			}
			it, ok := functionCall(e.Item)
			if ok && e.Type == "response.output_item.done" {
				call = it
			}
			return ok && e.Type == "response.output_item.done"
		})
		synctest.Wait() // it waits on the call
		c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"f0"}})
		created := l.take(t, "f0", func(e ev) bool { return e.Type == "response.created" || e.Type == "error" })
		e := decodeEv(t, last(created))
		if e.Type != "response.created" || e.Response.ID == id || e.Response.Status != "in_progress" || !bytes.Contains(last(created), []byte(call.CallID)) {
			t.Fatalf("the fork began with %s, want a response.created of its own, in_progress, listing the call %s", last(created), call.CallID)
		}
		fork := e.Response.ID
		synctest.Wait()
		for lane, rid := range map[string]string{"f0": fork, "orig": id} {
			inject := injectEv(rid, fco(call.CallID, "the answer on "+lane))
			inject["stream_id"] = lane
			c.send(t, inject)
			evs := l.take(t, lane, func(e ev) bool { return isEnd(e.Type) || e.Type == "response.done" || e.Type == "error" })
			end, acked := decodeEv(t, last(evs)), false
			for _, f := range evs {
				acked = acked || decodeEv(t, f).Type == "response.inject.created"
			}
			if end.Type != "response.completed" || end.Response.ID != rid || !acked {
				t.Fatalf("%s, answered: %s … %s", lane, evs[0], last(evs))
			}
			if !bytes.Contains(last(evs), []byte("the answer on "+lane)) {
				t.Fatalf("%s's response does not hold its own answer: %s", lane, last(evs))
			}
		}
	})
}

// TestMultiAgentEndsEarly: an inject that waits for a wait the response
// never comes to (cancelled while the step's second call streams) is
// answered as the response ends: response.inject.failed,
// response_already_completed, its input given back. Fake time, in-memory
// connections.
func TestMultiAgentEndsEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{TPS: 50})}}
		c := newPipeHarness(t, o).dial(t, "")
		steps := [][]dcall{{{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script(steps)}))
		var id string
		for {
			e := decodeEv(t, c.recv(t))
			if e.Response != nil {
				id = e.Response.ID
			}
			if it, ok := functionCall(e.Item); ok && e.Type == "response.output_item.done" {
				c.send(t, injectEv(id, it.output())) // the second call still streams
				break
			}
		}
		c.send(t, refEv("response.cancel", id, ""))
		var failed, end []byte
		for end == nil {
			f := c.recv(t)
			switch typ := eventType(t, f); {
			case typ == "response.inject.failed":
				failed = f
			case isEnd(typ):
				end = f
			}
		}
		if eventType(t, end) != "response.cancelled" || failed == nil || !bytes.Contains(failed, []byte(`"response_already_completed"`)) || !bytes.Contains(failed, []byte(`"function_call_output"`)) {
			t.Fatalf("cancelled with an inject waiting: %s, the inject answered %s", end, failed)
		}
	})
}

// betaReader reads a beta response's frames, checking that its sequence
// numbers are gapless and that it never sends what its wait has none of
// (response.done), nor fails; it keeps the response's id.
type betaReader struct {
	id  string
	seq int
}

func (r *betaReader) read(t *testing.T, c *wsConn) (ev, []byte) {
	t.Helper()
	f := c.recv(t)
	e := decodeEv(t, f)
	if e.Seq == nil {
		t.Fatalf("a frame without a sequence_number: %s", f)
	}
	if *e.Seq != r.seq+1 {
		t.Fatalf("%s has sequence_number %d after %d", f, *e.Seq, r.seq)
	}
	r.seq = *e.Seq
	if e.Response != nil {
		r.id = e.Response.ID
	}
	if e.Type == "response.done" || e.Type == "response.failed" || e.Type == "error" {
		t.Fatalf("the waiting response sent %s", f)
	}
	return e, f
}

// TestMultiAgentWaitingEvent: a beta response whose request includes
// tether.waits tells each wait with response.waiting, in its gapless
// sequence, once the step's calls are out: their call_ids in output order
// and the usage (and, with tether.timings, the timings) so far, growing
// wait by wait, as a pause's response.done tells them. One inject of the
// step's outputs goes on from it.
func TestMultiAgentWaitingEvent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		c := h.dial(t, "Bearer alice")
		steps := [][]dcall{{{"grep", `{"pattern":"x"}`}, {"list_dir", `{}`}}, {{"run_tests", `{}`}}}
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true},
			"include": []string{"tether.waits", "tether.timings"}, "input": script(steps)}))
		var id string
		var seen []callItem // the step's calls, as their output_item.done told them
		var last protocol.Usage
		seq, waits := -1, 0
		for {
			b := c.recv(t)
			e := decodeEv(t, b)
			if *e.Seq != seq+1 {
				t.Fatalf("%s has sequence_number %d after %d", b, *e.Seq, seq)
			}
			seq = *e.Seq
			switch e.Type {
			case "response.created":
				id = e.Response.ID
			case "response.output_item.done":
				if it, ok := functionCall(e.Item); ok {
					seen = append(seen, it)
				}
			case "response.waiting":
				var w protocol.WaitingEvent
				if err := json.Unmarshal(b, &w); err != nil {
					t.Fatal(err)
				}
				waits++
				var want []string
				outs := []any{}
				for _, it := range seen {
					want, outs = append(want, it.CallID), append(outs, it.output())
				}
				if w.ResponseID != id || !slices.Equal(w.CallIDs, want) {
					t.Fatalf("wait %d: %s, want response %s waiting on %v", waits, b, id, want)
				}
				if w.Usage.InputTokens <= last.InputTokens || w.Usage.OutputTokens <= last.OutputTokens || w.Timings == nil || w.Timings.RenderedTokens == 0 {
					t.Fatalf("wait %d: %s after usage %+v: want the usage and timings so far", waits, b, last)
				}
				last, seen = w.Usage, nil
				c.send(t, injectEv(id, outs...))
			case "response.completed":
				if waits != len(steps) {
					t.Fatalf("the response completed after %d waits told, want %d", waits, len(steps))
				}
				if u := e.Response.Usage; u == nil || u.InputTokens <= last.InputTokens {
					t.Fatalf("the response's usage %+v at its end, %+v at its last wait", u, last)
				}
				return
			case "response.done", "response.failed", "error", "response.inject.failed":
				t.Fatalf("the waiting response sent %s", b)
			}
		}
	})
}
