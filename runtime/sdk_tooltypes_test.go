package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tether-run/tether/runtime"
)

// sdkCodexTools are Codex's kinds of tools as openai-go's typed params: a
// function, a namespace of functions, and a freeform custom tool with a
// Lark grammar.
func sdkCodexTools() []responses.ToolUnionParam {
	wait := responses.NamespaceToolToolFunctionParam{Name: "wait_agent", Parameters: map[string]any{
		"type": "object", "properties": map[string]any{"ids": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}}
	ns := responses.ToolParamOfNamespace("Sub-agents.", "multi_agent_v1", []responses.NamespaceToolToolUnionParam{{OfFunction: &wait}})
	custom := responses.ToolUnionParam{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: param.NewOpt("Edit files."),
		Format: shared.CustomToolInputFormatUnionParam{OfGrammar: &shared.CustomToolInputFormatGrammarParam{Syntax: "lark", Definition: "start: /.+/"}}}}
	return []responses.ToolUnionParam{sdkWeatherTool(), ns, custom}
}

// TestSDKTypedCalls: with openai-go, a namespaced function call and a custom
// tool call come back as typed output items (AsFunctionCall().Namespace,
// AsCustomToolCall) over WebSocket turns, and the typed outputs continue
// them.
func TestSDKTypedCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	tools := sdkCodexTools()

	call := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: tools,
		Input: textInput(`call: multi_agent_v1.wait_agent {"ids":["a"]}`)})
	wantCompleted(t, call)
	fc := call.Output[0].AsFunctionCall()
	if call.Output[0].Type != "function_call" || fc.Name != "wait_agent" || fc.Namespace != "multi_agent_v1" {
		t.Fatalf("output %s", call.RawJSON())
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("agent a done")
	out.OfFunctionCallOutput.CallID = param.NewOpt(fc.CallID)
	out.OfFunctionCallOutput.Namespace = param.NewOpt("multi_agent_v1")
	done := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: tools,
		PreviousResponseID: param.NewOpt(call.ID), Input: itemsInput(out)})
	wantCompleted(t, done)
	wantText(t, done, "wait_agent returned: agent a done")

	input, _ := json.Marshal(patch)
	custom := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: tools,
		PreviousResponseID: param.NewOpt(done.ID), Input: textInput("call: apply_patch " + string(input))})
	wantCompleted(t, custom)
	ctc := custom.Output[0].AsCustomToolCall()
	if custom.Output[0].Type != "custom_tool_call" || ctc.Name != "apply_patch" || ctc.Input != patch || ctc.CallID == "" {
		t.Fatalf("output %s", custom.RawJSON())
	}
	done = sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: tools,
		PreviousResponseID: param.NewOpt(custom.ID), Input: itemsInput(responses.ResponseInputItemParamOfCustomToolCallOutput(ctc.CallID, "Done!"))})
	wantCompleted(t, done)
	wantText(t, done, "apply_patch returned: Done!")
}

// TestSDKCustomCallSSE: over HTTP/SSE, openai-go reads a custom tool call's
// input events as typed events, and the item as a typed custom tool call.
func TestSDKCustomCallSSE(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)
	input, _ := json.Marshal(patch)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkCodexTools(),
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("call: apply_patch " + string(input))}})
	t.Cleanup(func() { stream.Close() })
	var deltas strings.Builder
	var doneInput string
	var final *responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.custom_tool_call_input.delta":
			deltas.WriteString(ev.AsResponseCustomToolCallInputDelta().Delta)
		case "response.custom_tool_call_input.done":
			doneInput = ev.AsResponseCustomToolCallInputDone().Input
		case "response.completed":
			resp := ev.AsResponseCompleted().Response
			final = &resp
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if final == nil || deltas.String() != patch || doneInput != patch {
		t.Fatalf("deltas %q, done %q, final %v", deltas.String(), doneInput, final)
	}
	if ctc := final.Output[0].AsCustomToolCall(); final.Output[0].Type != "custom_tool_call" || ctc.Input != patch {
		t.Fatalf("output %s", final.RawJSON())
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkCodexTools(), PreviousResponseID: param.NewOpt(final.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfCustomToolCallOutput(final.Output[0].AsCustomToolCall().CallID, "Done!")}}})
	if err != nil {
		t.Fatalf("continue over HTTP: %v", sdkErrorDetail(err))
	}
	wantCompleted(t, next)
	wantText(t, next, "apply_patch returned: Done!")
}

