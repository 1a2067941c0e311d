package sampler

import (
	"encoding/json"
	"strings"
	"unicode"
)

// directiveCall is one call of a scripted step.
type directiveCall struct {
	Namespace string // "NS" of "NS.NAME": the call is of NAME inside the namespace tool NS
	Name      string
	Args      string // a JSON object: as written, or "{}"
	// Input is a custom tool's input: the JSON string after the name,
	// decoded, or the text after the name as written.
	Input string
}

// multiAgentNS is the namespace a step's multi-agent actions are scripted
// and matched in: spawn_agent is "multi_agent.spawn_agent" (no tool of
// that name is offered; the server runs them).
const multiAgentNS = "multi_agent"

// parseDirectives returns the steps scripted in a user message: one step per
// line of the form "call: NAME {json} | NS.NAME {json} ...", where NS.NAME
// calls the function NAME of the namespace tool NS. Lines are matched
// after trimming; "call:" is case-insensitive. A call whose arguments are
// missing or are not a JSON object gets "{}"; a line with no named call is not
// a step.
func parseDirectives(text string, agents bool) [][]directiveCall {
	var steps [][]directiveCall
	for line := range strings.Lines(text) {
		if step, ok := agentDirective(line); ok && agents {
			steps = append(steps, step)
			continue
		}
		body, ok := directiveBody(line)
		if !ok {
			continue
		}
		var step []directiveCall
		for _, seg := range splitCalls(body) {
			if c, ok := parseCall(seg); ok {
				step = append(step, c)
			}
		}
		if len(step) > 0 {
			steps = append(steps, step)
		}
	}
	return steps
}

// directiveBody is what follows "call:" on a directive line.
func directiveBody(line string) (string, bool) {
	line = strings.TrimSpace(line)
	const prefix = "call:"
	if len(line) < len(prefix) || !strings.EqualFold(line[:len(prefix)], prefix) {
		return "", false
	}
	return line[len(prefix):], true
}

// jsonDirective is the body of the first "json:" line of text: the answer
// the scripted model gives as its text (or structured) answer.
func jsonDirective(text string) (string, bool) {
	const prefix = "json:"
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if len(line) >= len(prefix) && strings.EqualFold(line[:len(prefix)], prefix) {
			return strings.TrimSpace(line[len(prefix):]), true
		}
	}
	return "", false
}

// agentDirective is the step of a multi-agent directive line, for a
// response of the multi-agent beta:
//
//	spawn: NAME {"message": "…", "fork_turns": "all"} | NAME2 {…}
//	wait: NAME[, NAME…]
//	send: NAME "text"
//	followup: NAME "text"
//	list:
//	interrupt: NAME
//
// spawn starts sub-agents (spawn_agent, task_name NAME; the message's
// lines are their directives, fork_turns is passed on as written), wait
// makes the agent wait until they end (wait_agent), send tells one
// something (send_message), followup gives one a new task (followup_task:
// an agent that ended runs again), list lists them (list_agents),
// interrupt ends one (interrupt_agent). Prefixes are case-insensitive.
func agentDirective(line string) ([]directiveCall, bool) {
	line = strings.TrimSpace(line)
	verb, body, ok := strings.Cut(line, ":")
	if !ok {
		return nil, false
	}
	call := func(action string, args map[string]any) directiveCall {
		b, _ := json.Marshal(args)
		return directiveCall{Namespace: multiAgentNS, Name: action, Args: string(b)}
	}
	var step []directiveCall
	switch strings.ToLower(verb) {
	case "spawn":
		for _, seg := range splitCalls(body) {
			seg = strings.TrimSpace(seg)
			end := strings.IndexFunc(seg, func(r rune) bool { return r == '{' || unicode.IsSpace(r) })
			if end < 0 {
				end = len(seg)
			}
			name, rest := seg[:end], seg[end:]
			if name == "" {
				continue
			}
			args := map[string]any{}
			if rest = strings.TrimSpace(rest); isJSONObject(rest) {
				json.Unmarshal([]byte(rest), &args)
			}
			args["task_name"] = name
			step = append(step, call("spawn_agent", args))
		}
	case "wait":
		var targets []string
		for name := range strings.SplitSeq(body, ",") {
			if name = strings.TrimSpace(name); name != "" {
				targets = append(targets, name)
			}
		}
		if len(targets) > 0 {
			step = append(step, call("wait_agent", map[string]any{"targets": targets}))
		}
	case "list":
		step = append(step, call("list_agents", map[string]any{}))
	case "interrupt":
		if name := strings.TrimSpace(body); name != "" {
			step = append(step, call("interrupt_agent", map[string]any{"target": name}))
		}
	case "send", "followup":
		name, text, _ := strings.Cut(strings.TrimSpace(body), " ")
		var msg string
		if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &msg); err != nil {
			msg = strings.TrimSpace(text)
		}
		action := "send_message"
		if strings.EqualFold(verb, "followup") {
			action = "followup_task"
		}
		if name != "" {
			step = append(step, call(action, map[string]any{"target": name, "message": msg}))
		}
	default:
		return nil, false
	}
	return step, len(step) > 0
}

// isDirectiveLine reports whether line is a directive: a call (named or
// not) or a json answer.
func isDirectiveLine(line string) bool {
	if _, ok := directiveBody(line); ok {
		return true
	}
	_, ok := jsonDirective(line)
	return ok
}

// splitCalls splits a step at each '|' outside JSON strings and brackets, so
// arguments may themselves contain '|'.
func splitCalls(s string) []string {
	var out []string
	depth, inStr, esc, from := 0, false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth > 0 {
				depth--
			}
		case c == '|' && depth == 0:
			out = append(out, s[from:i])
			from = i + 1
		}
	}
	return append(out, s[from:])
}

// parseCall parses "NAME {json}" or "NS.NAME {json}", or for a custom
// tool "NAME \"input\"" (a JSON string, so that it holds line breaks and
// '|'). The name runs to the first space or '{'.
func parseCall(seg string) (directiveCall, bool) {
	seg = strings.TrimSpace(seg)
	end := strings.IndexFunc(seg, func(r rune) bool { return r == '{' || unicode.IsSpace(r) })
	if end < 0 {
		end = len(seg)
	}
	name, args := seg[:end], strings.TrimSpace(seg[end:])
	if name == "" {
		return directiveCall{}, false
	}
	input := args
	if err := json.Unmarshal([]byte(args), &input); err != nil {
		input = args
	}
	if !isJSONObject(args) {
		args = "{}"
	}
	ns, short, ok := strings.Cut(name, ".")
	if !ok {
		ns, short = "", name
	}
	if short == "" {
		return directiveCall{}, false
	}
	return directiveCall{Namespace: ns, Name: short, Args: args, Input: input}, true
}

func isJSONObject(s string) bool {
	return len(s) > 1 && s[0] == '{' && json.Valid([]byte(s))
}

// stripDirectives is text without its directive lines, trimmed; text itself
// when nothing else is left.
func stripDirectives(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !isDirectiveLine(line) {
			b.WriteString(line)
		}
	}
	if s := strings.TrimSpace(b.String()); s != "" {
		return s
	}
	return strings.TrimSpace(text)
}
