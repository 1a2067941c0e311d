package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/runtime"
)

// These tests drive the server with the official Go SDK (openai-go v3) as a
// real client: the WebSocket mode through client.Responses.Connect and the
// HTTP/SSE transport through New, NewStreaming, Get, Delete and Models.List.

const sdkModel = "tether-scripted"

// sdkClient is an SDK client for h. Its HTTP transport is private to the
// test, so its idle keep-alive connections are closed in Cleanup and goleak
// sees no stray readLoop goroutines.
func sdkClient(t *testing.T, h *harness) openai.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(
		option.WithBaseURL(h.base+"/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	)
}

func sdkContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sdkConnect opens a Responses WebSocket that Cleanup closes.
func sdkConnect(t *testing.T, ctx context.Context, client openai.Client) *responses.ResponseConnection {
	t.Helper()
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func textInput(s string) responses.ResponsesClientEventResponseCreateInputUnionParam {
	return responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: param.NewOpt(s)}
}

func itemsInput(items ...responses.ResponseInputItemUnionParam) responses.ResponsesClientEventResponseCreateInputUnionParam {
	list := responses.ResponseInputParam(items)
	return responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &list}
}

func sdkWeatherTool() responses.ToolUnionParam {
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":       "object",
		"properties": map[string]any{"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
		"required":   []string{"location"},
	}, false)
	tool.OfFunction.Description = param.NewOpt("Get the current weather for a location")
	return tool
}

// sdkTurn sends a response.create and waits for its final response.
func sdkTurn(t *testing.T, ctx context.Context, conn *responses.ResponseConnection, ev responses.ResponsesClientEventResponseCreateParam) *responses.Response {
	t.Helper()
	if err := conn.Create(ctx, ev); err != nil {
		t.Fatalf("create: %v", err)
	}
	resp, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatalf("final response: %v", sdkErrorDetail(err))
	}
	return resp
}

// sdkErrorDetail adds the raw error event to a ResponseProtocolError, whose
// Error() says only "responses websocket API error".
func sdkErrorDetail(err error) error {
	var pe *responses.ResponseProtocolError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: %s", err, pe.Event.RawJSON())
	}
	return err
}

// rawStore is the response's store field, which the SDK's Response type
// does not model.
func rawStore(t *testing.T, resp *responses.Response) *bool {
	t.Helper()
	var r struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &r); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	return r.Store
}

func wantCompleted(t *testing.T, resp *responses.Response) {
	t.Helper()
	if resp.Status != responses.ResponseStatusCompleted {
		t.Fatalf("status %q, want completed: %s", resp.Status, resp.RawJSON())
	}
}

func wantText(t *testing.T, resp *responses.Response, want string) {
	t.Helper()
	if got := resp.OutputText(); !strings.Contains(got, want) {
		t.Fatalf("output text %q does not contain %q", got, want)
	}
}

func TestSDKWebSocketCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))

	resp := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel,
		Input: textInput("hello over the socket"),
		Store: param.NewOpt(false),
	})
	wantCompleted(t, resp)
	if resp.OutputText() == "" {
		t.Fatalf("empty output text: %s", resp.RawJSON())
	}
	wantText(t, resp, "hello over the socket")
	if !strings.HasPrefix(resp.ID, "resp_") {
		t.Errorf("id %q, want a resp_ prefix", resp.ID)
	}
	if resp.Model != sdkModel {
		t.Errorf("model %q, want %s", resp.Model, sdkModel)
	}
	if store := rawStore(t, resp); store == nil || *store {
		t.Errorf("store %v, want false: %s", store, resp.RawJSON())
	}
	if resp.Usage.InputTokens <= 0 {
		t.Errorf("usage input_tokens %d, want > 0: %s", resp.Usage.InputTokens, resp.Usage.RawJSON())
	}
	if resp.Usage.OutputTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
		t.Errorf("usage %s: want output_tokens > 0 and total = input + output", resp.Usage.RawJSON())
	}
}

