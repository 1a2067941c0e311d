package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// plainModel is a model that gives no logprobs (as an upstream that does
// not pass them on).
type plainModel struct{ inner runtime.Sampler }

func (m plainModel) Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
	return m.inner.Sample(ctx, req, emit)
}

// TestLogprobs: include message.output_text.logprobs with top_logprobs gives
// each token of the answer its logprob and alternatives, the same over
// HTTP (JSON and SSE) and a WebSocket and from one run to the next: in
// each delta for its text, in output_text.done and in the message's
// output_text. A model that cannot give them refuses the request.
func TestLogprobs(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		"tether-scripted": sampler.NewScripted(r, sampler.Timing{}),
		"plain":           plainModel{sampler.NewScripted(r, sampler.Timing{})},
	}})
	body := map[string]any{"model": "tether-scripted", "input": "Tell me about parsers.", "store": false,
		"include": []string{protocol.IncludeLogprobs}, "top_logprobs": 3}

	// The message's output_text, as JSON.
	type part struct {
		Text     string             `json:"text"`
		Logprobs []protocol.LogProb `json:"logprobs"`
	}
	var resp struct {
		Output []struct {
			Type    string `json:"type"`
			Content []part `json:"content"`
		} `json:"output"`
	}
	code, b := h.post(t, "/responses", body)
	if code != 200 || json.Unmarshal(b, &resp) != nil || len(resp.Output) == 0 || len(resp.Output[0].Content) == 0 {
		t.Fatalf("%d %s", code, b)
	}
	text := resp.Output[0].Content[0]
	check := func(what, text string, probs []protocol.LogProb) {
		t.Helper()
		var joined strings.Builder
		for _, lp := range probs {
			joined.WriteString(lp.Token)
			if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.Logprob >= 0 || len(lp.Bytes) != len(lp.Token) {
				t.Fatalf("%s: %+v", what, lp)
			}
		}
		if joined.String() != text || len(probs) != len(r.Tokens(text)) {
			t.Errorf("%s: %d logprobs of %q, for %d tokens of %q", what, len(probs), joined.String(), len(r.Tokens(text)), text)
		}
	}
	check("output_text over HTTP", text.Text, text.Logprobs)

	// Streamed, over SSE and a WebSocket: each delta's own, then done's.
	for _, stream := range []string{"sse", "websocket"} {
		var events [][]byte
		if stream == "sse" {
			body["stream"] = true
			events = h.sse(t, body)
			delete(body, "stream")
		} else {
			c := h.dial(t, nil)
			c.send(t, create(body))
			events = c.untilTerminal(t)
		}
		var all []protocol.LogProb
		for _, ev := range events {
			var e struct {
				Type     string              `json:"type"`
				Delta    string              `json:"delta"`
				Text     string              `json:"text"`
				Logprobs *[]protocol.LogProb `json:"logprobs"`
			}
			json.Unmarshal(ev, &e)
			switch e.Type {
			case "response.output_text.delta":
				check(stream+" delta", e.Delta, *e.Logprobs)
				all = append(all, *e.Logprobs...)
			case "response.output_text.done":
				check(stream+" done", e.Text, *e.Logprobs)
				for i, lp := range *e.Logprobs {
					if lp.Logprob != text.Logprobs[i].Logprob || lp.TopLogprobs[2].Logprob != text.Logprobs[i].TopLogprobs[2].Logprob {
						t.Fatalf("%s: token %d %+v, over HTTP %+v: not the same figures", stream, i, lp, text.Logprobs[i])
					}
				}
			}
		}
		check(stream+" deltas", text.Text, all)
	}

	// Over Chat Completions: choices[0].logprobs.content, whole and in each
	// chunk.
	chatBody := map[string]any{"model": "tether-scripted", "logprobs": true, "top_logprobs": 3,
		"messages": []any{map[string]any{"role": "user", "content": "Tell me about parsers."}}}
	code, b = h.post(t, "/chat/completions", chatBody)
	var chat struct {
		Choices []struct {
			Message  struct{ Content string } `json:"message"`
			Logprobs struct {
				Content []protocol.LogProb `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if code != 200 || json.Unmarshal(b, &chat) != nil || len(chat.Choices) != 1 {
		t.Fatalf("chat: %d %s", code, b)
	}
	check("chat", chat.Choices[0].Message.Content, chat.Choices[0].Logprobs.Content)
	chatBody["stream"] = true
	code, b = h.post(t, "/chat/completions", chatBody)
	var streamed []protocol.LogProb
	var streamedText strings.Builder
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta    struct{ Content string } `json:"delta"`
				Logprobs *struct {
					Content []protocol.LogProb `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(data), &chunk)
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				if ch.Logprobs == nil {
					t.Fatalf("a chunk of text without logprobs: %s", data)
				}
				check("chat chunk", ch.Delta.Content, ch.Logprobs.Content)
				streamed = append(streamed, ch.Logprobs.Content...)
				streamedText.WriteString(ch.Delta.Content)
			}
		}
	}
	check("chat stream", streamedText.String(), streamed)

	// Through an upstream: tether A serves remote-resp and remote-chat from
	// this server (B), asks it for logprobs and passes on B's, token for
	// token.
	a := newChain(t, h, runtime.Options{}, nil)
	for _, model := range sortedRemotes() {
		remote := map[string]any{"model": model, "input": "Tell me about parsers.", "store": false,
			"include": []string{protocol.IncludeLogprobs}, "top_logprobs": 3}
		code, b = a.post(t, "/responses", remote)
		var viaUp struct {
			Output []struct {
				Content []part `json:"content"`
			} `json:"output"`
		}
		if code != 200 || json.Unmarshal(b, &viaUp) != nil || len(viaUp.Output) == 0 || len(viaUp.Output[0].Content) == 0 {
			t.Fatalf("through %s: %d %s", model, code, b)
		}
		up := viaUp.Output[0].Content[0]
		check("through "+model, up.Text, up.Logprobs)
		for i := range up.Logprobs {
			if up.Logprobs[i].Logprob != text.Logprobs[i].Logprob {
				t.Fatalf("through %s, token %d: %+v, the upstream's own %+v", model, i, up.Logprobs[i], text.Logprobs[i])
			}
		}
	}

	// Without asking: none anywhere (the content part has no logprobs).
	code, b = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "Tell me about parsers.", "store": false})
	if code != 200 || strings.Contains(string(b), `"logprobs":[{`) {
		t.Errorf("logprobs not asked for: %d %s", code, b)
	}

	for _, tc := range []struct {
		body  map[string]any
		code  string
		param string
	}{
		{map[string]any{"model": "plain", "input": "x", "include": []string{protocol.IncludeLogprobs}}, "unsupported_parameter", "include"},
		{map[string]any{"model": "plain", "input": "x", "top_logprobs": 2}, "unsupported_parameter", "top_logprobs"},
		{map[string]any{"model": "tether-scripted", "input": "x", "top_logprobs": 21}, "invalid_value", "top_logprobs"},
		{map[string]any{"model": "plain", "logprobs": true, "messages": []any{map[string]any{"role": "user", "content": "x"}}}, "unsupported_parameter", "logprobs"},
		{map[string]any{"model": "tether-scripted", "top_logprobs": 2, "messages": []any{map[string]any{"role": "user", "content": "x"}}}, "invalid_value", "top_logprobs"},
	} {
		path := "/responses"
		if tc.body["messages"] != nil {
			path = "/chat/completions"
		}
		code, b := h.post(t, path, tc.body)
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Code != tc.code || e.Error.Param != tc.param {
			t.Errorf("%v: %d %s, want 400 %s (%s)", tc.body, code, b, tc.code, tc.param)
		}
	}
}
