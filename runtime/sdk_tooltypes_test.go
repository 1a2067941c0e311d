package runtime_test

import (
	"context"
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
	final, pauses := sdkSuspended(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false),
		Tools: sdkBuiltinTools(), Input: textInput(typedScript)}, func(items []responses.ResponseOutputItemUnion, _ string) []responses.ResponseInputItemUnionParam {
		return sdkTypedOutputs(t, items)
	})
	if pauses != 1 {
		t.Fatalf("%d pauses, want 1", pauses)
	}
	wantText(t, &final, "shell returned: ")
}

// sdkSuspended runs create as a suspended rollout through openai-go
// (Create with "suspend": true, then its raw receive and send), answering
// each pause's items with answer, and returns the completed response and
// the number of pauses.
func sdkSuspended(t *testing.T, ctx context.Context, conn *responses.ResponseConnection, create responses.ResponsesClientEventResponseCreateParam,
	answer func(items []responses.ResponseOutputItemUnion, raw string) []responses.ResponseInputItemUnionParam) (responses.Response, int) {
	t.Helper()
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
			input, err := json.Marshal(answer(ev.Response.Output, string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			appendEv, _ := json.Marshal(map[string]any{"type": "response.append", "response_id": ev.Response.ID, "input": json.RawMessage(input)})
			if err := conn.SendRaw(ctx, appendEv); err != nil {
				t.Fatal(err)
			}
		case "response.completed":
			return ev.Response, pauses
		case "response.failed", "response.incomplete", "error":
			t.Fatalf("ended with %s", raw)
		}
	}
}

// sdkTypedCase is one client-executed call type as openai-go sees it: the
// directive that makes the scripted model call it, a check of the typed
// output item that makes the typed output param answering it, and what the
// model's answer then says.
type sdkTypedCase struct {
	name, directive string
	check           func(responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool)
	answer          string
}

// sdkAllTools offer one tool of every client-executed type.
func sdkAllTools() []responses.ToolUnionParam {
	localShell := responses.NewToolLocalShellParam()
	return append(sdkCodexTools(),
		responses.ToolUnionParam{OfApplyPatch: &responses.ApplyPatchToolParam{}},
		responses.ToolUnionParam{OfShell: &responses.FunctionShellToolParam{
			Environment: responses.FunctionShellToolEnvironmentUnionParam{OfLocal: &responses.LocalEnvironmentParam{}}}},
		responses.ToolUnionParam{OfComputer: &responses.ComputerToolParam{}},
		responses.ToolUnionParam{OfLocalShell: &localShell},
		responses.ToolUnionParam{OfToolSearch: &responses.ToolSearchToolParam{Execution: "client", Description: param.NewOpt("Find tools."), Parameters: map[string]any{"type": "object"}}})
}

func sdkTypedCases() []sdkTypedCase {
	input, _ := json.Marshal(patch)
	return []sdkTypedCase{
		{"namespaced function", `call: multi_agent_v1.wait_agent {"ids":["a"]}`, func(it responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool) {
			fc := it.AsFunctionCall()
			out := responses.ResponseInputItemParamOfFunctionCallOutput("agent a done")
			out.OfFunctionCallOutput.CallID = param.NewOpt(fc.CallID)
			out.OfFunctionCallOutput.Namespace = param.NewOpt(fc.Namespace)
			return out, it.Type == "function_call" && fc.Name == "wait_agent" && fc.Namespace == "multi_agent_v1"
		}, "wait_agent returned: agent a done"},
		{"custom", "call: apply_patch " + string(input), func(it responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool) {
			ctc := it.AsCustomToolCall()
			return responses.ResponseInputItemParamOfCustomToolCallOutput(ctc.CallID, "Done!"), it.Type == "custom_tool_call" && ctc.Input == patch
		}, "apply_patch returned: Done!"},
		{"computer", `call: computer {"type":"click","x":10,"y":20,"button":"left"}`, func(it responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool) {
			cu := it.AsComputerCall()
			ok := it.Type == "computer_call" && cu.Action.Type == "click" && cu.Action.X == 10 && cu.Action.Button == "left"
			return responses.ResponseInputItemParamOfComputerCallOutput(cu.CallID,
				responses.ResponseComputerToolCallOutputScreenshotParam{ImageURL: param.NewOpt("data:image/png;base64,AAAA")}), ok
		}, "computer returned: [image]"},
		{"local_shell", `call: local_shell {"type":"exec","command":["ls","-la"],"env":{}}`, func(it responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool) {
			ls := it.AsLocalShellCall()
			ok := it.Type == "local_shell_call" && len(ls.Action.Command) == 2 && ls.Action.Command[1] == "-la"
			return responses.ResponseInputItemUnionParam{OfLocalShellCallOutput: &responses.ResponseInputItemLocalShellCallOutputParam{
				ID: ls.CallID, Output: `{"output":"a.txt"}`}}, ok
		}, `local_shell returned: {"output":"a.txt"}`},
		{"tool_search", `call: tool_search {"query":"crm"}`, func(it responses.ResponseOutputItemUnion) (responses.ResponseInputItemUnionParam, bool) {
			ts := it.AsToolSearchCall()
			found := responses.ToolParamOfFunction("list_orders", map[string]any{"type": "object"}, false)
			out := responses.ResponseInputItemParamOfToolSearchOutput([]responses.ResponseToolSearchOutputItemParamToolUnion{{OfFunction: found.OfFunction}})
			out.OfToolSearchOutput.CallID = param.NewOpt(ts.CallID)
			out.OfToolSearchOutput.Execution = "client"
			out.OfToolSearchOutput.Status = "completed"
			return out, it.Type == "tool_search_call" && ts.CallID != ""
		}, "tool_search returned: list_orders"},
	}
}

