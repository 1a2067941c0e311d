package sampler

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
)

// This file reads an upstream's event stream and turns it into deltas.

// upPart is one message or function call of an upstream's answer.
type upPart struct {
	call         bool
	callID, name string
	namespace    string            // a namespace's member (Responses upstreams)
	callType     protocol.ItemType // "" for a function call; custom_tool_call (Responses upstreams)
	named        bool              // name is whole: arguments came after it, or the upstream sends names whole
	text         strings.Builder   // everything received: the message text or call arguments
	pending      []upPiece         // received, not yet emitted
	started      bool              // its Start delta went out
	done         bool              // the upstream ended it
	ended        bool              // its PartEnd went out
	incomplete   bool              // the upstream cut it off at the token limit
}

// upPiece is a piece of a part as the upstream sent it: text, and the
// log probabilities of its tokens when the upstream sent them.
type upPiece struct {
	text     string
	logprobs []protocol.LogProb
}

// assembler turns upstream parts, which may arrive interleaved, into sampler
// parts, which may not. Parts are emitted in the order they began: the oldest
// unended part is live and streams as it arrives, later ones wait. The live
// part ends when the upstream ends it, or, once a later part has begun, when
// mayEnd says it is complete.
type assembler struct {
	emit   func(Delta)
	mayEnd func(*upPart) bool
	parts  []*upPart
	live   int // index in parts of the oldest unended part
	tokens int // TextDelta and ArgsDelta emitted
}

// add starts tracking a part that has just begun upstream.
func (a *assembler) add(p *upPart) (*upPart, error) {
	a.parts = append(a.parts, p)
	return p, a.pump()
}

// push adds text to p, with its tokens' logprobs when the upstream sent
// them.
func (a *assembler) push(p *upPart, s string, logprobs []protocol.LogProb) error {
	if s == "" {
		return nil
	}
	if len(logprobs) == 0 {
		logprobs = nil // "logprobs":[]: none
	}
	p.text.WriteString(s)
	p.pending = append(p.pending, upPiece{s, logprobs})
	return a.pump()
}

// end records that the upstream ended p.
func (a *assembler) end(p *upPart, incomplete bool) error {
	p.done, p.incomplete = true, incomplete
	return a.pump()
}

// finish ends every part: the stream is over. When the upstream stopped at
// the token limit, the newest part is the one it cut off.
func (a *assembler) finish(incomplete bool) error {
	for i, p := range a.parts {
		if !p.done {
			p.done = true
			p.incomplete = incomplete && i == len(a.parts)-1
		}
	}
	return a.pump()
}

// pump emits what the parts' state allows.
func (a *assembler) pump() error {
	for a.live < len(a.parts) {
		p := a.parts[a.live]
		if !p.started {
			if p.call && p.name == "" && p.done {
				return errors.New("sent a tool call without a function name")
			}
			// A name may come in pieces: a call starts once its name is
			// followed by arguments, or by a later part, or it has ended.
			if p.call && (p.name == "" || !p.named && !p.done && a.live == len(a.parts)-1) {
				return nil
			}
			p.started = true
			if p.call {
				if p.callID == "" {
					p.callID = newCallID()
				}
				a.emit(Delta{Kind: CallStart, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType})
			} else {
				a.emit(Delta{Kind: TextStart})
			}
		}
		for _, s := range p.pending {
			if p.call {
				a.emit(Delta{Kind: ArgsDelta, Text: s.text, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType})
			} else {
				a.emit(Delta{Kind: TextDelta, Text: s.text, Logprobs: s.logprobs})
			}
			a.tokens++
		}
		p.pending = p.pending[:0]
		if !p.done && (a.live == len(a.parts)-1 || !a.mayEnd(p)) {
			return nil
		}
		a.emit(Delta{Kind: PartEnd, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType, Incomplete: p.incomplete})
		p.ended = true
		a.live++
	}
	return nil
}

// newCallID names a call whose upstream gave it no id.
func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// respEvent is the part of a Responses streaming event read here.
type respEvent struct {
	Type        string             `json:"type"`
	OutputIndex int                `json:"output_index"`
	Delta       string             `json:"delta"`
	Logprobs    []protocol.LogProb `json:"logprobs"` // an output_text.delta's, when asked for
	Item        *struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Arguments string `json:"arguments"`
		Input     string `json:"input"` // a custom tool call's
		Status    string `json:"status"`
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
	} `json:"item"`
	Response *struct {
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Usage       *protocol.Usage `json:"usage"`
		ServiceTier string          `json:"service_tier"`
	} `json:"response"`
	// An error event nests its error (Open Responses) or is flat (OpenAI).
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
}

