package sampler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestUpstreamLogprobs: asked for logprobs, an upstream request asks its
// server for them (Responses: include and top_logprobs; Chat Completions:
// logprobs and top_logprobs), and the text deltas pass on what the server
// streams with each piece of text: a Responses output_text.delta's logprobs,
// a chat chunk's choices[0].logprobs.content.
func TestUpstreamLogprobs(t *testing.T) {
	t.Parallel()
	req := &Request{Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}}},
		Logprobs: true, TopLogprobs: 2}
	rb, _ := responsesBody("m", req)
	cb, _ := chatBody("m", req)
	if !strings.Contains(string(rb), `"include":["message.output_text.logprobs"],"top_logprobs":2`) {
		t.Errorf("responses body %s", rb)
	}
	if !strings.Contains(string(cb), `"logprobs":true,"top_logprobs":2`) {
		t.Errorf("chat body %s", cb)
	}
	if b, _ := responsesBody("m", &Request{}); strings.Contains(string(b), "logprobs") {
		t.Errorf("not asked: %s", b)
	}

	lp := func(tok string, p float64) string {
		b, _ := json.Marshal(protocol.LogProb{Token: tok, Logprob: p, Bytes: []int{}, TopLogprobs: []protocol.TopLogProb{}})
		return string(b)
	}
	streams := map[string]func(emit func(Delta)) (Result, error){
		"responses": func(emit func(Delta)) (Result, error) {
			return decodeResponsesStream(strings.NewReader(respStream(
				`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}`,
				`{"type":"response.output_text.delta","output_index":0,"delta":"Hel","logprobs":[`+lp("Hel", -0.5)+`]}`,
				`{"type":"response.output_text.delta","output_index":0,"delta":"lo!","logprobs":[`+lp("lo", -0.25)+`,`+lp("!", -1)+`]}`,
				`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","status":"completed","content":[{"type":"output_text","text":"Hello!"}]}}`,
				`{"type":"response.completed","response":{"status":"completed"}}`)), emit)
		},
		"chat": func(emit func(Delta)) (Result, error) {
			chunk := func(content, logprobs string) string {
				return `data: {"choices":[{"index":0,"delta":{"content":` + content + `},"logprobs":` + logprobs + `,"finish_reason":null}]}` + "\n\n"
			}
			return decodeChatStream(strings.NewReader(chunk(`"Hel"`, `{"content":[`+lp("Hel", -0.5)+`]}`)+
				chunk(`"lo!"`, `{"content":[`+lp("lo", -0.25)+`,`+lp("!", -1)+`]}`)+
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n"), emit)
		},
	}
	for name, decode := range streams {
		var got []string
		if _, err := decode(func(d Delta) {
			if d.Kind != TextDelta {
				return
			}
			var toks []string
			for _, l := range d.Logprobs {
				toks = append(toks, l.Token)
			}
			got = append(got, d.Text+"="+strings.Join(toks, "+"))
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s := strings.Join(got, " "); s != "Hel=Hel lo!=lo+!" {
			t.Errorf("%s: deltas %s", name, s)
		}
	}
}
