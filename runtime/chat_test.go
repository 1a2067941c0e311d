package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// These tests drive POST /v1/chat/completions with the official Go SDK's
// chat client (New, NewStreaming and its ChatCompletionAccumulator), and
// with raw HTTP where the wire form itself is the point.

func sdkChatWeatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: param.NewOpt("Get the current weather for a location"),
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"location": map[string]any{"type": "string"}},
			"required":   []string{"location"},
		},
	})
}

// TestChatSDKToolLoop runs the SDK's documented tool loop: the model calls
// the function, the client appends the assistant message and a tool
// message, the model answers quoting the output.
func TestChatSDKToolLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)

	params := openai.ChatCompletionNewParams{
		Model: sdkModel,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("What's the weather like in Boston today?"),
		},
		Tools: []openai.ChatCompletionToolUnionParam{sdkChatWeatherTool()},
	}
	first, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("first completion: %v", err)
	}
	if first.Object != "chat.completion" || !strings.HasPrefix(first.ID, "chatcmpl-") || first.Model != sdkModel || first.Created == 0 {
		t.Errorf("completion header: %s", first.RawJSON())
	}
	if len(first.Choices) != 1 {
		t.Fatalf("%d choices: %s", len(first.Choices), first.RawJSON())
	}
	choice := first.Choices[0]
	if choice.FinishReason != "tool_calls" || len(choice.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call and finish_reason tool_calls: %s", first.RawJSON())
	}
	call := choice.Message.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"location":"Boston, MA"}` || !strings.HasPrefix(call.ID, "call_") {
		t.Errorf("tool call: %s", choice.Message.RawJSON())
	}
	if !strings.Contains(choice.Message.RawJSON(), `"content":null`) {
		t.Errorf("a message with only tool calls has content null: %s", choice.Message.RawJSON())
	}
	if u := first.Usage; u.PromptTokens == 0 || u.CompletionTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage: %s", first.Usage.RawJSON())
	}

	params.Messages = append(params.Messages, choice.Message.ToParam(), openai.ToolMessage("Sunny, 22 C.", call.ID))
	second, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second completion: %v", err)
	}
	msg := second.Choices[0].Message
	if want := "get_weather returned: Sunny, 22 C."; msg.Content != want || second.Choices[0].FinishReason != "stop" || len(msg.ToolCalls) != 0 {
		t.Errorf("answer %q finish %q, want %q and stop: %s", msg.Content, second.Choices[0].FinishReason, want, second.RawJSON())
	}
	if second.Usage.PromptTokens <= first.Usage.PromptTokens {
		t.Errorf("prompt tokens %d after the tool round, %d before", second.Usage.PromptTokens, first.Usage.PromptTokens)
	}
}

// TestChatSDKStreaming streams the same kind of exchange, parallel calls
// included, through the SDK's accumulator, and checks that streamed and
// non-streamed answers agree.
func TestChatSDKStreaming(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)

	for _, tc := range []struct {
		name  string
		input string
		calls [][2]string // name, arguments
		text  string
	}{
		{name: "text", input: "Tell me about streams.", text: `You said: "Tell me about streams."`},
		{name: "schema call", input: "Weather in Paris?", calls: [][2]string{{"get_weather", `{"location":"Boston, MA"}`}}},
		{name: "parallel calls", input: "call: get_weather {\"location\":\"Oslo\"} | get_weather {\"location\":\"Lima\"}",
			calls: [][2]string{{"get_weather", `{"location":"Oslo"}`}, {"get_weather", `{"location":"Lima"}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:         sdkModel,
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tc.input)},
				Tools:         []openai.ChatCompletionToolUnionParam{sdkChatWeatherTool()},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
			}
			if tc.calls == nil {
				params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt("none")}
			}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			var finished []openai.FinishedChatCompletionToolCall
			chunks := 0
			for stream.Next() {
				chunk := stream.Current()
				if !acc.AddChunk(chunk) {
					t.Fatalf("the accumulator refused chunk %d: %s", chunks, chunk.RawJSON())
				}
				if tool, ok := acc.JustFinishedToolCall(); ok {
					finished = append(finished, tool)
				}
				if chunk.Object != "chat.completion.chunk" || chunk.ID != acc.ID {
					t.Errorf("chunk %d header: %s", chunks, chunk.RawJSON())
				}
				chunks++
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			stream.Close()
			got := acc.Choices[0]
			if got.Message.Role != "assistant" || got.Message.Content != tc.text {
				t.Errorf("content %q (role %q), want %q", got.Message.Content, got.Message.Role, tc.text)
			}
			if len(got.Message.ToolCalls) != len(tc.calls) {
				t.Fatalf("%d tool calls, want %d: %+v", len(got.Message.ToolCalls), len(tc.calls), got.Message.ToolCalls)
			}
			for i, c := range tc.calls {
				gc := got.Message.ToolCalls[i]
				if gc.Function.Name != c[0] || gc.Function.Arguments != c[1] || gc.ID == "" {
					t.Errorf("call %d = %s %s (%s), want %s %s", i, gc.Function.Name, gc.Function.Arguments, gc.ID, c[0], c[1])
				}
			}
			if len(tc.calls) > 1 && len(finished) < len(tc.calls)-1 {
				t.Errorf("the accumulator saw %d calls finish, want at least %d", len(finished), len(tc.calls)-1)
			}
			wantFinish := "stop"
			if tc.calls != nil {
				wantFinish = "tool_calls"
			}
			if got.FinishReason != wantFinish {
				t.Errorf("finish_reason %q, want %q", got.FinishReason, wantFinish)
			}
			if acc.Usage.CompletionTokens == 0 || acc.Usage.PromptTokens == 0 {
				t.Errorf("no usage chunk: %+v", acc.Usage)
			}

			// The same request without stream gives the same answer.
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
			whole, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("non-streamed: %v", err)
			}
			w := whole.Choices[0]
			if w.Message.Content != got.Message.Content || len(w.Message.ToolCalls) != len(got.Message.ToolCalls) ||
				w.FinishReason != got.FinishReason || whole.Usage.CompletionTokens != acc.Usage.CompletionTokens {
				t.Errorf("non-streamed answer differs: %s", whole.RawJSON())
			}
			// The same calls, under ids of their own: each completion
			// draws its calls' ids from its id, as a real server's are
			// unique, so a client never mistakes one's for the other's.
			for i := range w.Message.ToolCalls {
				wc, gc := w.Message.ToolCalls[i], got.Message.ToolCalls[i]
				if wc.Function.Name != gc.Function.Name || wc.Function.Arguments != gc.Function.Arguments || wc.ID == "" || wc.ID == gc.ID {
					t.Errorf("call %d: %s %s (%s) streamed, %s %s (%s) not", i,
						gc.Function.Name, gc.Function.Arguments, gc.ID, wc.Function.Name, wc.Function.Arguments, wc.ID)
				}
			}
		})
	}
}

