package sampler

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/tether-run/tether/protocol"
)

// ScriptedModel is the model name served by the Scripted backend.
const ScriptedModel = "tether-scripted"

// quoteLimit is how many characters of a tool output or user message a
// scripted answer quotes.
const quoteLimit = 200

// greeting is the answer to a context with nothing to answer.
const greeting = "Hello! How can I help you today?"

// Scripted is a deterministic model: the same request always yields the same
// deltas, and any request yields a plausible one (see the package
// documentation for the policy). Its only state is its PrefixCache, which
// changes how long a sample takes, never what it says. It is safe for
// concurrent use, and Sample blocks only for its pacing.
type Scripted struct {
	r      *Renderer
	timing Timing
	cache  *PrefixCache
	engine engineRef
	window
	scripts scriptCache
}

// NewScripted returns a scripted backend that streams o200k_base tokens split
// by r, paced by t, with a PrefixCache of default bounds and a context
// window of DefaultContextWindow. A nil r means a new Renderer.
func NewScripted(r *Renderer, t Timing) *Scripted {
	if r == nil {
		// NewRenderer fails only for an encoding the tokenizer lacks.
		r, _ = NewRenderer()
	}
	return &Scripted{r: r, timing: t, cache: NewPrefixCache(r, PrefixCacheOptions{}), window: window{DefaultContextWindow}}
}

// Cache is the backend's prefix cache, for its statistics and for Reset.
func (s *Scripted) Cache() *PrefixCache { return s.cache }

// Engine is the engine that steps the backend's paced samples: its own
// unless SetEngine gave it another.
func (s *Scripted) Engine() *Engine { return s.engine.get() }

// SimulatedEngine names the served engine that paces the backend's
// samples (Engine.SetModel), "" when none does.
func (s *Scripted) SimulatedEngine() string {
	if m := s.engine.model(); m != nil {
		return m.Label()
	}
	return ""
}

// SetEngine makes e step the backend's paced samples, so that the backends
// of one server share one batch. Call it before the first Sample.
func (s *Scripted) SetEngine(e *Engine) { s.engine.e = e }

// part is one planned message or function call.
type part struct {
	call                    bool
	callType                protocol.ItemType // "" for a function call
	callID, name, namespace string
	text                    string                // message text, or call arguments
	toks                    []string              // text's tokens when the backend has them already (read only); nil: streamParts tokenizes
	cites                   []protocol.Annotation // citations of text spans, by end index
}

// Sample streams the policy's answer to req through emit, synchronously and
// in order, one token per TextDelta or ArgsDelta, on the Timing's schedule:
// the prompt is looked up in the prefix cache (and recorded there) when the
// sample starts, and its uncached tokens delay the first token. It returns
// ctx.Err() as soon as ctx ends, during the time to first token or between
// tokens, leaving the open part without its PartEnd. req.Model is not used;
// req.Prompt only times the sample.
func (s *Scripted) Sample(ctx context.Context, req *Request, emit func(Delta)) (Result, error) {
	if err := checkJSONDirective(req); err != nil {
		return Result{}, err
	}
	return sampleParts(ctx, &s.engine, s.r, s.timing, s.cache, req, func(req *Request) ([]part, int) { return plan(req, &s.scripts), 0 }, emit)
}

// plan applies the scripted policy: a pending directive step, else a call of
// the first function tool after a user message, else a text answer. scripts
// keeps the scripts it parses (nil: none kept).
func plan(req *Request, scripts *scriptCache) []part {
	items := req.Items
	if req.ToolChoice.Mode == "none" {
		return []part{answerPart(req)}
	}
	if at, steps := findScript(items, req.MultiAgent, scripts); len(steps) > 0 {
		if req.Serial {
			steps = oneCallPerStep(steps)
		}
		if k := stepsTaken(items[at+1:], steps); k < len(steps) {
			parts := make([]part, len(steps[k]))
			for i, c := range steps[k] {
				parts[i] = part{call: true, callID: placeID(req, k, i, qualified(c.Namespace, c.Name)), name: c.Name, namespace: c.Namespace, text: c.Args}
				switch {
				case c.Namespace == multiAgentNS:
					parts[i].callType, parts[i].namespace = protocol.ItemMultiAgentCall, ""
				case isCustom(req.Tools, c.Namespace, c.Name):
					parts[i].callType, parts[i].text = protocol.ItemCustomToolCall, c.Input
				case c.Namespace == "":
					parts[i].callType = typedCall(req.Tools, c.Name) // its payload is the directive's JSON object
				}
			}
			return parts
		}
	}
	if len(items) > 0 && isUser(items[len(items)-1]) {
		if p, ok := forcedPart(req); ok {
			return []part{p}
		}
		if _, ok := jsonDirective(newestUserText(items)); ok {
			return []part{answerPart(req)} // the user said what to answer
		}
		if t, ns, ok := pickTool(req); ok {
			args := schemaArgs(t.Parameters, stripDirectives(newestUserText(items)))
			return []part{{call: true, callID: placeID(req, -1, 0, qualified(ns, t.Name)), name: t.Name, namespace: ns, text: args}}
		}
		if p, ok := otherClientTool(req); ok {
			return []part{p}
		}
		if p, ok := requiredSearch(req); ok {
			return []part{p}
		}
	}
	return []part{answerPart(req)}
}

