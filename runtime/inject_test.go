package runtime_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
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
	client := sdkClient(t, h)
	conn, err := client.Beta.Responses.Connect(ctx, openai.BetaResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

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

// TestMultiAgentRefused: a request for the multi-agent beta's waiting
// response, which tether does not serve yet, is refused
// (unsupported_parameter), not ignored: over HTTP and over WebSocket. One
// that leaves it disabled is served; a malformed multi_agent is invalid.
func TestMultiAgentRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	body := func(ma any) map[string]any {
		return map[string]any{"model": sdkModel, "input": "hi", "multi_agent": ma}
	}
	for _, c := range []struct {
		ma         any
		status     int
		code, want string
	}{
		{map[string]any{"enabled": true}, 400, protocol.CodeUnsupportedParameter, "multi_agent"},
		{map[string]any{"enabled": true, "max_concurrent_subagents": 2}, 400, protocol.CodeUnsupportedParameter, "multi_agent"},
		{map[string]any{"max_concurrent_subagents": 2}, 400, protocol.CodeMissingRequired, "multi_agent.enabled"},
		{map[string]any{"enabled": true, "max_concurrent_subagents": 0}, 400, protocol.CodeInvalidValue, "multi_agent.max_concurrent_subagents"},
		{map[string]any{"enabled": false}, 200, "", ""},
	} {
		status, resp := h.post(t, "/responses", body(c.ma))
		if status != c.status || c.code != "" && (!bytes.Contains(resp, []byte(`"code":"`+c.code+`"`)) || !bytes.Contains(resp, []byte(`"param":"`+c.want+`"`))) {
			t.Errorf("multi_agent %v over HTTP: %d %.300s, want %d %s on %s", c.ma, status, resp, c.status, c.code, c.want)
		}
	}
	c := h.dial(t, nil)
	c.send(t, create(body(map[string]any{"enabled": true})))
	if f := c.recv(t); eventType(t, f) != "error" || !bytes.Contains(f, []byte(`"unsupported_parameter"`)) {
		t.Fatalf("multi_agent over WebSocket: %s, want an unsupported_parameter error", f)
	}
}