func TestSDKWebSocketContinuation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))

	turn1 := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("My name is Alice."), Store: param.NewOpt(false),
	})
	wantCompleted(t, turn1)
	wantText(t, turn1, "My name is Alice.")
	if turn1.PreviousResponseID != "" {
		t.Errorf("turn 1 previous_response_id %q, want none", turn1.PreviousResponseID)
	}

	turn2 := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("What is my name?"), Store: param.NewOpt(false),
		PreviousResponseID: param.NewOpt(turn1.ID),
	})
	wantCompleted(t, turn2)
	wantText(t, turn2, "What is my name?")
	if turn2.PreviousResponseID != turn1.ID {
		t.Errorf("turn 2 previous_response_id %q, want %q", turn2.PreviousResponseID, turn1.ID)
	}
	if turn2.ID == turn1.ID {
		t.Errorf("turn 2 reuses id %q", turn1.ID)
	}
	// The continuation's context holds turn 1's input and output, so its
	// prompt is longer than turn 1's.
	if turn2.Usage.InputTokens <= turn1.Usage.InputTokens {
		t.Errorf("turn 2 input_tokens %d, want more than turn 1's %d", turn2.Usage.InputTokens, turn1.Usage.InputTokens)
	}

	// A tool round trip, chained from turn 2.
	tools := []responses.ToolUnionParam{sdkWeatherTool()}
	call := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("What's the weather like in Paris?"), Store: param.NewOpt(false),
		PreviousResponseID: param.NewOpt(turn2.ID), Tools: tools,
	})
	wantCompleted(t, call)
	var fc *responses.ResponseFunctionToolCall
	for _, it := range call.Output {
		if it.Type == "function_call" {
			c := it.AsFunctionCall()
			fc = &c
		}
	}
	if fc == nil {
		t.Fatalf("no function_call item in %s", call.RawJSON())
	}
	if fc.Name != "get_weather" || fc.CallID == "" {
		t.Fatalf("function call name %q call_id %q", fc.Name, fc.CallID)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(fc.Arguments), &args); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", fc.Arguments, err)
	}
	if s, _ := args["location"].(string); s == "" {
		t.Errorf("arguments %s lack the required location", fc.Arguments)
	}
	if call.PreviousResponseID != turn2.ID {
		t.Errorf("tool turn previous_response_id %q, want %q", call.PreviousResponseID, turn2.ID)
	}

	output := responses.ResponseInputItemParamOfFunctionCallOutput("Sunny, 21C")
	output.OfFunctionCallOutput.CallID = param.NewOpt(fc.CallID)
	done := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: itemsInput(output), Store: param.NewOpt(false),
		PreviousResponseID: param.NewOpt(call.ID), Tools: tools,
	})
	wantCompleted(t, done)
	wantText(t, done, "get_weather returned: Sunny, 21C")
	if done.PreviousResponseID != call.ID {
		t.Errorf("tool output turn previous_response_id %q, want %q", done.PreviousResponseID, call.ID)
	}
	for _, it := range done.Output {
		if it.Type == "function_call" {
			t.Errorf("the turn after the tool output calls a tool again: %s", done.RawJSON())
		}
	}
}

func TestSDKWebSocketUnknownPrevious(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))

	if err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("continue"), Store: param.NewOpt(false),
		PreviousResponseID: param.NewOpt("resp_nope"),
	}); err != nil {
		t.Fatalf("create: %v", err)
	}
	resp, err := conn.FinalResponse(ctx)
	var pe *responses.ResponseProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("FinalResponse = %v, %v; want a *responses.ResponseProtocolError", resp, err)
	}
	var ev struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Error  struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
		StreamID *string `json:"stream_id"`
	}
	raw := pe.Event.RawJSON()
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatalf("error event is not JSON: %v: %s", err, raw)
	}
	if ev.Type != "error" || ev.Status != 400 {
		t.Errorf("type %q status %d, want error 400: %s", ev.Type, ev.Status, raw)
	}
	if ev.Error.Code == nil || *ev.Error.Code != "previous_response_not_found" {
		t.Errorf("code, want previous_response_not_found: %s", raw)
	}
	if ev.Error.Param == nil || *ev.Error.Param != "previous_response_id" {
		t.Errorf("param, want previous_response_id: %s", raw)
	}
	if ev.Error.Type != "invalid_request_error" || !strings.Contains(ev.Error.Message, "resp_nope") {
		t.Errorf("error type %q message %q, want invalid_request_error naming resp_nope", ev.Error.Type, ev.Error.Message)
	}
	if ev.StreamID != nil {
		t.Errorf("default-lane error carries stream_id: %s", raw)
	}
	// The typed view agrees with the raw event.
	typed := pe.Event.OfResponsesServerEventResponseWsError
	if pe.Event.Type != "error" || typed.Status != 400 || typed.Error.Code != "previous_response_not_found" || typed.Error.Param != "previous_response_id" {
		t.Errorf("typed error event %+v does not match %s", typed, raw)
	}

	// The connection stays usable.
	again := sdkTurn(t, ctx, conn, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("start over"), Store: param.NewOpt(false),
	})
	wantCompleted(t, again)
	wantText(t, again, "start over")
	if again.PreviousResponseID != "" {
		t.Errorf("recovery turn previous_response_id %q, want none", again.PreviousResponseID)
	}
}

