// Package traceimport makes replay traces (sampler.Trace) of agent
// sessions recorded elsewhere: Codex CLI rollout files (Codex), and
// tether's traffic logs (Record, RecordLog). Each user turn of a
// session that ends in a final answer becomes a trace: the model's steps,
// with the reasoning tokens the session's token counts give them, and each
// tool call with its arguments (or a custom tool's input), its output and
// its duration from the session's timestamps. What a replay cannot
// reproduce (a hosted web search, a shell call of the local_shell tool, an
// image, a compaction) is counted by type in the Report, not dropped
// silently.
package traceimport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// Report is what an import took and left.
type Report struct {
	Lines    int            // the lines read
	Sessions int            // the sessions found (a Codex rollout is one; a traffic log has one a client conversation)
	Turns    int            // user turns in all
	Skipped  map[string]int // items or events not replayable, by type ("response_item/web_search_call"); "unknown/TYPE" counts lines of a type the importer does not know
	// Dropped are the turns that made no trace, and why ("turn 3: ended
	// without a final answer").
	Dropped []string
	// Cuts are where a traffic log's files end inside a line: what
	// follows in the file was lost when it was written.
	Cuts []record.Cut
	// FirstPart is the part of a rotated traffic log its first file is: a
	// part past 1 means the files before it were removed.
	FirstPart int
}

func (r *Report) skip(kind string) {
	if r.Skipped == nil {
		r.Skipped = map[string]int{}
	}
	r.Skipped[kind]++
}

// maxLine bounds one line of a rollout: a line holds an item, and items can
// be large (an image inline, a long tool output).
const maxLine = 64 << 20

// envelope is one line of a rollout (Codex's RolloutLine).
type envelope struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// payloadHead is the type tag of a response_item or an event_msg.
type payloadHead struct {
	Type string `json:"type"`
	Role string `json:"role"`
}