// decodeResponsesStream reads a Responses event stream to its terminal event.
// Items other than messages, function calls (namespaced or not) and custom
// tool calls (reasoning) are skipped.
func decodeResponsesStream(r io.Reader, emit func(Delta)) (Result, error) {
	sr := newSSEReader(r)
	a := &assembler{emit: emit, mayEnd: func(*upPart) bool { return false }}
	parts := map[int]*upPart{}
	result := func(usage *protocol.Usage, incomplete bool) Result {
		res := Result{OutputTokens: a.tokens, Incomplete: incomplete}
		if usage != nil {
			res.OutputTokens = usage.OutputTokens
			res.PromptTokens = usage.InputTokens
			res.CachedPromptTokens = usage.InputTokensDetails.CachedTokens
		}
		return res
	}
	for {
		event, data, err := sr.next()
		if err == io.EOF {
			return result(nil, false), upstreamError(0, "ended its stream before the response completed")
		}
		if err != nil {
			return result(nil, false), upstreamError(0, "broke off its stream: "+err.Error())
		}
		var e respEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return result(nil, false), upstreamError(0, "sent an event that is not JSON: "+clip(string(data)))
		}
		if e.Type == "" {
			e.Type = event
		}
		p := parts[e.OutputIndex]
		switch e.Type {
		case "response.output_item.added":
			if e.Item == nil || p != nil {
				continue
			}
			switch e.Item.Type {
			case "message":
				p = &upPart{}
			case "function_call":
				p = &upPart{call: true, callID: e.Item.CallID, name: e.Item.Name, namespace: e.Item.Namespace, named: true}
			case "custom_tool_call":
				p = &upPart{call: true, callID: e.Item.CallID, name: e.Item.Name, namespace: e.Item.Namespace, callType: protocol.ItemCustomToolCall, named: true}
			default:
				continue
			}
			parts[e.OutputIndex] = p
			_, err = a.add(p)
		case "response.output_text.delta", "response.refusal.delta":
			if p != nil && !p.call && !p.done {
				err = a.push(p, e.Delta, e.Logprobs)
			}
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			if p != nil && p.call && !p.done {
				err = a.push(p, e.Delta, nil)
			}
		case "response.output_item.done":
			if p == nil || p.done || e.Item == nil {
				continue
			}
			// A server that sent the whole item only here (or sent part of it
			// as deltas) still gets it all through.
			full := e.Item.Arguments
			if p.callType == protocol.ItemCustomToolCall {
				full = e.Item.Input
			}
			if !p.call {
				var b strings.Builder
				for _, c := range e.Item.Content {
					b.WriteString(c.Text + c.Refusal)
				}
				full = b.String()
			}
			if have := p.text.String(); len(full) > len(have) && strings.HasPrefix(full, have) {
				if err = a.push(p, full[len(have):], nil); err != nil {
					break
				}
			}
			err = a.end(p, e.Item.Status == string(protocol.StatusIncomplete))
		case "response.completed", "response.incomplete":
			var usage *protocol.Usage
			tier := ""
			if e.Response != nil {
				usage, tier = e.Response.Usage, e.Response.ServiceTier
			}
			incomplete := e.Type == "response.incomplete"
			if err := a.finish(incomplete); err != nil {
				return result(usage, false), upstreamError(0, err.Error())
			}
			res := result(usage, incomplete)
			res.ServiceTier = tier // the tier that served it: what the server echoes at the end
			return res, nil
		case "response.failed":
			msg := "failed the response"
			if e.Response != nil && e.Response.Error != nil {
				msg = "failed the response: " + e.Response.Error.Message
			}
			return result(nil, false), upstreamError(0, msg)
		case "response.cancelled":
			return result(nil, false), upstreamError(0, "cancelled the response")
		case "error":
			msg := payloadMessage(e.Error)
			if msg == "" {
				msg = e.Message
			}
			if msg == "" {
				msg = clip(string(data))
			}
			return result(nil, false), upstreamError(0, "reported an error: "+msg)
		}
		if err != nil {
			return result(nil, false), upstreamError(0, err.Error())
		}
	}
}

// errorBodyMessage is the message of an error body: OpenAI's {"error":
// {"message"}}, {"error": "..."}, or a flat {"message"} / {"detail"}; else
// the body itself, clipped.
func errorBodyMessage(body []byte) string {
	var w struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &w) == nil {
		if m := payloadMessage(w.Error); m != "" {
			return m
		}
		if w.Message != "" {
			return w.Message
		}
		if len(w.Detail) > 0 {
			var s string
			if json.Unmarshal(w.Detail, &s) == nil {
				return s
			}
			return clip(string(w.Detail))
		}
	}
	if s := clip(strings.TrimSpace(string(body))); s != "" {
		return s
	}
	return "(no message)"
}

// isError reports whether an error field is set: present and not null.
func isError(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// payloadMessage is the message of an error payload: a string, or an object
// with a message.
func payloadMessage(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var p struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &p) == nil {
		return p.Message
	}
	return ""
}

// clip shortens an upstream's text for an error message.
func clip(s string) string {
	const limit = 500
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "…"
}