// chatSSE posts a streaming chat request and returns each event's data,
// checking the framing: "data: ...\n\n" only, ending with [DONE] unless
// the stream ends with an error.
func chatSSE(t *testing.T, h *harness, body map[string]any) (status int, events []string) {
	t.Helper()
	body["stream"] = true
	b, _ := json.Marshal(body)
	resp, err := http.Post(h.base+"/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, []string{string(raw)}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 16<<20)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: ") && blank:
			events = append(events, strings.TrimPrefix(line, "data: "))
			blank = false
		case line == "" && !blank:
			blank = true
		default:
			t.Fatalf("unexpected SSE line %q in\n%s", line, raw)
		}
	}
	return resp.StatusCode, events
}

func TestChatStreamWireForm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}}}}}
	_, events := chatSSE(t, h, map[string]any{
		"model":          sdkModel,
		"messages":       []any{map[string]any{"role": "user", "content": "call: get_weather {\"location\":\"Rome\"}"}},
		"tools":          tools,
		"stream_options": map[string]any{"include_usage": true},
	})
	if n := len(events); n < 5 || events[n-1] != "[DONE]" {
		t.Fatalf("want role, call, arguments, finish, usage chunks and [DONE], got %q", events)
	}
	type chunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Index        int                `json:"index"`
			Delta        protocol.ChatDelta `json:"delta"`
			FinishReason *string            `json:"finish_reason"`
		} `json:"choices"`
		Usage *protocol.ChatUsage `json:"usage"`
	}
	var chunks []chunk
	for _, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %s: %v", e, err)
		}
		chunks = append(chunks, c)
	}
	first := chunks[0].Choices[0].Delta
	if first.Role != "assistant" || len(first.ToolCalls) != 1 || first.ToolCalls[0].Index == nil || *first.ToolCalls[0].Index != 0 ||
		first.ToolCalls[0].ID == "" || first.ToolCalls[0].Type != "function" || first.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("first chunk carries the role and the call's id, type and name: %s", events[0])
	}
	var args strings.Builder
	for i, c := range chunks[1 : len(chunks)-2] {
		d := c.Choices[0].Delta
		if len(d.ToolCalls) != 1 || *d.ToolCalls[0].Index != 0 || d.ToolCalls[0].ID != "" || d.ToolCalls[0].Function.Name != "" {
			t.Errorf("argument chunk %d: %s", i, events[i+1])
		}
		args.WriteString(d.ToolCalls[0].Function.Arguments)
	}
	if args.String() != `{"location":"Rome"}` {
		t.Errorf("arguments %q", args.String())
	}
	fin := chunks[len(chunks)-2]
	if fr := fin.Choices[0].FinishReason; fr == nil || *fr != "tool_calls" || fin.Usage != nil {
		t.Errorf("finish chunk: %s", events[len(events)-3])
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != len(chunks)-3 {
		t.Errorf("usage chunk (want %d completion tokens): %s", len(chunks)-3, events[len(events)-2])
	}
	if !strings.Contains(events[len(events)-2], `"choices":[]`) {
		t.Errorf("the usage chunk's choices is an empty array: %s", events[len(events)-2])
	}
	for i, c := range chunks {
		if c.ID != chunks[0].ID || c.Object != "chat.completion.chunk" {
			t.Errorf("chunk %d id/object: %s", i, events[i])
		}
	}
}

func TestChatMaxTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               sdkModel,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something rather long, please, at length.")},
		MaxCompletionTokens: param.NewOpt[int64](3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.FinishReason != "length" || resp.Usage.CompletionTokens != 3 || c.Message.Content == "" {
		t.Errorf("want 3 tokens and finish_reason length: %s", resp.RawJSON())
	}
}

func TestChatRequestErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	user := map[string]any{"role": "user", "content": "hi"}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"not json", []byte(`{"model":`), 400, "invalid_json", ""},
		{"no model", map[string]any{"messages": []any{user}}, 400, "missing_required_parameter", "model"},
		{"unknown model", map[string]any{"model": "nope", "messages": []any{user}}, 404, "model_not_found", "model"},
		{"no messages", map[string]any{"model": sdkModel, "messages": []any{}}, 400, "invalid_value", "messages"},
		{"bad role", map[string]any{"model": sdkModel, "messages": []any{map[string]any{"role": "function", "content": "x"}}}, 400, "invalid_value", "messages[0].role"},
		{"user without content", map[string]any{"model": sdkModel, "messages": []any{map[string]any{"role": "user"}}}, 400, "missing_required_parameter", "messages[0].content"},
		{"orphan tool message", map[string]any{"model": sdkModel, "messages": []any{user,
			map[string]any{"role": "tool", "tool_call_id": "call_x", "content": "42"}}}, 400, "tool_call_not_found", "messages[1].tool_call_id"},
		{"bad call arguments", map[string]any{"model": sdkModel, "messages": []any{user, map[string]any{"role": "assistant",
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{"}}}}}},
			400, "invalid_value", "messages[1].tool_calls[0].function.arguments"},
		{"n", map[string]any{"model": sdkModel, "messages": []any{user}, "n": 2}, 400, "unsupported_parameter", "n"},
		{"max_tokens", map[string]any{"model": sdkModel, "messages": []any{user}, "max_tokens": 0}, 400, "invalid_value", "max_tokens"},
		{"tool type", map[string]any{"model": sdkModel, "messages": []any{user}, "tools": []any{map[string]any{"type": "custom"}}}, 400, "invalid_value", "tools[0].type"},
		{"tool choice", map[string]any{"model": sdkModel, "messages": []any{user},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "ghost"}}}, 400, "invalid_value", "tool_choice"},
		{"image part in a system message", map[string]any{"model": sdkModel, "messages": []any{map[string]any{"role": "system",
			"content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://x/y.png"}}}}, user}}, 400, "invalid_value", "messages[0].content[0].type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body := h.post(t, "/chat/completions", tc.body)
			var e struct {
				Error protocol.ErrorPayload `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body: %v: %s", err, body)
			}
			code, param := "", ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if e.Error.Param != nil {
				param = *e.Error.Param
			}
			if status != tc.status || code != tc.code || param != tc.param || e.Error.Message == "" {
				t.Errorf("got %d %s (%s), want %d %s (%s): %s", status, code, param, tc.status, tc.code, tc.param, body)
			}
		})
	}
}

// samplerFunc adapts a function to runtime.Sampler, for backends that fail.
type samplerFunc func(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error)

func (f samplerFunc) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	return f(ctx, req, emit)
}

// TestChatSamplerErrors: a backend error before any output is an HTTP error
// with the backend's status; after output began, a last error event the SDK
// reports with the message.
func TestChatSamplerErrors(t *testing.T) {
	t.Parallel()
	fail := protocol.Errorf(http.StatusBadGateway, protocol.CodeUpstreamError, "", "The upstream model server fell over.")
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{
		"early": samplerFunc(func(context.Context, *sampler.Request, func(sampler.Delta)) (sampler.Result, error) {
			return sampler.Result{}, fail
		}),
		"late": samplerFunc(func(_ context.Context, _ *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
			emit(sampler.Delta{Kind: sampler.TextStart})
			emit(sampler.Delta{Kind: sampler.TextDelta, Text: "Hal"})
			return sampler.Result{OutputTokens: 1}, fail
		}),
	}})
	ctx := sdkContext(t)
	client := sdkClient(t, h)
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}

	for _, model := range []string{"early", "late"} {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, Messages: msgs})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "upstream_error" || apiErr.Message != fail.Message {
			t.Errorf("%s, not streamed: %v, want a 502 upstream_error", model, err)
		}
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "early", Messages: msgs})
	for stream.Next() {
	}
	var apiErr *openai.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway {
		t.Errorf("early, streamed: %v, want a 502", err)
	}
	stream.Close()

	stream = client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "late", Messages: msgs})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), fail.Message) {
		t.Errorf("late, streamed: %v, want the backend's message", err)
	}
	stream.Close()
	if acc.Choices[0].Message.Content != "Hal" {
		t.Errorf("content before the error %q", acc.Choices[0].Message.Content)
	}
}

// TestChatClientGone: a client that drops a stream cancels the sample.
func TestChatClientGone(t *testing.T) {
	t.Parallel()
	cancelled := make(chan error, 1)
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{TPS: 10})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{
		"slow": samplerFunc(func(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
			res, err := scripted.Sample(ctx, req, emit)
			cancelled <- err
			return res, err
		}),
	}})
	ctx, cancel := context.WithCancel(sdkContext(t))
	client := sdkClient(t, h)
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "slow",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("a long question ", 20))},
	})
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	cancel()
	stream.Close()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("sample ended with %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second): // the whole answer would take about 5 s
		t.Fatal("the sample went on after the client left")
	}
}

// TestChatStalledClient: a chat stream whose client stops reading does not
// hold up the other streams its model's engine steps (the sampler's emit
// runs on the engine's goroutine, which must never wait on a client), and
// it is cut once it falls Timeouts.SlowClient behind.
func TestChatStalledClient(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	engine := sampler.NewEngineShards(1) // both streams in one batch
	fast, paced := sampler.NewScripted(r, sampler.Timing{TPS: 1e6}), sampler.NewScripted(r, sampler.Timing{TPS: 1000})
	fast.SetEngine(engine)
	paced.SetEngine(engine)
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{"fast": fast, "paced": paced},
		Timeouts: runtime.Timeouts{SlowClient: time.Second, Write: time.Second}})
	body := func(model string, argBytes int) []byte {
		args, _ := json.Marshal(map[string]string{"text": strings.Repeat("lorem ipsum dolor sit amet ", argBytes/27)})
		b, _ := json.Marshal(map[string]any{"model": model, "stream": true,
			"messages": []map[string]string{{"role": "user", "content": "call: write " + string(args)}},
			"tools":    []map[string]any{{"type": "function", "function": map[string]any{"name": "write", "parameters": map[string]any{"type": "object"}}}}})
		return b
	}
	// The stalled client: tens of MB of chunks (more than the sockets
	// hold), none of them read.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := body("fast", 1<<20)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: tether\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(big))
	if _, err := conn.Write(big); err != nil {
		t.Fatal(err)
	}
	// A stream of about two seconds, paced beside it on the same engine.
	resp, err := http.Post(h.base+"/chat/completions", "application/json", bytes.NewReader(body("paced", 8000)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		b, err := io.ReadAll(resp.Body)
		if err == nil && !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
			err = fmt.Errorf("the stream ended without [DONE]: %.200q", b[max(0, len(b)-200):])
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // the paced stream takes ~2 s; without the stall's cut, forever
		t.Fatal("the paced stream stalled behind the client that stopped reading")
	}
}