// sdkTypedStep is the output of a typed case's call in items, checked.
func sdkTypedStep(t *testing.T, tc sdkTypedCase, items []responses.ResponseOutputItemUnion, raw string) responses.ResponseInputItemUnionParam {
	t.Helper()
	if len(items) == 0 {
		t.Fatalf("%s: no output: %s", tc.name, raw)
	}
	out, ok := tc.check(items[0])
	if !ok {
		t.Fatalf("%s: output %s", tc.name, raw)
	}
	return out
}

// TestSDKEveryTypeWebSocket, …HTTP and …Suspended: each client-executed
// type (the namespaced function, custom, computer, local_shell and
// tool_search here; apply_patch and shell above) round-trips through
// openai-go as typed items and typed outputs, in each design.
func TestSDKEveryTypeWebSocket(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	for _, tc := range sdkTypedCases() {
		call := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: sdkAllTools(), Input: textInput(tc.directive)})
		wantCompleted(t, call)
		out := sdkTypedStep(t, tc, call.Output, call.RawJSON())
		done := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false), Tools: sdkAllTools(),
			PreviousResponseID: param.NewOpt(call.ID), Input: itemsInput(out)})
		wantCompleted(t, done)
		wantText(t, done, tc.answer)
	}
}

func TestSDKEveryTypeHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)
	for _, tc := range sdkTypedCases() {
		call, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkAllTools(),
			Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(tc.directive)}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, sdkErrorDetail(err))
		}
		out := sdkTypedStep(t, tc, call.Output, call.RawJSON())
		done, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkAllTools(), PreviousResponseID: param.NewOpt(call.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}})
		if err != nil {
			t.Fatalf("%s: continue: %v", tc.name, sdkErrorDetail(err))
		}
		wantCompleted(t, done)
		wantText(t, done, tc.answer)
	}
}

func TestSDKEveryTypeSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))
	for _, tc := range sdkTypedCases() {
		final, _ := sdkSuspended(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{Model: sdkModel, Store: param.NewOpt(false),
			Tools: sdkAllTools(), Input: textInput(tc.directive)}, func(items []responses.ResponseOutputItemUnion, raw string) []responses.ResponseInputItemUnionParam {
			return []responses.ResponseInputItemUnionParam{sdkTypedStep(t, tc, items, raw)}
		})
		wantText(t, &final, tc.answer)
	}
}

// TestSDKTypedCallsHTTP is TestSDKTypedCallsWebSocket over HTTP: the
// apply_patch and shell calls, read and continued through
// client.Responses.New.
func TestSDKTypedCallsHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkBuiltinTools(),
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(typedScript)}})
	if err != nil {
		t.Fatal(sdkErrorDetail(err))
	}
	done, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Tools: sdkBuiltinTools(), PreviousResponseID: param.NewOpt(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: sdkTypedOutputs(t, first.Output)}})
	if err != nil {
		t.Fatal(sdkErrorDetail(err))
	}
	wantCompleted(t, done)
	wantText(t, done, "apply_patch returned: completed")
}
