package sampler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/protocol"
)

// These tests feed the upstream stream decoders byte streams: real OpenAI
// Responses streams (schematest.Recordings), and chat streams in the
// shapes the servers tether targets send, including the odd ones (llama.cpp's
// "error:" field, vLLM's flat errors, calls without an index, interleaved
// parallel calls) that a tether upstream never produces. The runtime's
// upstream chain tests run the backend against real servers.

// wellFormed checks a delta sequence: parts that never nest or interleave,
// each a Start, tokens of its kind (calls repeating their id and name), then
// PartEnd.
func wellFormed(ds []Delta) error {
	var open *Delta
	for i, d := range ds {
		switch d.Kind {
		case TextStart, CallStart:
			if open != nil {
				return fmt.Errorf("delta %d: %s inside an open part", i, d.Kind)
			}
			if d.Kind == CallStart && (d.CallID == "" || d.Name == "") {
				return fmt.Errorf("delta %d: call without id or name", i)
			}
			open = &ds[i]
		case TextDelta, ArgsDelta, PartEnd:
			if open == nil {
				return fmt.Errorf("delta %d: %s outside a part", i, d.Kind)
			}
			if (d.Kind == TextDelta) != (open.Kind == TextStart) && d.Kind != PartEnd {
				return fmt.Errorf("delta %d: %s in a %s part", i, d.Kind, open.Kind)
			}
			if d.CallID != open.CallID || d.Name != open.Name {
				return fmt.Errorf("delta %d: %s of %s/%s in part %s/%s", i, d.Kind, d.CallID, d.Name, open.CallID, open.Name)
			}
			if d.Kind == PartEnd {
				open = nil
			}
		}
	}
	if open != nil {
		return errors.New("the last part has no PartEnd")
	}
	return nil
}

// summary renders deltas compactly: "T:Hello|C:call_1/f:{\"a\"|E" ...
func summary(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		switch d.Kind {
		case TextStart:
			b.WriteString("[text ")
		case CallStart:
			b.WriteString("[" + d.Name + " ")
		case TextDelta, ArgsDelta:
			b.WriteString(d.Text)
		case PartEnd:
			if d.Incomplete {
				b.WriteString(" (cut)")
			}
			b.WriteString("]")
		}
	}
	return b.String()
}

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// chunk is a chat.completion.chunk with one choice's delta.
func chunk(delta string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

func finishChunk(reason string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

func callPiece(index int, id, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	b, _ := json.Marshal(map[string]any{"tool_calls": []any{tc}})
	return chunk(string(b))
}

func decodeChat(t *testing.T, stream string) ([]Delta, Result, error) {
	t.Helper()
	var ds []Delta
	res, err := decodeChatStream(strings.NewReader(stream), func(d Delta) { ds = append(ds, d) })
	check := wellFormed
	if err != nil {
		check = wellFormedPrefix
	}
	if werr := check(ds); werr != nil {
		t.Fatalf("%v: %s", werr, summary(ds))
	}
	return ds, res, err
}

func TestDecodeChatStream(t *testing.T) {
	t.Parallel()
	usage := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27,"prompt_tokens_details":{"cached_tokens":16}}}`
	for _, tc := range []struct {
		name, stream string
		want         string
		res          Result
	}{
		{"text", sse(chunk(`{"role":"assistant","content":""}`), chunk(`{"content":"Hel"}`), chunk(`{"content":"lo"}`), finishChunk("stop"), usage, "[DONE]"),
			"[text Hello]", Result{OutputTokens: 7, PromptTokens: 20, CachedPromptTokens: 16}},
		{"no usage counts deltas", sse(chunk(`{"content":"a"}`), chunk(`{"content":"b"}`), finishChunk("stop"), "[DONE]"),
			"[text ab]", Result{OutputTokens: 2}},
		{"sequential calls", sse(chunk(`{"role":"assistant","content":null}`),
			callPiece(0, "call_a", "f", ""), callPiece(0, "", "", `{"x":`), callPiece(0, "", "", `1}`),
			callPiece(1, "call_b", "g", `{}`), finishChunk("tool_calls"), "[DONE]"),
			`[f {"x":1}][g {}]`, Result{OutputTokens: 3}},
		{"interleaved calls", sse(
			callPiece(0, "call_a", "f", `{"x":`), callPiece(1, "call_b", "g", `{"y":`),
			callPiece(1, "", "", `2}`), callPiece(0, "", "", `1}`), finishChunk("tool_calls"), "[DONE]"),
			`[f {"x":1}][g {"y":2}]`, Result{OutputTokens: 4}},
		{"text, call, text", sse(chunk(`{"content":"Let me look."}`), callPiece(0, "call_a", "f", `{}`), chunk(`{"content":"Done."}`), finishChunk("stop"), "[DONE]"),
			`[text Let me look.][f {}][text Done.]`, Result{OutputTokens: 3}},
		{"name in pieces, arguments first", sse(callPiece(0, "call_a", "", `{"q":`), callPiece(0, "", "get_", ""), callPiece(0, "", "weather", `1}`), finishChunk("tool_calls"), "[DONE]"),
			`[get_weather {"q":1}]`, Result{OutputTokens: 2}},
		{"whole calls without an index (Ollama)", sse(
			chunk(`{"tool_calls":[{"id":"call_1","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","function":{"name":"g","arguments":"{}"}}]}`),
			finishChunk("stop"), "[DONE]"),
			`[f {"a":1}][g {}]`, Result{OutputTokens: 2}},
		{"index -1 is a lone call", sse(callPiece(-1, "call_a", "f", `{}`), finishChunk("tool_calls"), "[DONE]"), `[f {}]`, Result{OutputTokens: 1}},
		{"length cuts the last part", sse(chunk(`{"content":"ok"}`), callPiece(0, "call_a", "f", `{"long`), finishChunk("length"), "[DONE]"),
			`[text ok][f {"long (cut)]`, Result{OutputTokens: 2, Incomplete: true}},
		{"no [DONE] after the finish", sse(chunk(`{"content":"x"}`), finishChunk("stop")), "[text x]", Result{OutputTokens: 1}},
		{"CRLF, comments, no final blank line", ": keep-alive\r\n\r\ndata: " + chunk(`{"content":"x"}`) + "\r\n\r\ndata: " + finishChunk("stop") + "\r\n\r\ndata: [DONE]",
			"[text x]", Result{OutputTokens: 1}},
		{"the tier that served it", sse(`{"id":"c1","object":"chat.completion.chunk","service_tier":"flex","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`, "[DONE]"),
			"[text x]", Result{OutputTokens: 1, ServiceTier: "flex"}},
		{"reasoning_content is skipped", sse(chunk(`{"reasoning_content":"hmm"}`), chunk(`{"content":"x"}`), finishChunk("stop"), "[DONE]"),
			"[text x]", Result{OutputTokens: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ds, res, err := decodeChat(t, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(ds); got != tc.want {
				t.Errorf("parts %s, want %s", got, tc.want)
			}
			if res != tc.res {
				t.Errorf("result %+v, want %+v", res, tc.res)
			}
		})
	}
}

