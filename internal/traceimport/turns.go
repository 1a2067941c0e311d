package traceimport

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// turns builds the traces of one session's user turns from what happened
// in it, in order: user messages, the model's items, the tools' outputs,
// each at its time. The Codex and traffic-log importers feed it.
type turns struct {
	label string // what Dropped calls the session ("" when a file has one)

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

	// conv is the session's conversation so far, as the model read it:
	// each turn's trace begins with it as its history. lastModel is when
	// the model last wrote, to time the user's think before a turn.
	conv      protocol.Items
	lastModel time.Time
}

// callRef finds a call of the current turn by its call_id.
type callRef struct {
	step, index int
	at          time.Time
}

// startTurn begins a user turn.
func (s *turns) startTurn(at time.Time) {
	s.turn++
	s.cur = &sampler.Trace{History: slices.Clip(s.conv)}
	if !s.lastModel.IsZero() {
		s.cur.ThinkMS = max(int(at.Sub(s.lastModel).Milliseconds()), 0)
	}
	s.step, s.stepAt, s.calls, s.open, s.bad, s.tasked = nil, at, map[string]*callRef{}, 0, "", false
}

// userMessage is the user's message: the task of the turn task_started
// began, or (files without task_started, or a message after the model's
// answer) the start of a turn of its own.
func (s *turns) userMessage(text string, at time.Time, rep *Report) {
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
	s.conv = append(s.conv, protocol.UserMessage(text))
	if len(s.cur.Steps) == 0 {
		s.stepAt = at
	}
}

// context is an item the client put in the conversation besides the
// user's turns (instructions, the environment, a conversation it brought):
// the history of the turns after it holds it.
func (s *turns) context(it protocol.Item) {
	s.conv = append(s.conv, it)
	if s.cur != nil && len(s.cur.Steps) == 0 {
		s.cur.History = append(s.cur.History, it) // read before the turn's first step
	}
}

// message is a message of role with text.
func message(role protocol.Role, text string) *protocol.Message {
	return &protocol.Message{Role: role, Content: protocol.Contents{&protocol.InputText{Text: text}}}
}

// modelStep is the step the model is writing, begun by its first item.
func (s *turns) modelStep(at time.Time) *sampler.TraceStep {
	if s.step == nil {
		s.cur.Steps = append(s.cur.Steps, sampler.TraceStep{})
		s.step = &s.cur.Steps[len(s.cur.Steps)-1]
	}
	s.step.ModelMS = max(int(at.Sub(s.stepAt).Milliseconds()), 0)
	s.lastModel = at
	return s.step
}

// lastStep is the current turn's last step, if any.
func (s *turns) lastStep() *sampler.TraceStep {
	if s.cur == nil || len(s.cur.Steps) == 0 {
		return nil
	}
	return &s.cur.Steps[len(s.cur.Steps)-1]
}

// endTurn keeps the current turn as a trace when it ended in a final
// answer with every call answered.
func (s *turns) endTurn(rep *Report) {
	t := s.cur
	s.cur, s.step = nil, nil
	if t == nil {
		return
	}
	if len(s.calls) > 0 {
		// Calls never answered: the conversation goes on without them (a
		// call without its output is not an input the API takes).
		s.conv = slices.DeleteFunc(s.conv, func(it protocol.Item) bool {
			switch it := it.(type) {
			case *protocol.FunctionCall:
				return s.calls[it.CallID] != nil
			case *protocol.CustomToolCall:
				return s.calls[it.CallID] != nil
			}
			return false
		})
		clear(s.calls)
	}
	if t.Task == "" {
		t.Task = s.userText
	}
	s.userText = ""
	last := len(t.Steps) - 1
	switch {
	case s.bad != "":
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("%sturn %d: %s", s.label, s.turn, s.bad))
	case last < 0:
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("%sturn %d: no model output", s.label, s.turn))
	case s.open > 0:
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("%sturn %d: ended with %d calls unanswered", s.label, s.turn, s.open))
	case len(t.Steps[last].Calls) > 0 || t.Steps[last].Text == "":
		rep.Dropped = append(rep.Dropped, fmt.Sprintf("%sturn %d: ended without a final answer", s.label, s.turn))
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

// modelText adds text the model wrote to its step.
func (s *turns) modelText(text string, at time.Time) {
	st := s.modelStep(at)
	if st.Text != "" {
		st.Text += "\n\n"
	}
	st.Text += text
	s.conv = append(s.conv, &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: text}}})
}

// call adds a tool call the model made to its step.
func (s *turns) call(c sampler.TraceCall, callID string, at time.Time, rep *Report) {
	if c.Type == "" && !json.Valid([]byte(c.Arguments)) {
		rep.skip("function_call (arguments not JSON)")
		s.bad = "a function call whose arguments are not JSON"
	}
	st := s.modelStep(at)
	st.Calls = append(st.Calls, c)
	s.calls[callID] = &callRef{step: len(s.cur.Steps) - 1, index: len(st.Calls) - 1, at: at}
	s.open++
	if c.Type == sampler.CustomCall {
		s.conv = append(s.conv, &protocol.CustomToolCall{CallID: callID, Name: c.Name, Input: c.Arguments})
	} else {
		s.conv = append(s.conv, &protocol.FunctionCall{CallID: callID, Name: c.Name, Arguments: c.Arguments})
	}
}

// output is the output of call callID, as the model read it; false when
// the turn has no such call waiting. The model's next item begins the
// next step.
func (s *turns) output(callID, text string, at time.Time) bool {
	ref := s.calls[callID]
	if ref == nil {
		return false
	}
	delete(s.calls, callID)
	s.open--
	c := &s.cur.Steps[ref.step].Calls[ref.index]
	c.Output = text
	c.DurationMS = max(int(at.Sub(ref.at).Milliseconds()), 0) // a clock stepped back: none
	s.step, s.stepAt = nil, at
	if c.Type == sampler.CustomCall {
		s.conv = append(s.conv, &protocol.CustomToolCallOutput{CallID: callID, Output: protocol.ToolOutput{Text: text}})
	} else {
		s.conv = append(s.conv, &protocol.FunctionCallOutput{CallID: callID, Output: protocol.ToolOutput{Text: text}})
	}
	return true
}

// reasoningTokens gives the step the model wrote last its reasoning
// tokens, unless it has them.
func (s *turns) reasoningTokens(n int) {
	if st := s.lastStep(); st != nil && st.ReasoningTokens == 0 {
		st.ReasoningTokens = n
	}
}

// stepEnded: the step the model wrote last ended at at (a pause, or the
// response's end): its client has every call of it from then, so the
// calls still waiting are timed from there.
func (s *turns) stepEnded(at time.Time) {
	for _, ref := range s.calls {
		if at.After(ref.at) {
			ref.at = at
		}
	}
}
