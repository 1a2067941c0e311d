package sampler

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
)

// This file is what the scripted model answers with text: the newest
// results it reads (tool outputs, web searches, MCP calls, the messages of
// the sub-agents it waited on) quoted, else the newest user text.

// answer is the text reply: the newest tool results (function outputs,
// program outputs, web searches, whose source titles it cites, and the
// messages of the sub-agents a wait_agent waited on), else the newest user
// text, quoted; else a greeting.
func answer(items protocol.Items) (string, []protocol.Annotation) {
	j := len(items)
	for j > 0 && isResult(items[j-1]) {
		j--
	}
	if j == len(items) {
		if text := newestUserText(items); strings.TrimSpace(text) != "" {
			return `You said: "` + quote(stripDirectives(text)) + `"`, nil
		}
		return greeting, nil
	}
	var w citingWriter
	names := newCallNames(items[:j])
	for _, it := range items[j:] {
		if ok, isOK := it.(*protocol.MCPApprovalResponse); isOK && ok.Approve {
			continue // the approved call's mcp_call says what it did
		}
		if _, isOut := it.(*protocol.MultiAgentCallOutput); isOut {
			continue // a wait's: the agent_messages after it say what the agents did
		}
		if w.b.Len() > 0 {
			w.text("; ")
		}
		if ok, isOK := it.(*protocol.MCPApprovalResponse); isOK {
			w.text(names.of(ok.ApprovalRequestID) + " was not approved")
			continue
		}
		if callID, _, ok := protocol.AnswerOf(it); ok {
			w.returned(names.of(callID), toolOutputText(it))
			continue
		}
		switch it := it.(type) {
		case *protocol.ProgramOutput:
			// A hosted tool's result, read as a function's: the program
			// is what returned it.
			w.returned("program", it.Result)
		case *protocol.AgentMessage:
			w.text(it.Author + " said: " + quote(it.Content.Text()))
		case *protocol.MCPCall:
			w.text(qualified(it.ServerLabel, it.Name))
			switch {
			case it.Output != nil:
				w.text(" returned: " + quote(*it.Output))
			default:
				var msg string
				if json.Unmarshal(it.Error, &msg) != nil {
					msg = string(it.Error)
				}
				w.text(" failed: " + quote(msg))
			}
		case *protocol.WebSearchCall:
			if it.Action == nil || len(it.Action.Sources) == 0 {
				w.text("the web search found nothing")
				continue
			}
			w.text("searching for " + strconv.Quote(it.Action.Query) + " found ")
			for n, src := range it.Action.Sources {
				if n == maxCited {
					break
				}
				if n > 0 {
					w.text(", ")
				}
				w.cite(src.Title, src.URL)
			}
		}
	}
	return w.b.String(), w.cites
}

// maxCited bounds the sources cited per search.
const maxCited = 3

// citingWriter builds text and the citations of its spans.
type citingWriter struct {
	b     strings.Builder
	runes int
	cites []protocol.Annotation
}

func (w *citingWriter) text(s string) {
	w.b.WriteString(s)
	w.runes += utf8.RuneCountInString(s)
}

// returned writes "NAME returned: OUTPUT", the output quoted, or "NAME
// returned nothing".
func (w *citingWriter) returned(name, output string) {
	w.text(name)
	if q := quote(output); q != "" {
		w.text(" returned: " + q)
	} else {
		w.text(" returned nothing")
	}
}

func (w *citingWriter) cite(title, url string) {
	if title == "" {
		title = url
	}
	title = quote(title)
	start := w.runes
	w.text(title)
	w.cites = append(w.cites, protocol.Annotation{Type: "url_citation", URL: url, Title: title, StartIndex: start, EndIndex: w.runes})
}