// Codex reads a Codex CLI rollout file (the JSON Lines a session writes
// under $CODEX_HOME/sessions, in the format Codex has written since
// 2025-09: {"timestamp", "type", "payload"} a line) and returns a trace of
// each user turn that ends in a final answer, named name, or name-N for the
// Nth turn when the session has several. A line that is not one of the
// format's fails the whole import with an error naming it.
func Codex(r io.Reader, name string) ([]*sampler.Trace, *Report, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	rep := &Report{}
	var s session
	for {
		line, err := readLine(br)
		if len(line) == 0 && err == io.EOF {
			break
		}
		rep.Lines++
		if err != nil && err != io.EOF {
			return nil, nil, fmt.Errorf("line %d: %w", rep.Lines, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if perr := s.line(line, rep); perr != nil {
			if err == io.EOF && !json.Valid(line) {
				return nil, nil, fmt.Errorf("line %d: truncated (the file ends inside it): %w", rep.Lines, perr)
			}
			return nil, nil, fmt.Errorf("line %d: %w", rep.Lines, perr)
		}
		if err == io.EOF {
			break
		}
	}
	if !s.started {
		return nil, nil, errors.New("not a Codex rollout: no session_meta line")
	}
	s.endTurn(rep)
	var traces []*sampler.Trace
	for i, t := range s.done {
		t.Name = name
		if len(s.done) > 1 || s.turn > 1 {
			t.Name = name + "-" + strconv.Itoa(s.turnOf[i])
		}
		t.Source = s.source
		traces = append(traces, t)
	}
	rep.Turns, rep.Sessions = s.turn, 1
	return traces, rep, nil
}

// readLine reads one line, without its newline, up to maxLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("longer than %d MiB", maxLine>>20)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// session is the state of a rollout being read.
type session struct {
	turns
	started bool
	source  string
	usage   tokenUsage
}

type tokenUsage struct {
	InputTokens           int `json:"input_tokens"`
	CachedInputTokens     int `json:"cached_input_tokens"`
	OutputTokens          int `json:"output_tokens"`
	ReasoningOutputTokens int `json:"reasoning_output_tokens"`
	TotalTokens           int `json:"total_tokens"`
}

func (s *session) line(b []byte, rep *Report) error {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if env.Type == "" {
		var legacy struct {
			ID, Timestamp string
			RecordType    string `json:"record_type"`
		}
		json.Unmarshal(b, &legacy)
		if legacy.ID != "" && legacy.Timestamp != "" || legacy.RecordType != "" {
			return errors.New("a Codex rollout of the format before 2025-09 (no timestamp and type on each line): not supported; resume it with a current Codex, which rewrites it")
		}
		return errors.New(`not a line of a Codex rollout: no "type"`)
	}
	at, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return fmt.Errorf("timestamp %q: %v", env.Timestamp, err)
	}
	if !s.started && env.Type != "session_meta" {
		return fmt.Errorf("a rollout begins with session_meta, not %q", env.Type)
	}
	switch env.Type {
	case "session_meta":
		if s.started {
			return nil // a fork's copy of its parent's: the first is the session's
		}
		var meta struct {
			ID         string `json:"id"`
			CLIVersion string `json:"cli_version"`
			Originator string `json:"originator"`
		}
		if err := json.Unmarshal(env.Payload, &meta); err != nil || meta.ID == "" {
			return fmt.Errorf("session_meta without an id (%v)", err)
		}
		s.started = true
		s.source = strings.TrimSpace(fmt.Sprintf("codex rollout %s %s %s", meta.ID, meta.Originator, meta.CLIVersion))
	case "turn_context":
	case "compacted":
		rep.skip("compacted")
	case "event_msg":
		return s.event(env.Payload, at, rep)
	case "response_item":
		return s.item(env.Payload, at, rep)
	default:
		// A line of a later format (Codex skips what it cannot read, too):
		// counted, so that the report says what was not read.
		rep.skip("unknown/" + env.Type)
	}
	return nil
}

// event reads an event_msg: a user message starts a turn, a token count
// gives the step its reasoning tokens, the end of a task ends the turn.
func (s *session) event(payload json.RawMessage, at time.Time, rep *Report) error {
	var head payloadHead
	if err := json.Unmarshal(payload, &head); err != nil || head.Type == "" {
		return fmt.Errorf("event_msg without a type (%v)", err)
	}
	switch head.Type {
	case "task_started":
		s.endTurn(rep)
		s.startTurn(at)
		s.tasked = true
	case "user_message":
		var m struct {
			Message string `json:"message"`
			Kind    string `json:"kind"`
		}
		if err := json.Unmarshal(payload, &m); err != nil {
			return fmt.Errorf("user_message: %v", err)
		}
		if m.Kind != "" && m.Kind != "plain" {
			return nil // context Codex injected (2025-09 to 2025-10 files)
		}
		s.userMessage(m.Message, at, rep)
	case "item_completed":
		// Codex since 2026 reports the user's message as a completed
		// UserMessage item (and no user_message event).
		var ic struct {
			Item struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"item"`
		}
		if json.Unmarshal(payload, &ic) != nil || ic.Item.Type != "UserMessage" {
			return nil
		}
		var text []string
		for _, c := range ic.Item.Content {
			if c.Type == "text" {
				text = append(text, c.Text)
			}
		}
		s.userMessage(strings.Join(text, "\n"), at, rep)
	case "token_count":
		var tc struct {
			Info *struct {
				Total tokenUsage `json:"total_token_usage"`
				Last  tokenUsage `json:"last_token_usage"`
			} `json:"info"`
		}
		if err := json.Unmarshal(payload, &tc); err != nil {
			return fmt.Errorf("token_count: %v", err)
		}
		if tc.Info == nil || tc.Info.Total == s.usage {
			return nil // a rate limit's, or the same count again
		}
		s.usage = tc.Info.Total
		s.reasoningTokens(tc.Info.Last.ReasoningOutputTokens)
	case "task_complete", "turn_aborted":
		s.endTurn(rep)
	default:
		// agent_message and agent_reasoning repeat items; the rest is
		// the session's bookkeeping.
	}
	return nil
}

// item reads a response_item: the model's message, reasoning and calls
// make its steps; the calls' outputs close them.
func (s *session) item(payload json.RawMessage, at time.Time, rep *Report) error {
	var head payloadHead
	if err := json.Unmarshal(payload, &head); err != nil || head.Type == "" {
		return fmt.Errorf("response_item without a type (%v)", err)
	}
	if head.Type == "message" && head.Role != "assistant" {
		text := messageText(payload)
		switch {
		case head.Role == "user" && s.cur != nil && len(s.cur.Steps) > 0:
			rep.skip("response_item/message (user, mid-turn)")
			s.context(message(protocol.RoleUser, text)) // the turns after it read it
		case head.Role == "user" && !strings.HasPrefix(strings.TrimSpace(text), "<"):
			// The prompt, which an event names too: the task when none
			// does.
			if s.cur != nil {
				s.userText = text
			}
		default:
			// Instructions (developer) and the context Codex adds to the
			// prompt (tagged, like <environment_context>): the model reads
			// them before the turn.
			s.context(message(protocol.Role(head.Role), text))
		}
		return nil
	}
	if s.cur == nil {
		return nil // nothing of the model's comes before the first user turn
	}
	switch head.Type {
	case "message":
		var m struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(payload, &m); err != nil {
			return fmt.Errorf("message: %v", err)
		}
		for _, c := range m.Content {
			if c.Type == "output_text" {
				s.modelText(c.Text, at)
			}
		}
	case "reasoning":
		s.modelStep(at) // its tokens come with the token count
	case "function_call", "custom_tool_call":
		var c struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			CallID    string `json:"call_id"`
			Arguments string `json:"arguments"`
			Input     string `json:"input"`
		}
		if err := json.Unmarshal(payload, &c); err != nil {
			return fmt.Errorf("%s: %v", head.Type, err)
		}
		if c.Name == "" || c.CallID == "" {
			return fmt.Errorf("%s without a name or call_id", head.Type)
		}
		call := sampler.TraceCall{Name: c.Name, Arguments: c.Arguments}
		if c.Namespace != "" {
			call.Name = c.Namespace + "." + c.Name
		}
		if head.Type == "custom_tool_call" {
			call.Type, call.Arguments = sampler.CustomCall, c.Input
		}
		s.call(call, c.CallID, at, rep)
	case "function_call_output", "custom_tool_call_output":
		var o struct {
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(payload, &o); err != nil {
			return fmt.Errorf("%s: %v", head.Type, err)
		}
		if !s.output(o.CallID, outputText(o.Output, rep), at) {
			rep.skip("response_item/" + head.Type + " (no call of this turn)")
		}
	default:
		// web_search_call, local_shell_call, image_generation_call,
		// tool_search_call, ghost_snapshot, compaction, …: a replay has
		// no way to make them.
		rep.skip("response_item/" + head.Type)
	}
	return nil
}

// messageText is the text of a message item's content.
func messageText(payload json.RawMessage) string {
	var m struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(payload, &m)
	var text []string
	for _, c := range m.Content {
		if c.Type == "input_text" || c.Type == "output_text" {
			text = append(text, c.Text)
		}
	}
	return strings.Join(text, "\n")
}

// outputText is a tool output as the model read it: a string, or the text
// of an array of content items (an image's counted as skipped).
func outputText(raw json.RawMessage, rep *Report) string {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		rep.skip("output (neither text nor content items)")
		return string(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		} else {
			rep.skip("output/" + p.Type)
		}
	}
	return b.String()
}
