package sampler

import (
	"context"
	"strconv"
	"sync"

	"github.com/tether-run/tether/protocol"
)

//go:generate go run ./internal/gentraces -repo traces/repo -out traces

// ReplayPrefix prefixes the model name of every replayed trace:
// "replay:" + Trace.Name.
const ReplayPrefix = "replay:"

// Replay is a backend that replays a Trace, turn by turn, whatever the
// transport: the step it samples is the number of the trace's steps already
// in the context, so a client that sends the calls' outputs (the recorded
// ones or its own) walks the whole trace, over stateless HTTP, chained
// requests or WebSocket turns alike.
//
// The step index is counted from the function_call items after the first
// user message, matched step by step against the trace's call names (as
// Scripted counts a script's steps). A step's text, when it has one, is
// streamed as a message before its calls. After the last step with calls,
// every sample answers with the final step's text. Call ids are "call_" and
// 18 digits hashed from the response id (Request.Response) and the
// call's place in it (the agent, the context's length, the step and the
// call's index): unique across responses, however alike their contexts,
// and the same for a step run again. A request that names no response
// gets Trace.CallID's, from the trace name, the step and the index.
// The task (the first user message) is whatever the client sends, and the
// recorded tool outputs are never sent. Output is paced like Scripted's, by
// a Timing and a PrefixCache; a step's reasoning tokens are paced as output
// tokens that are not sent, before the first visible one. tool_choice
// "none" makes every sample the final answer. Replay is safe for
// concurrent use.
type Replay struct {
	r      *Renderer
	timing Timing
	cache  *PrefixCache
	trace  *Trace
	engine engineRef
	toks   sync.Map // a step's text or arguments -> its tokens: each is tokenized once, not at every sample
	window
}

// NewReplay returns a backend that replays trace, streaming o200k_base
// tokens split by r, paced by t, with a PrefixCache of default bounds and a
// context window of DefaultContextWindow. A nil r means a new Renderer.
func NewReplay(r *Renderer, t Timing, trace *Trace) *Replay {
	if r == nil {
		r, _ = NewRenderer()
	}
	return &Replay{r: r, timing: t, cache: NewPrefixCache(r, PrefixCacheOptions{}), trace: trace, window: window{DefaultContextWindow}}
}

// Engine is the engine that steps the backend's paced samples.
func (p *Replay) Engine() *Engine { return p.engine.get() }

// SimulatedEngine names the served engine that paces the backend's
// samples (Engine.SetModel), "" when none does.
func (p *Replay) SimulatedEngine() string {
	if m := p.engine.model(); m != nil {
		return m.Label()
	}
	return ""
}

// SetEngine makes e step the backend's paced samples, so that the backends
// of one server share one batch. Call it before the first Sample.
func (p *Replay) SetEngine(e *Engine) { p.engine.e = e }

// Trace is the replayed trace.
func (p *Replay) Trace() *Trace { return p.trace }

// Cache is the backend's prefix cache.
func (p *Replay) Cache() *PrefixCache { return p.cache }

// RequiredTools are the functions the trace calls (Trace.Tools), which
// Replay calls whatever tools a request offers: a server refuses a request
// that does not offer them (runtime.FixedToolSampler).
func (p *Replay) RequiredTools() []string { return p.trace.Tools() }

// CustomTool reports whether the trace calls the tool name as a custom
// (freeform) tool, which a request must then offer as one.
func (p *Replay) CustomTool(name string) bool { return p.trace.Custom(name) }

// Sample streams the trace's next step through emit (see Replay). It returns
// ctx.Err() as soon as ctx ends, leaving the open part without its PartEnd.
func (p *Replay) Sample(ctx context.Context, req *Request, emit func(Delta)) (Result, error) {
	return sampleParts(ctx, &p.engine, p.r, p.timing, p.cache, req, p.next, emit)
}

