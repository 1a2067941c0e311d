package runtime_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/runtime"
)

// programFingerprint is opaque replay state of the server that ran the
// program, with what JSON escapes in it: it must come back unchanged.
const programFingerprint = "fp_v1:Q2F0+/=\n\"é\u2028<&>"

// programHistory is a conversation continued from a server that runs
// programmatic tool calling, every item with its id as that server gave it:
// tools added mid-conversation, a configuration update, the program the
// model wrote, the call the program made and its output (each naming the
// program as its caller), and what the program returned.
func programHistory() []json.RawMessage {
	fp, _ := json.Marshal(programFingerprint)
	var items []json.RawMessage
	for _, raw := range []string{
		`{"type":"message","id":"msg_h1","role":"user","content":[{"type":"input_text","text":"Do I need a coat in Lyon?"}]}`,
		`{"type":"additional_tools","id":"at_h1","role":"developer","tools":[{"type":"function","name":"get_weather","description":null,"parameters":null,"strict":null}]}`,
		`{"type":"configuration_update","id":"cfg_h1","reasoning":{"effort":"low"},"text":{"format":{"type":"text"}}}`,
		`{"type":"program","id":"prog_h1","call_id":"call_p","code":"const w = await tools.get_weather({city: \"Lyon\"});\nif (w.includes(\"rain\") && !w.includes(\"sun\")) { return \"Take a coat: \" + w; }\nreturn \"No coat.\";","fingerprint":` + string(fp) + `}`,
		`{"type":"function_call","id":"fc_h1","call_id":"call_w","name":"get_weather","arguments":"{\"city\":\"Lyon\"}","status":"completed","caller":{"type":"program","caller_id":"call_p"}}`,
		`{"type":"function_call_output","id":"fco_h1","call_id":"call_w","output":"rain, 8C","caller":{"type":"program","caller_id":"call_p"}}`,
		`{"type":"program_output","id":"progo_h1","call_id":"call_p","result":"Take a coat: rain, 8C","status":"completed"}`,
	} {
		items = append(items, json.RawMessage(raw))
	}
	return items
}

// programAnswer is the scripted model's answer to programHistory: the
// newest results, the program's call's output and then the program's,
// read alike.
const programAnswer = "get_weather returned: rain, 8C; program returned: Take a coat: rain, 8C"

// wantItemsAsSent checks that items read back are those sent, in order,
// every member of each the same value: strings (code, fingerprint)
// compared exactly, whatever escapes either side's JSON used.
func wantItemsAsSent(t *testing.T, got []map[string]any, sent []json.RawMessage) {
	t.Helper()
	if len(got) != len(sent) {
		t.Fatalf("%d items read back, %d sent: %s", len(got), len(sent), itemSummary(got))
	}
	for i, raw := range sent {
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			b, _ := json.Marshal(got[i])
			t.Errorf("item %d read back as\n %s\nsent as\n %s", i, b, raw)
		}
	}
}

// TestProgramHistoryStored: a create over HTTP takes the history, the
// scripted model answers the program's output as a function's, and the
// store keeps every item as sent: input_items lists them field for field
// (the fingerprint byte for byte), from the memory store, from Redis, and
// from another server on that Redis, which continues the response from
// them.
func TestProgramHistoryStored(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	for _, tc := range []struct {
		name       string
		h, another *harness
	}{
		{"memory", newHarness(t, runtime.Options{}), nil},
		{"redis", redisHarness(t, rd.URL(), runtime.Options{}), redisHarness(t, rd.URL(), runtime.Options{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := programHistory()
			r := ok[map[string]any](t)(tc.h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": sent}))
			id, _ := r["id"].(string)
			out, _ := r["output"].([]any)
			if r["status"] != "completed" || len(out) != 1 || mustText(t, out[0].(map[string]any)) != programAnswer {
				t.Fatalf("response %v, want the answer %q", r, programAnswer)
			}
			readers := []*harness{tc.h}
			if tc.another != nil {
				readers = append(readers, tc.another)
			}
			for _, h := range readers {
				wantItemsAsSent(t, inputItems(t, h, id, "?order=asc"), sent)
				next := ok[map[string]any](t)(h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": id, "input": "And tomorrow?"}))
				if next["status"] != "completed" {
					t.Fatalf("continued from the stored history: %v", next)
				}
			}
		})
	}
}

// TestProgramHistoryConversation: a conversation created with the history
// lists its items as sent, one by one too; a response on it reads them and
// adds its own after them.
func TestProgramHistoryConversation(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	for name, h := range map[string]*harness{"memory": newHarness(t, runtime.Options{}), "redis": redisHarness(t, rd.URL(), runtime.Options{})} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sent := programHistory()
			id := ok[map[string]any](t)(h.post(t, "/conversations", map[string]any{"items": sent}))["id"].(string)
			wantItemsAsSent(t, allItems(t, h, id), sent)
			prog := ok[map[string]any](t)(h.get(t, "/conversations/"+id+"/items/prog_h1"))
			if prog["fingerprint"] != programFingerprint {
				t.Fatalf("the program read alone: %v", prog)
			}
			r := ok[map[string]any](t)(h.post(t, "/responses", map[string]any{"model": "tether-scripted", "conversation": id, "input": "Thanks."}))
			if r["status"] != "completed" {
				t.Fatalf("a response on the conversation: %v", r)
			}
			all := allItems(t, h, id)
			wantItemsAsSent(t, all[:len(sent)], sent)
			if s := itemSummary(all[len(sent):]); s != "message/user message/assistant" {
				t.Fatalf("the response added %q", s)
			}
		})
	}
}

