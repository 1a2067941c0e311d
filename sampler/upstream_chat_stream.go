package sampler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tether-run/tether/protocol"
)

// A Chat Completions upstream's streamed chunks, turned into deltas.

// chatMayEnd: text may end whenever a later part begins; a call once its
// arguments are a complete JSON value, which no more text can extend.
func chatMayEnd(p *upPart) bool {
	return !p.call || json.Valid([]byte(p.text.String()))
}

// chatChunk is a streamed chunk, or an error in its place: {"error": ...}
// (OpenAI, llama.cpp) or {"object": "error", "message": ...} (vLLM).
type chatChunk struct {
	Object  string                `json:"object"`
	Message string                `json:"message"`
	Choices []protocol.ChatChoice `json:"choices"`
	Usage   *protocol.ChatUsage   `json:"usage"`
	Error   json.RawMessage       `json:"error"`
	// ServiceTier is the tier serving the completion (OpenAI sends it in
	// every chunk).
	ServiceTier string `json:"service_tier"`
}

// chatDecoder routes chat deltas to parts.
type chatDecoder struct {
	a     *assembler
	text  *upPart            // the newest text part
	calls map[int]*upPart    // by tool call index
	byID  map[string]*upPart // by id, for servers that send no index
	last  *upPart            // the newest call
	tier  string             // the service tier the server said served it
}

// decodeChatStream reads a chat.completion.chunk stream to its end.
func decodeChatStream(r io.Reader, emit func(Delta)) (Result, error) {
	sr := newSSEReader(r)
	a := &assembler{emit: emit, mayEnd: chatMayEnd}
	d := &chatDecoder{a: a, calls: map[int]*upPart{}, byID: map[string]*upPart{}}
	var (
		finish string
		usage  *protocol.ChatUsage
		done   bool
	)
	for !done {
		event, data, err := sr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return d.result(usage, false), upstreamError(0, "broke off its stream: "+err.Error())
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			done = true
			break
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return d.result(usage, false), upstreamError(0, "sent a chunk that is not JSON: "+clip(string(data)))
		}
		if event == "error" || isError(c.Error) || c.Object == "error" {
			msg := payloadMessage(c.Error)
			if msg == "" {
				msg = c.Message
			}
			if msg == "" {
				msg = clip(string(data))
			}
			return d.result(usage, false), upstreamError(0, "reported an error: "+msg)
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue
			}
			if err := d.delta(ch.Delta, chatLogprobs(ch.Logprobs)); err != nil {
				return d.result(usage, false), upstreamError(0, err.Error())
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		if c.ServiceTier != "" {
			d.tier = c.ServiceTier
		}
	}
	if !done && finish == "" {
		return d.result(usage, false), upstreamError(0, "ended its stream before the completion finished")
	}
	incomplete := finish == protocol.FinishLength
	if err := a.finish(incomplete); err != nil {
		return d.result(usage, false), upstreamError(0, err.Error())
	}
	return d.result(usage, incomplete), nil
}

func (d *chatDecoder) result(usage *protocol.ChatUsage, incomplete bool) Result {
	res := Result{OutputTokens: d.a.tokens, Incomplete: incomplete, ServiceTier: d.tier}
	if usage != nil {
		res.OutputTokens = usage.CompletionTokens
		res.PromptTokens = usage.PromptTokens
		res.CachedPromptTokens = usage.PromptTokensDetails.CachedTokens
	}
	return res
}

// chatLogprobs are the logprobs of a chunk's content tokens
// ({"content": [...]}), nil when it has none.
func chatLogprobs(raw json.RawMessage) []protocol.LogProb {
	var lp struct {
		Content []protocol.LogProb `json:"content"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &lp) != nil {
		return nil
	}
	return lp.Content
}

// delta routes a chunk's delta; logprobs are its content's tokens'.
func (d *chatDecoder) delta(dl *protocol.ChatDelta, logprobs []protocol.LogProb) error {
	if dl == nil {
		return nil
	}
	for i, s := range []*string{dl.Content, dl.Refusal} {
		if s == nil || *s == "" {
			continue
		}
		if d.text == nil || d.text.ended {
			p, err := d.a.add(&upPart{})
			if err != nil {
				return err
			}
			d.text = p
		}
		var lp []protocol.LogProb
		if i == 0 {
			lp = logprobs
		}
		if err := d.a.push(d.text, *s, lp); err != nil {
			return err
		}
	}
	for _, tc := range dl.ToolCalls {
		if err := d.call(tc); err != nil {
			return err
		}
	}
	return nil
}

// call routes one piece of a tool call: by its index, else by its id, else
// to the newest call.
func (d *chatDecoder) call(tc protocol.ChatToolCall) error {
	var p *upPart
	switch {
	case tc.Index != nil:
		p = d.calls[max(*tc.Index, 0)] // -1 stands for a lone call
	case tc.ID != "":
		p = d.byID[tc.ID]
	default:
		p = d.last
	}
	if p == nil {
		p = &upPart{call: true}
		if tc.Index != nil {
			d.calls[max(*tc.Index, 0)] = p
		}
		if tc.ID != "" {
			d.byID[tc.ID] = p
		}
		d.last = p
		if _, err := d.a.add(p); err != nil {
			return err
		}
	}
	args := tc.Function.Arguments
	if p.ended {
		if strings.TrimSpace(args) == "" {
			return nil
		}
		return fmt.Errorf("sent more arguments for tool call %q after they formed a complete JSON value", p.name)
	}
	if !p.started {
		if p.callID == "" {
			p.callID = tc.ID
		}
		if n := tc.Function.Name; n != "" && n != p.name {
			p.name += n // a name sent in pieces
		}
	}
	if args == "" {
		return d.a.pump() // a later part may have begun while p waited for its name
	}
	p.named = p.named || p.name != ""
	return d.a.push(p, args, nil)
}