// oneCallPerStep is a script's steps with their parallel calls made one
// after another: the script under parallel_tool_calls: false.
func oneCallPerStep(steps [][]directiveCall) [][]directiveCall {
	var out [][]directiveCall
	for _, step := range steps {
		for _, c := range step {
			out = append(out, []directiveCall{c})
		}
	}
	return out
}

// findScript returns the index and steps of the newest user message that
// scripts calls, or -1 and nil. The steps are scripts' to keep: read only.
func findScript(items protocol.Items, agents bool, scripts *scriptCache) (int, [][]directiveCall) {
	for i := len(items) - 1; i >= 0; i-- {
		if m, ok := items[i].(*protocol.Message); ok && m != nil && m.Role == protocol.RoleUser {
			if steps := scripts.parse(contentsText(m.Content), agents); len(steps) > 0 {
				return i, steps
			}
		}
	}
	return -1, nil
}

// scriptCache keeps the scripts parsed from user messages, by their text:
// every step of a rollout reads its script again (findScript), and a long
// script's JSON arguments cost more to parse than the step. It holds at
// most maxScripts texts of at most maxScriptText bytes that script calls;
// full, it starts over. Safe for concurrent use; the
// zero value is ready, and a nil one keeps nothing.
type scriptCache struct {
	mu sync.Mutex
	m  map[scriptKey][][]directiveCall // guarded by mu
}

type scriptKey struct {
	text   string
	agents bool
}

const (
	maxScripts    = 256
	maxScriptText = 64 << 10
)

// parse is parseDirectives(text, agents), parsed once for each text.
func (c *scriptCache) parse(text string, agents bool) [][]directiveCall {
	if c == nil {
		return parseDirectives(text, agents)
	}
	k := scriptKey{text, agents}
	c.mu.Lock()
	steps, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return steps
	}
	steps = parseDirectives(text, agents)
	if len(steps) == 0 || len(text) > maxScriptText {
		return steps // kept only for what a script is: a text without one is not kept, nor a long one
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxScripts {
		c.m = make(map[scriptKey][][]directiveCall)
	}
	c.m[k] = steps
	c.mu.Unlock()
	return steps
}

// stepsTaken counts the script's steps already in items: the call items
// (function calls and hosted web searches) after the script, matched step by
// step against the script's call names. Matching by name rather than by runs
// of adjacent calls matters when a step only searches: its web_search_call
// items are their own results, so the next step's calls follow them directly.
func stepsTaken(items protocol.Items, steps [][]directiveCall) int {
	var names []string
	for _, it := range items {
		if c, ok := protocol.CallOf(it); ok {
			names = append(names, qualified(c.Namespace, c.Name))
			continue
		}
		switch it := it.(type) {
		case *protocol.WebSearchCall:
			if it != nil {
				names = append(names, string(protocol.ToolWebSearch))
			}
		case *protocol.MCPCall:
			// An approved call is its approval request's, counted there.
			if it != nil && it.ApprovalRequestID == nil {
				names = append(names, qualified(it.ServerLabel, it.Name))
			}
		case *protocol.MultiAgentCall:
			if it != nil {
				names = append(names, qualified(multiAgentNS, it.Action))
			}
		}
	}
	k := 0
	for ; k < len(steps) && len(names) >= len(steps[k]); k++ {
		for i, c := range steps[k] {
			if names[i] != qualified(c.Namespace, c.Name) {
				return k
			}
		}
		names = names[len(steps[k]):]
	}
	return k
}

// pickTool is the function tool to call, and the namespace it is in: the
// forced one, else the first function allowed, top-level functions before
// namespaces' members.
func pickTool(req *Request) (t protocol.Tool, namespace string, ok bool) {
	tc := req.ToolChoice
	allowed := func(t protocol.Tool) bool {
		if t.Type != protocol.ToolFunction || t.Name == "" {
			return false
		}
		if tc.Function != "" {
			return t.Name == tc.Function
		}
		return tc.Allows(t)
	}
	for _, t := range req.Tools {
		if allowed(t) {
			return t, "", true
		}
	}
	for _, ns := range req.Tools {
		if ns.Type != protocol.ToolNamespace {
			continue
		}
		for _, t := range ns.Tools {
			if allowed(t) {
				return t, ns.Name, true
			}
		}
	}
	if tc.Function != "" {
		// Forced but not offered: call it anyway, with no schema to follow.
		return protocol.Tool{Type: protocol.ToolFunction, Name: tc.Function}, "", true
	}
	return protocol.Tool{}, "", false
}