// TestProgramHistoryWebSocket: the history in a WebSocket response.create
// is taken as over HTTP. A suspended rollout's append takes outputs for
// its pending calls and user messages only: a program_output answers no
// pending call (tether runs no programs), and a program, a configuration
// update or tools added are history for a create, each refused at its
// type, the rollout still parked; an output with a caller is taken, and
// kept with it.
func TestProgramHistoryWebSocket(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	sent := programHistory()
	c.send(t, create(map[string]any{"model": "tether-scripted", "input": sent}))
	r := obj(t, terminalResponse(t, c.terminal(t)))
	if out := r["output"].([]any); r["status"] != "completed" || mustText(t, out[0].(map[string]any)) != programAnswer {
		t.Fatalf("response %v, want the answer %q", r, programAnswer)
	}
	wantItemsAsSent(t, inputItems(t, h, r["id"].(string), "?order=asc"), sent)

	c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "input": `call: get_weather {"city":"Lyon"}`}))
	ev := untilPause(t, c)
	id, callID := respID(t, last(ev)), pendingCalls(t, last(ev))[0]["call_id"].(string)
	for _, it := range sent[1:4] { // additional_tools, configuration_update, program
		var typ struct{ Type string }
		json.Unmarshal(it, &typ)
		c.send(t, appendEv(id, "", it))
		if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error.Code != "invalid_value" || e.Error.Param != "input[0].type" {
			t.Fatalf("a %s appended: %+v", typ.Type, e.Error)
		}
	}
	c.send(t, appendEv(id, "", sent[6]))
	if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error.Code != "invalid_value" || e.Error.Param != "input[0].type" {
		t.Fatalf("a program_output appended: %+v", e.Error)
	}
	out := fco(callID, "rain, 8C")
	out["caller"] = map[string]any{"type": "direct"}
	c.send(t, appendEv(id, "", out))
	end := untilPause(t, c)
	if r := obj(t, terminalResponse(t, last(end))); r["status"] != "completed" || !strings.Contains(fmt.Sprint(r["output"]), "get_weather returned: rain, 8C") {
		t.Fatalf("after the output: %v", r)
	}
	items := inputItems(t, h, id, "?order=asc")
	if got := items[len(items)-1]; got["type"] != "function_call_output" || !reflect.DeepEqual(got["caller"], out["caller"]) {
		t.Fatalf("the appended output kept as %v", got)
	}
}

