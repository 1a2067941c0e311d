package sampler

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestChatBody checks the context as chat messages: instructions first,
// calls joining the assistant message before them, outputs as tool
// messages, a hosted search as a call and its output, reasoning dropped,
// the cache retention and the service tier passed on.
func TestChatBody(t *testing.T) {
	t.Parallel()
	img := "https://example.com/cat.png"
	req := &Request{
		Instructions: "Be brief.",
		Items: protocol.Items{
			&protocol.Message{ID: "msg_1", Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "Look: "}, &protocol.InputImage{ImageURL: &img}}},
			&protocol.Reasoning{ID: "rs_1"},
			&protocol.Message{ID: "msg_2", Role: protocol.RoleAssistant, Status: protocol.StatusCompleted, Content: protocol.Contents{&protocol.OutputText{Text: "Checking."}}},
			&protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "f", Arguments: `{"a":1}`},
			&protocol.FunctionCall{ID: "fc_2", CallID: "call_2", Name: "g", Arguments: `{}`},
			&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "one"}},
			&protocol.FunctionCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Parts: protocol.Contents{&protocol.InputText{Text: "two"}}}},
			&protocol.WebSearchCall{ID: "ws_1", Status: protocol.StatusCompleted, Action: &protocol.WebSearchAction{Type: "search", Query: "q",
				Sources: []protocol.WebSearchSource{{URL: "https://a", Title: "A", Snippet: "about a"}}}},
		},
		Tools: []protocol.Tool{
			{Type: protocol.ToolFunction, Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Type: protocol.ToolFunction, Name: "g"},
			{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type":"web_search"}`)},
		},
		ToolChoice:      protocol.ToolChoice{Mode: "required", Allowed: []protocol.ToolRef{{Type: "function", Name: "g"}, {Type: "web_search"}}},
		MaxOutputTokens: 50,
		CacheRetention:  protocol.Cache24h,
		ServiceTier:     "flex",
	}
	b, err := chatBody("m", req)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	want := map[string]any{}
	json.Unmarshal([]byte(`{
		"model": "m", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 50,
		"tool_choice": "required", "prompt_cache_retention": "24h", "service_tier": "flex",
		"tools": [
			{"type": "function", "function": {"name": "g"}},
			{"type": "function", "function": {"name": "web_search", "description": "Search the web. Returns the title, URL and a snippet of each result.",
				"parameters": {"type":"object","properties":{"query":{"type":"string","description":"What to search for."}},"required":["query"]}}}
		],
		"messages": [
			{"role": "system", "content": "Be brief."},
			{"role": "user", "content": [{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
				{"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "one"},
			{"role": "tool", "tool_call_id": "call_2", "content": "two"},
			{"role": "assistant", "tool_calls": [{"id": "ws_1", "type": "function", "function": {"name": "web_search", "arguments": "{\"query\":\"q\"}"}}]},
			{"role": "tool", "tool_call_id": "ws_1", "content": "1. A\nhttps://a\nabout a"}
		]}`), &want)
	if gb, _ := json.Marshal(got); !bytes.Equal(gb, mustJSON(want)) {
		t.Errorf("body\n%s\nwant\n%s", gb, mustJSON(want))
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestResponsesBody: items lose their ids and statuses, reasoning is
// dropped, allowed_tools, the token limit, the cache retention and the
// service tier pass through, nothing is stored.
func TestResponsesBody(t *testing.T) {
	t.Parallel()
	req := &Request{
		Items: protocol.Items{
			&protocol.Message{ID: "msg_1", Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}},
			&protocol.Reasoning{ID: "rs_1"},
			&protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "f", Arguments: `{}`, Status: protocol.StatusCompleted},
			&protocol.FunctionCallOutput{ID: "fco_1", CallID: "call_1", Output: protocol.ToolOutput{Text: "ok"}},
		},
		Tools:           []protocol.Tool{{Type: protocol.ToolFunction, Name: "f"}},
		ToolChoice:      protocol.ToolChoice{Allowed: []protocol.ToolRef{{Type: "function", Name: "f"}}},
		MaxOutputTokens: -3, // what the runtime passes when no limit was set
		CacheRetention:  protocol.CacheInMemory,
		ServiceTier:     "priority",
	}
	b, err := responsesBody("m", req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},` +
		`{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"ok"}],` +
		`"tools":[{"type":"function","name":"f","description":null,"parameters":null,"strict":null}],` +
		`"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"}]},"stream":true,"store":false,"prompt_cache_retention":"in_memory","service_tier":"priority"}`
	if string(b) != want {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
}