// next is the trace's step to emit for req, and its reasoning tokens.
func (p *Replay) next(req *Request) ([]part, int) {
	k := len(p.trace.Steps) - 1
	if req.ToolChoice.Mode != "none" {
		k = min(p.stepsDone(req.Items), k)
	}
	step := p.trace.Steps[k]
	var parts []part
	if step.Text != "" {
		parts = append(parts, part{text: step.Text, toks: p.tokens(step.Text)})
	}
	for i, c := range step.Calls {
		pt := part{call: true, callID: p.trace.callID(req, k, i), name: c.Name, text: c.Arguments, toks: p.tokens(c.Arguments)}
		if c.Type == CustomCall {
			pt.callType = protocol.ItemCustomToolCall
		}
		parts = append(parts, pt)
	}
	return parts, step.ReasoningTokens
}

// tokens are s's tokens, tokenized the first time s is replayed.
func (p *Replay) tokens(s string) []string {
	if t, ok := p.toks.Load(s); ok {
		return t.([]string)
	}
	t := p.r.Tokens(s)
	p.toks.Store(s, t)
	return t
}

// stepsDone is the number of the trace's steps with calls whose calls are
// in items, after the task's user message (the first after the trace's
// history), matched by name.
func (p *Replay) stepsDone(items protocol.Items) int {
	before := 0 // the history's user messages
	for _, it := range p.trace.History {
		if isUser(it) {
			before++
		}
	}
	first := len(items)
	for i, it := range items {
		if isUser(it) {
			if before == 0 {
				first = i
				break
			}
			before--
		}
	}
	var names []string
	for _, it := range items[min(first+1, len(items)):] {
		switch c := it.(type) {
		case *protocol.FunctionCall:
			names = append(names, c.Name)
		case *protocol.CustomToolCall:
			names = append(names, c.Name)
		}
	}
	k := 0
	for ; k < len(p.trace.Steps) && len(p.trace.Steps[k].Calls) > 0 && len(names) >= len(p.trace.Steps[k].Calls); k++ {
		for i, c := range p.trace.Steps[k].Calls {
			if names[i] != c.Name {
				return k
			}
		}
		names = names[len(p.trace.Steps[k].Calls):]
	}
	return k
}

// CallID is the call id Replay gives call index of step when its request
// names no response (Request.Response, as a server's always does): "call_"
// and 18 digits hashed from the trace name, the step and the index.
// Every conversation that replays the trace gets the same ones; in a
// response the ids are drawn from its id too, unique across responses.
func (t *Trace) CallID(step, index int) string {
	b := append([]byte(t.Name), '/')
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(index), 10)
	return hashedCallID(b)
}

// callID is the id Replay gives call index of step, sampled for req:
// placeID's in a response, else CallID's.
func (t *Trace) callID(req *Request, step, index int) string {
	if req.Response != "" {
		return placeID(req, step, index, t.Steps[step].Calls[index].Name)
	}
	return t.CallID(step, index)
}

// StepItems are the items step k adds to the conversation when it is
// replayed: its message (when it has text) and its function calls, as Replay
// samples them for a request that names no response (their ids CallID's),
// then, when outputs is true, the calls' recorded outputs as
// function_call_output items, as a client that replays the tools sends them.
func (t *Trace) StepItems(k int, outputs bool) protocol.Items {
	s := t.Steps[k]
	var items protocol.Items
	if s.Text != "" {
		items = append(items, &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: s.Text}}})
	}
	for i, c := range s.Calls {
		if c.Type == CustomCall {
			items = append(items, &protocol.CustomToolCall{CallID: t.CallID(k, i), Name: c.Name, Input: c.Arguments})
		} else {
			items = append(items, &protocol.FunctionCall{CallID: t.CallID(k, i), Name: c.Name, Arguments: c.Arguments})
		}
	}
	if outputs {
		for i, c := range s.Calls {
			if c.Type == CustomCall {
				items = append(items, &protocol.CustomToolCallOutput{CallID: t.CallID(k, i), Output: protocol.ToolOutput{Text: c.Output}})
			} else {
				items = append(items, &protocol.FunctionCallOutput{CallID: t.CallID(k, i), Output: protocol.ToolOutput{Text: c.Output}})
			}
		}
	}
	return items
}

// Deterministic reports that the model says the same whenever it is asked
// the same: a step run again after a takeover (a durable suspended
// rollout) lines up with its first run, frame by frame.
func (*Replay) Deterministic() bool { return true }
