// Package traceimport makes replay traces (sampler.Trace) of agent
// sessions recorded elsewhere: Codex CLI rollout files. Each user turn of a
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

	"github.com/tether-run/tether/sampler"
)

// Report is what an import took and left.
type Report struct {
	Lines   int            // the lines read
	Turns   int            // user turns in the session
	Skipped map[string]int // items or events not replayable, by type ("response_item/web_search_call"); "unknown/TYPE" counts lines of a type the importer does not know
	// Dropped are the turns that made no trace, and why ("turn 3: ended
	// without a final answer").
	Dropped []string
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
	rep.Turns = s.turn
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
	started bool
	source  string

	turn     int // the current user turn, from 1
	cur      *sampler.Trace
	step     *sampler.TraceStep  // the step the model is writing, nil between steps
	stepAt   time.Time           // when the current step's request went out: the turn's start, or its last output
	calls    map[string]*callRef // by call_id; a ref indexes the turn's steps
	open     int                 // calls of the turn without their output
	bad      string              // why the current turn cannot be replayed, if it cannot
	userText string              // the turn's last user message item that is not Codex's context: its task, failing an event
	tasked   bool                // the turn began with task_started (it ends with task_complete, not the next message)

	done   []*sampler.Trace
	turnOf []int // the turn each of done is
	usage  tokenUsage
}

// callRef finds a call of the current turn by its call_id.
type callRef struct {
	step, index int
	at          time.Time
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
		if st := s.lastStep(); st != nil && st.ReasoningTokens == 0 {
			st.ReasoningTokens = tc.Info.Last.ReasoningOutputTokens
		}
	case "task_complete", "turn_aborted":
		s.endTurn(rep)
	default:
		// agent_message and agent_reasoning repeat items; the rest is
		// the session's bookkeeping.
	}
	return nil
}

// startTurn begins a user turn.
func (s *session) startTurn(at time.Time) {
	s.turn++
	s.cur = &sampler.Trace{}
	s.step, s.stepAt, s.calls, s.open, s.bad, s.tasked = nil, at, map[string]*callRef{}, 0, "", false
}

// userMessage is the user's message: the task of the turn task_started
// began, or (files without task_started, or a message after the model's
// answer) the start of a turn of its own.
func (s *session) userMessage(text string, at time.Time, rep *Report) {
	switch {
	case s.cur != nil && s.tasked && s.cur.Task != "":
		// Steered into the turn task_started began: the turn goes on
		// (a replay has no way to send it mid-turn).
		rep.skip("user message (mid-turn)")
		return
	case s.cur == nil || s.cur.Task != "" || len(s.cur.Steps) > 0:
		s.endTurn(rep)
		s.startTurn(at)
	}
	s.cur.Task = text
	if len(s.cur.Steps) == 0 {
		s.stepAt = at
	}
}

// item reads a response_item: the model's message, reasoning and calls
// make its steps; the calls' outputs close them.
func (s *session) item(payload json.RawMessage, at time.Time, rep *Report) error {
	var head payloadHead
	if err := json.Unmarshal(payload, &head); err != nil || head.Type == "" {
		return fmt.Errorf("response_item without a type (%v)", err)
	}
	if s.cur == nil {
		return nil // the instructions and context before the first user turn
	}
	switch head.Type {
	case "message":
		if head.Role != "assistant" {
			switch {
			case head.Role == "user" && len(s.cur.Steps) > 0:
				rep.skip("response_item/message (user, mid-turn)")
			case head.Role == "user":
				// The prompt, or context Codex adds to it (tagged, like
				// <environment_context>): the task when no event names it.
				if text := messageText(payload); !strings.HasPrefix(strings.TrimSpace(text), "<") {
					s.userText = text
				}
			}
			return nil
		}
		var m struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(payload, &m); err != nil {
			return fmt.Errorf("message: %v", err)
		}
		st := s.modelStep(at)
		for _, c := range m.Content {
			if c.Type == "output_text" {
				if st.Text != "" {
					st.Text += "\n\n"
				}
				st.Text += c.Text
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
		} else if !json.Valid([]byte(c.Arguments)) {
			rep.skip("response_item/function_call (arguments not JSON)")
			s.bad = "a function call whose arguments are not JSON"
		}
		st := s.modelStep(at)
		st.Calls = append(st.Calls, call)
		s.calls[c.CallID] = &callRef{step: len(s.cur.Steps) - 1, index: len(st.Calls) - 1, at: at}
		s.open++
	case "function_call_output", "custom_tool_call_output":
		var o struct {
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(payload, &o); err != nil {
			return fmt.Errorf("%s: %v", head.Type, err)
		}
		ref := s.calls[o.CallID]
		if ref == nil {
			rep.skip("response_item/" + head.Type + " (no call of this turn)")
			return nil
		}
		delete(s.calls, o.CallID)
		s.open--
		c := &s.cur.Steps[ref.step].Calls[ref.index]
		c.Output = outputText(o.Output, rep)
		c.DurationMS = max(int(at.Sub(ref.at).Milliseconds()), 0) // a clock stepped back: none
		s.step, s.stepAt = nil, at                                // the next model item is the next step's
	default:
		// web_search_call, local_shell_call, image_generation_call,
		// tool_search_call, ghost_snapshot, compaction, …: a replay has
		// no way to make them.
		rep.skip("response_item/" + head.Type)
	}
	return nil
}

// modelStep is the step the model is writing, begun by its first item.
func (s *session) modelStep(at time.Time) *sampler.TraceStep {
	if s.step == nil {
		s.cur.Steps = append(s.cur.Steps, sampler.TraceStep{})
		s.step = &s.cur.Steps[len(s.cur.Steps)-1]
	}
	s.step.ModelMS = max(int(at.Sub(s.stepAt).Milliseconds()), 0)
	return s.step
}

// lastStep is the current turn's last step, if any.
func (s *session) lastStep() *sampler.TraceStep {
	if s.cur == nil || len(s.cur.Steps) == 0 {
		return nil
	}
	return &s.cur.Steps[len(s.cur.Steps)-1]
}

// endTurn keeps the current turn as a trace when it ended in a final
// answer with every call answered.
func (s *session) endTurn(rep *Report) {
	t := s.cur
	s.cur, s.step = nil, nil
	if t == nil {
		return
	}
	if t.Task == "" {
		t.Task = s.userText
	}
	s.userText = ""
	last := len(t.Steps) - 1
	switch {
	case s.bad != "":
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("turn %d: %s", s.turn, s.bad))
	case last < 0:
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("turn %d: no model output", s.turn))
	case s.open > 0:
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("turn %d: ended with %d calls unanswered", s.turn, s.open))
	case len(t.Steps[last].Calls) > 0 || t.Steps[last].Text == "":
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("turn %d: ended without a final answer", s.turn))
	default:
		for i := range t.Steps[:last] {
			if len(t.Steps[i].Calls) == 0 { // a message between steps: it joins the next step's
				t.Steps[i+1].Text = strings.TrimSpace(t.Steps[i].Text + "\n\n" + t.Steps[i+1].Text)
				t.Steps[i+1].ReasoningTokens += t.Steps[i].ReasoningTokens
				t.Steps[i+1].ModelMS += t.Steps[i].ModelMS
			}
		}
		steps := t.Steps[:0]
		for i, st := range t.Steps {
			if len(st.Calls) > 0 || i == last {
				steps = append(steps, st)
			}
		}
		t.Steps = steps
		s.done, s.turnOf = append(s.done, t), append(s.turnOf, s.turn)
	}
	s.open = 0
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