// forcedPart is the call a tool_choice that forces a custom or built-in
// tool asks for: the custom tool with the user's text as its input, a web
// search for the user's text, a shell running it as a command, another
// built-in tool with an empty payload.
func forcedPart(req *Request) (part, bool) {
	tc, text := req.ToolChoice, stripDirectives(newestUserText(req.Items))
	id := func(name string) string { return placeID(req, -1, 0, name) }
	switch {
	case tc.Custom != "":
		return part{call: true, callType: protocol.ItemCustomToolCall, callID: id(tc.Custom), name: tc.Custom, text: text}, true
	case tc.Builtin.Canonical() == protocol.ToolWebSearch:
		args, _ := json.Marshal(map[string]string{"query": text})
		return part{call: true, callID: id("web_search"), name: string(protocol.ToolWebSearch), text: string(args)}, true
	case tc.Builtin != "":
		name := string(tc.Builtin)
		typ := typedCall(req.Tools, name)
		if typ == "" {
			return part{}, false
		}
		payload := []byte("{}")
		if typ == protocol.ItemShellCall {
			payload, _ = json.Marshal(map[string][]string{"commands": {text}})
		}
		return part{call: true, callType: typ, callID: id(name), name: name, text: string(payload)}, true
	}
	return part{}, false
}

// otherClientTool is the call of the first custom or built-in client tool
// allowed, for a request that offers no function: made as forcedPart
// makes a forced one (the user's text as the input or the command).
func otherClientTool(req *Request) (part, bool) {
	if req.ToolChoice.Mode == "none" || req.ToolChoice.Function != "" {
		return part{}, false
	}
	for _, t := range req.Tools {
		if !req.ToolChoice.Allows(t) || protocol.RunnerOf(t) != protocol.RunsOnClient {
			continue
		}
		forced := *req
		switch {
		case t.Type == protocol.ToolCustom:
			forced.ToolChoice = protocol.ToolChoice{Mode: "required", Custom: t.Name}
		case builtin(protocol.CallTypeOf(t.Type)):
			forced.ToolChoice = protocol.ToolChoice{Mode: "required", Builtin: t.Type}
		default:
			continue
		}
		if p, ok := forcedPart(&forced); ok {
			return p, true
		}
	}
	return part{}, false
}

// requiredSearch is a web search for the user's text when tool_choice
// requires a call and web_search is the one tool the request lets the
// model call: a model that must call a tool calls the one it has.
func requiredSearch(req *Request) (part, bool) {
	if req.ToolChoice.Mode != "required" {
		return part{}, false
	}
	for _, t := range req.Tools {
		if t.Type.Canonical() == protocol.ToolWebSearch && req.ToolChoice.Allows(t) {
			forced := *req
			forced.ToolChoice = protocol.ToolChoice{Mode: "required", Builtin: protocol.ToolWebSearch}
			return forcedPart(&forced)
		}
	}
	return part{}, false
}

// isCustom reports whether tools offer a custom tool name (in the namespace
// tool namespace, when there is one).
func isCustom(tools []protocol.Tool, namespace, name string) bool {
	for _, t := range tools {
		switch {
		case namespace == "" && t.Type == protocol.ToolCustom && t.Name == name:
			return true
		case namespace != "" && t.Type == protocol.ToolNamespace && t.Name == namespace:
			return isCustom(t.Tools, "", name)
		}
	}
	return false
}

// typedCall is the call type of "call: shell {…}" and the like when tools
// offer a client tool of that type ("computer" stands for either computer
// tool), and "" (a function call) otherwise.
func typedCall(tools []protocol.Tool, name string) protocol.ItemType {
	for _, t := range tools {
		typ := protocol.CallTypeOf(t.Type)
		if builtin(typ) && protocol.RunnerOf(t) == protocol.RunsOnClient && (string(t.Type) == name || name == "computer" && typ == protocol.ItemComputerCall) {
			return typ
		}
	}
	return ""
}

// builtin reports whether typ is a built-in client tool's call (shell,
// apply_patch, computer…), which a directive names by the tool's type.
func builtin(typ protocol.ItemType) bool {
	return typ != "" && typ != protocol.ItemFunctionCall && typ != protocol.ItemCustomToolCall
}

// Deterministic reports that the model says the same whenever it is asked
// the same: a step run again after a takeover (a durable suspended
// rollout) lines up with its first run, frame by frame.
func (*Scripted) Deterministic() bool { return true }