// laneResult is what one lane received for one response.
type laneResult struct {
	lane   string
	events []string // raw JSON
	resp   *responses.Response
	err    error
}

// collectLane receives one lane's events up to and including a terminal one.
func collectLane(ctx context.Context, name string, lane *responses.ResponseLane) laneResult {
	r := laneResult{lane: name}
	for {
		ev, err := lane.Recv(ctx)
		if err != nil {
			r.err = err
			return r
		}
		r.events = append(r.events, ev.RawJSON())
		switch ev.Type {
		case "response.completed":
			resp := ev.AsResponseCompleted().Response
			r.resp = &resp
			return r
		case "response.failed", "response.incomplete", "error":
			r.err = fmt.Errorf("lane %s ended with %s", name, ev.RawJSON())
			return r
		}
	}
}

func TestSDKWebSocketLanes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := sdkConnect(t, ctx, sdkClient(t, h))

	names := []string{"a", "b"}
	lanes := map[string]*responses.ResponseLane{}
	for _, name := range append(names, "c") {
		lane, err := conn.Lane(name)
		if err != nil {
			t.Fatalf("lane %s: %v", name, err)
		}
		t.Cleanup(lane.Close)
		lanes[name] = lane
	}
	input := func(name string) string { return "this is lane " + name + " speaking" }

	// Send both creates concurrently before receiving anything.
	var wg sync.WaitGroup
	sendErrs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			sendErrs[i] = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
				Model: sdkModel, Input: textInput(input(name)), Store: param.NewOpt(false),
				StreamID: param.NewOpt(name),
			})
		})
	}
	wg.Wait()
	for i, err := range sendErrs {
		if err != nil {
			t.Fatalf("create on lane %s: %v", names[i], err)
		}
	}

	results := make([]laneResult, len(names))
	for i, name := range names {
		wg.Go(func() { results[i] = collectLane(ctx, name, lanes[name]) })
	}
	wg.Wait()

	ids := map[string]bool{}
	first := map[string]*responses.Response{}
	for _, r := range results {
		if r.err != nil {
			t.Fatalf("lane %s: %v", r.lane, sdkErrorDetail(r.err))
		}
		wantCompleted(t, r.resp)
		wantText(t, r.resp, input(r.lane))
		for _, other := range names {
			if other != r.lane && strings.Contains(r.resp.OutputText(), input(other)) {
				t.Errorf("lane %s got lane %s's answer: %q", r.lane, other, r.resp.OutputText())
			}
		}
		if ids[r.resp.ID] {
			t.Errorf("lanes share response id %s", r.resp.ID)
		}
		ids[r.resp.ID] = true
		first[r.lane] = r.resp
		if len(r.events) < 3 {
			t.Errorf("lane %s got only %d events", r.lane, len(r.events))
		}
		for i, raw := range r.events {
			var ev struct {
				Type           string  `json:"type"`
				StreamID       *string `json:"stream_id"`
				SequenceNumber *int    `json:"sequence_number"`
				Response       *struct {
					ID string `json:"id"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(raw), &ev); err != nil {
				t.Fatalf("lane %s event %d: %v: %s", r.lane, i, err, raw)
			}
			if ev.StreamID == nil || *ev.StreamID != r.lane {
				t.Errorf("lane %s event %d (%s) stream_id, want %q: %s", r.lane, i, ev.Type, r.lane, raw)
			}
			if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
				t.Errorf("lane %s event %d (%s) sequence_number, want %d: %s", r.lane, i, ev.Type, i, raw)
			}
			if ev.Response != nil && ev.Response.ID != r.resp.ID {
				t.Errorf("lane %s event %d (%s) is for response %s, want %s", r.lane, i, ev.Type, ev.Response.ID, r.resp.ID)
			}
		}
		if typ := eventType(t, []byte(r.events[0])); typ != "response.created" {
			t.Errorf("lane %s first event %s, want response.created", r.lane, typ)
		}
	}

	// Each lane caches its own latest response: continue both, through the
	// lanes' FinalResponse this time.
	for _, name := range names {
		if err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
			Model: sdkModel, Input: textInput("lane " + name + " again"), Store: param.NewOpt(false),
			StreamID: param.NewOpt(name), PreviousResponseID: param.NewOpt(first[name].ID),
		}); err != nil {
			t.Fatalf("continue lane %s: %v", name, err)
		}
	}
	for _, name := range names {
		resp, err := lanes[name].FinalResponse(ctx)
		if err != nil {
			t.Fatalf("lane %s continuation: %v", name, sdkErrorDetail(err))
		}
		wantCompleted(t, resp)
		wantText(t, resp, "lane "+name+" again")
		if resp.PreviousResponseID != first[name].ID {
			t.Errorf("lane %s continuation previous_response_id %q, want %q", name, resp.PreviousResponseID, first[name].ID)
		}
	}

	// A request-scoped error on a named lane carries its stream_id, so the
	// SDK routes it to that lane.
	if err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{
		Model: sdkModel, Input: textInput("continue"), Store: param.NewOpt(false),
		StreamID: param.NewOpt("c"), PreviousResponseID: param.NewOpt("resp_nope"),
	}); err != nil {
		t.Fatalf("create on lane c: %v", err)
	}
	_, err := lanes["c"].FinalResponse(ctx)
	var pe *responses.ResponseProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("lane c FinalResponse error %v, want a *responses.ResponseProtocolError", err)
	}
	if e := pe.Event.OfResponsesServerEventResponseWsError; e.StreamID != "c" || e.Status != 400 || e.Error.Code != "previous_response_not_found" {
		t.Errorf("lane c error event: %s", pe.Event.RawJSON())
	}
}

func TestSDKStreamingSSE(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: sdkModel,
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("Count from 1 to 5.")},
	})
	t.Cleanup(func() { stream.Close() })
	var (
		types  []string
		deltas strings.Builder
		done   string
		final  *responses.Response
	)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Errorf("event %d (%s) sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.output_text.done":
			done = ev.AsResponseOutputTextDone().Text
		case "response.completed":
			resp := ev.AsResponseCompleted().Response
			final = &resp
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(types) < 3 {
		t.Fatalf("events %v", types)
	}
	if types[0] != "response.created" {
		t.Errorf("first event %s, want response.created", types[0])
	}
	if types[len(types)-1] != "response.completed" || final == nil {
		t.Fatalf("last event %s, want response.completed: %v", types[len(types)-1], types)
	}
	wantCompleted(t, final)
	wantText(t, final, "Count from 1 to 5.")
	if deltas.String() != final.OutputText() || done != final.OutputText() {
		t.Errorf("deltas %q, output_text.done %q, final output text %q: want all equal", deltas.String(), done, final.OutputText())
	}

	// Non-streaming create, stored by default, then Get and Delete.
	created, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: sdkModel,
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("remember me")},
	})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	wantCompleted(t, created)
	wantText(t, created, "remember me")
	if store := rawStore(t, created); store == nil || !*store {
		t.Errorf("store %v, want the default true: %s", store, created.RawJSON())
	}
	got, err := client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("get %s: %v", created.ID, err)
	}
	if got.ID != created.ID || got.Status != created.Status || got.OutputText() != created.OutputText() {
		t.Errorf("get = %s %s %q, want %s %s %q", got.ID, got.Status, got.OutputText(), created.ID, created.Status, created.OutputText())
	}
	if err := client.Responses.Delete(ctx, created.ID); err != nil {
		t.Fatalf("delete %s: %v", created.ID, err)
	}
	_, err = client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("get after delete = %v, want a 404 *openai.Error", err)
	}
}

func TestSDKModels(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatalf("list models: %v", err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.ID == sdkModel {
			if m.Object != "model" {
				t.Errorf("object %q, want model", m.Object)
			}
			return
		}
	}
	t.Fatalf("models %v lack %s", ids, sdkModel)
}