// toolOutputText is the text of an output item's output.
func toolOutputText(it protocol.Item) string {
	var o protocol.ToolOutput
	switch it := it.(type) {
	case *protocol.FunctionCallOutput:
		o = it.Output
	case *protocol.CustomToolCallOutput:
		o = it.Output
	case *protocol.ShellCallOutput:
		var runs []struct{ Stdout, Stderr string }
		json.Unmarshal(it.Output, &runs)
		for _, r := range runs {
			o.Text += r.Stdout + r.Stderr
		}
	case *protocol.LocalShellCallOutput:
		o.Text = it.Output
	case *protocol.ApplyPatchCallOutput:
		o.Text = string(it.Status)
		if it.Output != nil && *it.Output != "" {
			o.Text += ": " + *it.Output
		}
	case *protocol.ComputerCallOutput:
		o.Text = imagePlaceholder
	case *protocol.ToolSearchOutput:
		for _, t := range it.Tools {
			o.Text += t.Name + " "
		}
	}
	if o.Parts != nil {
		return contentsText(o.Parts)
	}
	return o.Text
}

// isResult reports whether it is a tool's result: a call's output, a
// finished web search or MCP call, a program's output, what sub-agents
// said.
func isResult(it protocol.Item) bool {
	if _, _, ok := protocol.AnswerOf(it); ok {
		return true
	}
	switch it := it.(type) {
	case *protocol.WebSearchCall:
		return it != nil
	case *protocol.MCPCall:
		return it != nil
	case *protocol.MultiAgentCallOutput:
		return it != nil
	case *protocol.AgentMessage:
		return it != nil
	case *protocol.ProgramOutput:
		return it != nil
	}
	return false
}

// callNames finds the names of the calls in a conversation by call id,
// the newest of each id, as a model reading back from its last item finds
// it: it reads back only as far as the ids asked for take it, and never
// reads an item twice (a request may answer thousands of calls).
type callNames struct {
	items protocol.Items // what is left to read, from its end
	names map[string]string
}

func newCallNames(items protocol.Items) *callNames { return &callNames{items: items} }

// of is the name of the call with callID, or "the tool".
func (n *callNames) of(callID string) string {
	if name, ok := n.names[callID]; ok {
		return name
	}
	for len(n.items) > 0 {
		it := n.items[len(n.items)-1]
		n.items = n.items[:len(n.items)-1]
		c, ok := protocol.CallOf(it)
		if !ok || c.Name == "" {
			continue
		}
		if n.names == nil {
			n.names = map[string]string{}
		}
		if _, seen := n.names[c.CallID]; !seen {
			n.names[c.CallID] = c.Name
		}
		if c.CallID == callID {
			return c.Name
		}
	}
	return "the tool"
}

func isUser(it protocol.Item) bool {
	m, ok := it.(*protocol.Message)
	return ok && m != nil && m.Role == protocol.RoleUser
}

// newestUserText is the text of the newest user message that has any.
func newestUserText(items protocol.Items) string {
	for i := len(items) - 1; i >= 0; i-- {
		if isUser(items[i]) {
			if t := contentsText(items[i].(*protocol.Message).Content); strings.TrimSpace(t) != "" {
				return t
			}
		}
	}
	return ""
}

// contentsText is the text of a message's or an output's parts, each
// part its own lines: a client that attaches files sends a user message
// in several parts, and a directive line in any of them stays one.
func contentsText(cs protocol.Contents) string {
	if len(cs) == 1 {
		return partText(cs[0])
	}
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(partText(c))
	}
	return b.String()
}

// quote is s on one line, whitespace collapsed, cut to quoteLimit characters.
func quote(s string) string {
	// The words joined by single spaces, only as far as the quote reaches:
	// the message may be megabytes long.
	var b strings.Builder
	n := 0
	for w := range strings.FieldsSeq(s) {
		if n > 0 {
			b.WriteByte(' ')
			n++
		}
		if left := quoteLimit + 1 - n; len(w) > 4*left { // a word longer than the quote: its start is enough
			w = w[:4*left]
		}
		b.WriteString(w)
		if n += utf8.RuneCountInString(w); n > quoteLimit {
			return strings.TrimSpace(string([]rune(b.String())[:quoteLimit])) + "…"
		}
	}
	return b.String()
}