// sdkBuiltinTools are the client's built-in tools as openai-go params:
// apply_patch and a shell with a local environment (and a function).
func sdkBuiltinTools() []responses.ToolUnionParam {
	return append([]responses.ToolUnionParam{sdkWeatherTool()},
		responses.ToolUnionParam{OfApplyPatch: &responses.ApplyPatchToolParam{}},
		responses.ToolUnionParam{OfShell: &responses.FunctionShellToolParam{
			Environment: responses.FunctionShellToolEnvironmentUnionParam{OfLocal: &responses.LocalEnvironmentParam{}}}})
}

const typedScript = `call: apply_patch {"type":"create_file","path":"a.txt","diff":"+a\n"} | shell {"commands":["ls"],"timeout_ms":1000,"max_output_length":100}`

// sdkTypedOutputs answers the typed calls among items with openai-go's
// typed output params, checking each call's typed fields.
func sdkTypedOutputs(t *testing.T, items []responses.ResponseOutputItemUnion) []responses.ResponseInputItemUnionParam {
	t.Helper()
	var outs []responses.ResponseInputItemUnionParam
	for _, it := range items {
		switch it.Type {
		case "apply_patch_call":
			ap := it.AsApplyPatchCall()
			if ap.Operation.Type != "create_file" || ap.Operation.Path != "a.txt" || ap.CallID == "" {
				t.Fatalf("apply_patch_call %s", it.RawJSON())
			}
			outs = append(outs, responses.ResponseInputItemParamOfApplyPatchCallOutput(ap.CallID, "completed"))
		case "shell_call":
			sh := it.AsShellCall()
			if len(sh.Action.Commands) != 1 || sh.Action.Commands[0] != "ls" || sh.CallID == "" {
				t.Fatalf("shell_call %s", it.RawJSON())
			}
			outs = append(outs, responses.ResponseInputItemParamOfShellCallOutput(sh.CallID, []responses.ResponseFunctionShellCallOutputContentParam{{
				Stdout: "a.txt\n", Outcome: responses.ResponseFunctionShellCallOutputContentOutcomeUnionParam{
					OfExit: &responses.ResponseFunctionShellCallOutputContentOutcomeExitParam{ExitCode: 0}}}}))
		}
	}
	if len(outs) != 2 {
		t.Fatalf("%d typed calls, want apply_patch_call and shell_call", len(outs))
	}
	return outs
}

// TestSDKTypedCallsWebSocket: openai-go reads apply_patch_call and
// shell_call as typed items (AsApplyPatchCall, AsShellCall) in cached-state
// turns, and its typed outputs continue them.
func TestSDKTypedCallsWebSocket(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	first := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false),
		Tools: sdkBuiltinTools(), Input: textInput(typedScript)})
	wantCompleted(t, first)
	done := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false),
		Tools: sdkBuiltinTools(), PreviousResponseID: param.NewOpt(first.ID), Input: itemsInput(sdkTypedOutputs(t, first.Output)...)})
	wantCompleted(t, done)
	wantText(t, done, "apply_patch returned: completed")
}

// TestSDKTypedCallsSuspended: the same calls park a suspended rollout
// (openai-go's Create with "suspend": true, its raw receive and send), the
// pause's items read as typed items, and openai-go's typed outputs,
// appended, finish it.
func TestSDKTypedCallsSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	create := responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false),
		Tools: sdkBuiltinTools(), Input: textInput(typedScript)}
	create.SetExtraFields(map[string]any{"suspend": true})
	if err := conn.Create(ctx, create); err != nil {
		t.Fatal(err)
	}
	pauses := 0
	for {
		raw, err := conn.RecvRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Type     string             `json:"type"`
			Response responses.Response `json:"response"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "response.done":
			pauses++
			input, err := json.Marshal(sdkTypedOutputs(t, ev.Response.Output))
			if err != nil {
				t.Fatal(err)
			}
			appendEv, _ := json.Marshal(map[string]any{"type": "response.append", "response_id": ev.Response.ID, "input": json.RawMessage(input)})
			if err := conn.SendRaw(ctx, appendEv); err != nil {
				t.Fatal(err)
			}
		case "response.completed":
			if pauses != 1 {
				t.Fatalf("%d pauses, want 1", pauses)
			}
			wantText(t, &ev.Response, "shell returned: ")
			return
		case "response.failed", "response.incomplete", "error":
			t.Fatalf("ended with %s", raw)
		}
	}
}