// TestProgramHistorySDK: with openai-go, a history of these items built
// from its params is taken, and what tether lists of it, a response's
// input_items and a conversation's items, openai-go reads as the known
// variants, field for field.
func TestProgramHistorySDK(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)
	fc := responses.ResponseInputItemParamOfFunctionCall(`{"city":"Lyon"}`, "call_w", "get_weather")
	fc.OfFunctionCall.Caller.OfProgram = &responses.ResponseFunctionToolCallCallerProgramParam{CallerID: "call_p"}
	fco := responses.ResponseInputItemParamOfFunctionCallOutput("rain, 8C")
	fco.OfFunctionCallOutput.CallID = param.NewOpt("call_w")
	fco.OfFunctionCallOutput.Caller.OfProgram = &responses.ResponseInputItemFunctionCallOutputCallerProgramParam{CallerID: "call_p"}
	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Do I need a coat in Lyon?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfAdditionalTools([]responses.ToolUnionParam{sdkWeatherTool()}),
		{OfConfigurationUpdate: &responses.ResponseConfigurationUpdateItemParam{Reasoning: responses.ResponseConfigurationUpdateItemParamReasoning{Effort: shared.ReasoningEffortLow}}},
		{OfProgram: &responses.ResponseInputItemProgramParam{ID: "prog_s1", CallID: "call_p", Code: "return (await tools.get_weather({city: 'Lyon'}));", Fingerprint: programFingerprint}},
		fc, fco,
		{OfProgramOutput: &responses.ResponseInputItemProgramOutputParam{ID: "progo_s1", CallID: "call_p", Result: "Take a coat", Status: "completed"}},
	}
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatalf("create: %v", sdkErrorDetail(err))
	}
	wantCompleted(t, resp)
	wantText(t, resp, "program returned: Take a coat")

	var fromInput []any
	items := client.Responses.InputItems.ListAutoPaging(ctx, resp.ID, responses.InputItemListParams{Order: responses.InputItemListParamsOrderAsc})
	for items.Next() {
		fromInput = append(fromInput, items.Current().AsAny())
	}
	if err := items.Err(); err != nil {
		t.Fatalf("input_items: %v", err)
	}
	wantProgramVariants(t, "input_items", fromInput)

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{Items: input})
	if err != nil {
		t.Fatalf("a conversation of the history: %v", sdkErrorDetail(err))
	}
	var fromConv []any
	citems := client.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(3)})
	for citems.Next() {
		fromConv = append(fromConv, citems.Current().AsAny())
	}
	if err := citems.Err(); err != nil {
		t.Fatalf("conversation items: %v", err)
	}
	wantProgramVariants(t, "conversation items", fromConv)
}

// wantProgramVariants checks the variants openai-go read the SDK history
// of TestProgramHistorySDK back as.
func wantProgramVariants(t *testing.T, where string, got []any) {
	t.Helper()
	var types []string
	for _, v := range got {
		types = append(types, fmt.Sprintf("%T", v))
		var ok bool
		switch v := v.(type) {
		case responses.ResponseItemProgram:
			ok = v.ID == "prog_s1" && v.CallID == "call_p" && v.Fingerprint == programFingerprint && strings.HasPrefix(v.Code, "return (await")
		case conversations.ConversationItemProgram:
			ok = v.ID == "prog_s1" && v.CallID == "call_p" && v.Fingerprint == programFingerprint && strings.HasPrefix(v.Code, "return (await")
		case responses.ResponseItemProgramOutput:
			ok = v.ID == "progo_s1" && v.Result == "Take a coat" && v.Status == "completed"
		case conversations.ConversationItemProgramOutput:
			ok = v.ID == "progo_s1" && v.Result == "Take a coat" && v.Status == "completed"
		case responses.ResponseConfigurationUpdateItem:
			ok = v.ID != "" && v.Reasoning.Effort == shared.ReasoningEffortLow
		case responses.ResponseItemAdditionalTools:
			ok = v.ID != "" && v.Role == "developer" && len(v.Tools) == 1 && v.Tools[0].Name == "get_weather"
		case conversations.ConversationItemAdditionalTools:
			ok = v.ID != "" && v.Role == "developer" && len(v.Tools) == 1 && v.Tools[0].Name == "get_weather"
		case responses.ResponseFunctionToolCallItem:
			ok = v.Caller.Type == "program" && v.Caller.CallerID == "call_p"
		case responses.ResponseFunctionToolCallOutputItem:
			ok = v.Caller.Type == "program" && v.Caller.CallerID == "call_p"
		case responses.ResponseInputMessageItem, responses.ResponseOutputMessage, conversations.Message:
			ok = true
		}
		if !ok {
			t.Errorf("%s: read back as %#v", where, v)
		}
	}
	if len(got) != 7 {
		t.Errorf("%s: %d items (%v), want the 7 sent", where, len(got), types)
	}
}