// TestDecodeChatStreamLatency: calls streamed one after another pass through
// as they arrive; only interleaved ones are held back.
func TestDecodeChatStreamLatency(t *testing.T) {
	t.Parallel()
	events := []string{
		callPiece(0, "call_a", "f", `{"x":1}`),
		callPiece(1, "call_b", "g", `{"y":`),
		callPiece(1, "", "", `2}`),
		finishChunk("tool_calls"), "[DONE]",
	}
	r := &eventReader{events: events}
	var at []int // events read when each delta came out
	var ds []Delta
	if _, err := decodeChatStream(r, func(d Delta) { ds = append(ds, d); at = append(at, r.read) }); err != nil {
		t.Fatal(err)
	}
	// f's PartEnd and g's CallStart come out when g's first piece is read,
	// g's second argument piece when it is read.
	want := []int{1, 1, 2, 2, 2, 3, 5}
	if !slices.Equal(at, want) {
		t.Errorf("deltas %s came out after events %v, want %v", summary(ds), at, want)
	}
}

// eventReader serves one SSE event per Read.
type eventReader struct {
	events []string
	read   int
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.read == len(r.events) {
		return 0, io.EOF
	}
	n := copy(p, "data: "+r.events[r.read]+"\n\n")
	r.read++
	return n, nil
}

func TestDecodeChatStreamErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, stream, says string }{
		{"OpenAI error chunk", sse(chunk(`{"content":"x"}`), `{"error":{"message":"overloaded","type":"server_error"}}`), "reported an error: overloaded"},
		{"vLLM flat error", sse(`{"object":"error","message":"context too long","type":"BadRequestError","code":400}`), "reported an error: context too long"},
		{"llama.cpp error field", "error: {\"code\":500,\"message\":\"slot unavailable\",\"type\":\"server_error\"}\n\n", "reported an error: slot unavailable"},
		{"error as a string", sse(`{"error":"boom"}`), "reported an error: boom"},
		{"cut off", sse(chunk(`{"content":"x"}`)), "ended its stream before the completion finished"},
		{"not JSON", sse("{nope"), "sent a chunk that is not JSON: {nope"},
		{"call never named", sse(callPiece(0, "call_a", "", `{}`), finishChunk("tool_calls"), "[DONE]"), "sent a tool call without a function name"},
		{"arguments after a complete call", sse(callPiece(0, "call_a", "f", `{}`), callPiece(1, "call_b", "g", `{}`), callPiece(0, "", "", `{}`), finishChunk("tool_calls"), "[DONE]"),
			`sent more arguments for tool call "f"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decodeChat(t, tc.stream)
			var perr *protocol.Error
			if !errors.As(err, &perr) || perr.Status != http.StatusBadGateway || perr.Code != protocol.CodeUpstreamError || !strings.Contains(perr.Message, tc.says) {
				t.Fatalf("error %v, want a 502 upstream_error saying %q", err, tc.says)
			}
		})
	}
	// A null error field is no error (some servers send one on every chunk).
	if _, _, err := decodeChat(t, sse(`{"choices":[{"index":0,"delta":{"content":"x"}}],"error":null}`, finishChunk("stop"))); err != nil {
		t.Errorf("null error: %v", err)
	}
}

// loadOpenAIStream returns a recorded OpenAI Responses stream as SSE.
func loadOpenAIStream(t *testing.T, name string) (stream string, events []map[string]any) {
	t.Helper()
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(schematest.Recording(t, name)))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", e["type"], line)
	}
	return b.String(), events
}

// TestDecodeResponsesOpenAI decodes real OpenAI streams (reasoning items,
// a forced function call, text): the deltas carry exactly the text and
// arguments the stream's done events report.
func TestDecodeResponsesOpenAI(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"openai-recorded-text-stream.jsonl", "openai-recorded-function-call-stream.jsonl", "openai-recorded-fco-followup-stream.jsonl"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stream, events := loadOpenAIStream(t, name)
			var want strings.Builder
			var usage map[string]any
			var tier string
			for _, e := range events {
				switch e["type"] {
				case "response.output_item.done":
					item := e["item"].(map[string]any)
					switch item["type"] {
					case "message":
						want.WriteString("[text ")
						for _, c := range item["content"].([]any) {
							want.WriteString(c.(map[string]any)["text"].(string))
						}
						want.WriteString("]")
					case "function_call":
						fmt.Fprintf(&want, "[%s %s]", item["name"], item["arguments"])
					}
				case "response.completed":
					usage = e["response"].(map[string]any)["usage"].(map[string]any)
					tier = e["response"].(map[string]any)["service_tier"].(string)
				}
			}
			var ds []Delta
			res, err := decodeResponsesStream(strings.NewReader(stream), func(d Delta) { ds = append(ds, d) })
			if err != nil {
				t.Fatal(err)
			}
			if err := wellFormed(ds); err != nil {
				t.Fatal(err)
			}
			if got := summary(ds); got != want.String() || got == "" {
				t.Errorf("parts %s, want %s", got, want.String())
			}
			if res.OutputTokens != int(usage["output_tokens"].(float64)) || res.PromptTokens != int(usage["input_tokens"].(float64)) || res.Incomplete {
				t.Errorf("result %+v, usage %v", res, usage)
			}
			if res.ServiceTier != tier || tier == "" { // its created and in_progress say "auto"
				t.Errorf("service tier %q, want the completed response's %q", res.ServiceTier, tier)
			}
		})
	}
}

func respStream(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var h struct{ Type string }
		json.Unmarshal([]byte(e), &h)
		b.WriteString("event: " + h.Type + "\ndata: " + e + "\n\n")
	}
	return b.String()
}

func TestDecodeResponsesStream(t *testing.T) {
	t.Parallel()
	added := func(i int, item string) string {
		return fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":%s}`, i, item)
	}
	done := func(i int, item string) string {
		return fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":%s}`, i, item)
	}
	delta := func(typ string, i int, s string) string {
		return fmt.Sprintf(`{"type":"response.%s.delta","output_index":%d,"delta":%q}`, typ, i, s)
	}
	call := `{"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}","status":"completed"}`
	for _, tc := range []struct {
		name, stream, want string
		incomplete         bool
		says               string
	}{
		{name: "whole call in done only", stream: respStream(added(0, `{"type":"function_call","call_id":"call_1","name":"f","arguments":""}`), done(0, call),
			`{"type":"response.completed","response":{"status":"completed"}}`), want: `[f {"a":1}]`},
		{name: "interleaved items", stream: respStream(
			added(0, `{"type":"message","content":[]}`), added(1, `{"type":"function_call","call_id":"call_1","name":"f","arguments":""}`),
			delta("function_call_arguments", 1, `{"a":`), delta("output_text", 0, "Hi"), delta("function_call_arguments", 1, `1}`),
			done(1, call), done(0, `{"type":"message","status":"completed","content":[{"type":"output_text","text":"Hi"}]}`),
			`{"type":"response.completed","response":{"status":"completed"}}`), want: `[text Hi][f {"a":1}]`},
		{name: "incomplete", stream: respStream(added(0, `{"type":"message","content":[]}`), delta("output_text", 0, "Hel"),
			done(0, `{"type":"message","status":"incomplete","content":[{"type":"output_text","text":"Hel"}]}`),
			`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`),
			want: "[text Hel (cut)]", incomplete: true},
		{name: "failed", stream: respStream(`{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"the GPU melted"}}}`),
			says: "failed the response: the GPU melted"},
		{name: "nested error event", stream: respStream(`{"type":"error","error":{"type":"invalid_request_error","code":"x","message":"bad input"}}`), says: "reported an error: bad input"},
		{name: "flat error event", stream: respStream(`{"type":"error","code":"x","message":"rate limited","param":null}`), says: "reported an error: rate limited"},
		{name: "no terminal event", stream: respStream(added(0, `{"type":"message","content":[]}`), delta("output_text", 0, "x")),
			says: "ended its stream before the response completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ds []Delta
			res, err := decodeResponsesStream(strings.NewReader(tc.stream), func(d Delta) { ds = append(ds, d) })
			if werr := wellFormed(ds); werr != nil && tc.says == "" {
				t.Fatal(werr)
			}
			if tc.says != "" {
				var perr *protocol.Error
				if !errors.As(err, &perr) || perr.Code != protocol.CodeUpstreamError || !strings.Contains(perr.Message, tc.says) {
					t.Fatalf("error %v, want one saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(ds); got != tc.want || res.Incomplete != tc.incomplete {
				t.Errorf("parts %s (incomplete %v), want %s (%v)", got, res.Incomplete, tc.want, tc.incomplete)
			}
		})
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	stream := "event: a\ndata: 1\ndata: 2\n\n:comment\nid: 7\nretry: 10\n\ndata:3\r\n\r\nevent: ping\n\nfield-without-colon\ndata: {\"x\":\"a:b\"}\n\ndata: tail"
	r := newSSEReader(strings.NewReader(stream))
	var got []string
	for {
		ev, data, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev+"="+string(data))
	}
	want := []string{"a=1\n2", "=3", `={"x":"a:b"}`, "=tail"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	long := "data: " + strings.Repeat("x", maxSSEEvent+1) + "\n\n"
	if _, _, err := newSSEReader(strings.NewReader(long)).next(); !errors.Is(err, errSSETooLong) {
		t.Errorf("oversized event: %v", err)
	}
}

// FuzzDecodeChatStream: whatever the bytes, the decoder returns, and the
// deltas it emitted are well-formed parts.
func FuzzDecodeChatStream(f *testing.F) {
	f.Add(sse(callPiece(0, "call_a", "f", `{"x":`), callPiece(1, "call_b", "g", `{"y":`), callPiece(1, "", "", `2}`), callPiece(0, "", "", `1}`), finishChunk("tool_calls"), "[DONE]"))
	f.Add(sse(chunk(`{"content":"hi"}`), callPiece(0, "", "", `{}`), chunk(`{"content":"x"}`), finishChunk("length")))
	f.Add("error: {\"message\":\"x\"}\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		var ds []Delta
		decodeChatStream(strings.NewReader(stream), func(d Delta) { ds = append(ds, d) })
		if err := wellFormedPrefix(ds); err != nil {
			t.Fatalf("%v: %s", err, summary(ds))
		}
	})
}

// FuzzDecodeResponsesStream is FuzzDecodeChatStream for Responses streams.
func FuzzDecodeResponsesStream(f *testing.F) {
	f.Add(respStream(`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"c","name":"f"}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}`,
		`{"type":"response.output_text.delta","output_index":0,"delta":"a"}`,
		`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{}"}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","arguments":"{}"}}`,
		`{"type":"response.completed","response":{}}`))
	f.Fuzz(func(t *testing.T, stream string) {
		var ds []Delta
		decodeResponsesStream(strings.NewReader(stream), func(d Delta) { ds = append(ds, d) })
		if err := wellFormedPrefix(ds); err != nil {
			t.Fatalf("%v: %s", err, summary(ds))
		}
	})
}

// wellFormedPrefix is wellFormed for a sample that may have stopped with a
// part open (an error mid-stream).
func wellFormedPrefix(ds []Delta) error {
	if err := wellFormed(ds); err != nil && err.Error() != "the last part has no PartEnd" {
		return err
	}
	return nil
}
