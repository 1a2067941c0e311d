package traceimport

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// Record reads a traffic log (the format of package runtime/record, as
// `tether serve --record` writes it) and returns a trace of each user turn
// that ends in a final answer.
//
// A log holds the responses of any number of clients, interleaved. They
// are put together into sessions by what links them: a request's
// previous_response_id; the appends of a suspended rollout; and, for a
// client that sends the whole conversation each time (stateless HTTP), the
// model's items its input carries back (a call's call_id, a message's
// id), the items after the last of them being what it adds. A request
// linked to nothing begins a session. In a session, a user message begins
// a turn unless calls are waiting for their outputs; a step's model time
// runs from the request (or the append) to its last item, and a call's
// duration from the end of its step (the pause, or the response's end,
// when its client had every call of it) to the output's arrival.
//
// The traces are named name when the log makes one, else name-K for the
// Kth session's only turn and name-K-N for its Nth turn of several.
//
// A log cut inside a line (its writer stopped, or a write failed, mid-line)
// is read up to its last whole line; Report.Cuts says where.
func Record(r io.Reader, name string) ([]*sampler.Trace, *Report, error) {
	rd, err := record.NewReader(r)
	if err != nil {
		return nil, nil, err
	}
	return RecordLog(rd, name)
}

// RecordLog is Record reading rd: one stream, or the files of a rotated
// log (record.OpenFiles) as one. A session the log's first file joins in
// the middle, its beginning rotated out and removed, makes no trace of the
// turn it is in; Report.FirstPart says how many files went.
func RecordLog(rd *record.Reader, name string) ([]*sampler.Trace, *Report, error) {
	im := &recordImport{rep: &Report{FirstPart: rd.Header.Part}, responses: map[string]*recResponse{}, owner: map[string][]*recSession{}}
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if err := im.line(l); err != nil {
			return nil, nil, err
		}
	}
	im.rep.Lines, im.rep.Cuts = rd.Lines(), rd.Cuts()
	var traces []*sampler.Trace
	for k, s := range im.sessions {
		s.endTurn(im.rep)
		im.rep.Turns += s.turn
		for i, t := range s.done {
			switch {
			case len(im.sessions) == 1 && s.turn == 1:
				t.Name = name
			case len(im.sessions) == 1:
				t.Name = name + "-" + strconv.Itoa(s.turnOf[i])
			case s.turn == 1:
				t.Name = name + "-" + strconv.Itoa(k+1)
			default:
				t.Name = name + "-" + strconv.Itoa(k+1) + "-" + strconv.Itoa(s.turnOf[i])
			}
			t.Source = fmt.Sprintf("tether record %s session %d (%s) turn %d", rd.Header.Started.Format(time.RFC3339), k+1, s.first, s.turnOf[i])
			traces = append(traces, t)
		}
	}
	im.rep.Sessions = len(im.sessions)
	return traces, im.rep, nil
}

// recordImport is the state of a traffic log being read.
type recordImport struct {
	rep       *Report
	sessions  []*recSession
	responses map[string]*recResponse
	owner     map[string][]*recSession // the sessions each of the model's items (by itemKey) came from, in order
}

// recSession is one client's conversation in the log.
type recSession struct {
	turns
	first string // its first response's id
}

// recResponse is a response of the log.
type recResponse struct {
	sess      *recSession
	reasoning int // the reasoning tokens its usage has counted so far
}

func (im *recordImport) line(l *record.Line) error {
	switch l.Kind {
	case record.KindRequest:
		req, err := l.Request()
		if err != nil {
			return err
		}
		if _, ok := im.responses[l.ResponseID]; ok {
			return fmt.Errorf("%s: a second request for %s", l.Where(), l.ResponseID)
		}
		s, input := im.sessionOf(req)
		if s == nil {
			s = &recSession{first: l.ResponseID}
			s.label = "session " + strconv.Itoa(len(im.sessions)+1) + " "
			im.sessions = append(im.sessions, s)
		}
		im.responses[l.ResponseID] = &recResponse{sess: s}
		im.input(s, input, l.At)
	case record.KindAppend:
		items, err := l.Append()
		if err != nil {
			return err
		}
		if r := im.responses[l.ResponseID]; r != nil {
			im.input(r.sess, items, l.At)
		} else {
			im.rep.skip("append (to a response without its request in the log)")
		}
	case record.KindEvent:
		r := im.responses[l.ResponseID]
		if r == nil {
			// A fork's, or one taken over from another server: its
			// beginning is not here.
			im.rep.skip("event (of a response without its request in the log)")
			return nil
		}
		switch typ := l.EventType(); typ {
		case protocol.EventOutputItemDone:
			ev, err := l.Event()
			if err != nil {
				return err
			}
			if oe, ok := ev.(*protocol.OutputItemEvent); ok && oe.Item != nil {
				im.modelItem(r.sess, oe.Item, l.At)
			}
		case protocol.EventDone, protocol.EventCompleted, protocol.EventIncomplete, protocol.EventFailed, protocol.EventCancelled:
			ev, err := l.Event()
			if err != nil {
				return err
			}
			re, ok := ev.(*protocol.ResponseEvent)
			if !ok || re.Response == nil {
				return fmt.Errorf("%s: %s without its response", l.Where(), typ)
			}
			if u := re.Response.Usage; u != nil && u.OutputTokensDetails.ReasoningTokens > r.reasoning {
				r.sess.reasoningTokens(u.OutputTokensDetails.ReasoningTokens - r.reasoning)
				r.reasoning = u.OutputTokensDetails.ReasoningTokens
			}
			r.sess.stepEnded(l.At)
			if typ != protocol.EventDone && typ != protocol.EventCompleted {
				r.sess.endTurn(im.rep)
			}
		case protocol.EventError:
			r.sess.endTurn(im.rep)
		}
	}
	return nil
}

// sessionOf finds the session a request continues, and the input it adds
// to it: all of it after a previous_response_id, else what follows the
// last of the model's items it carries back. nil: it begins a session.
func (im *recordImport) sessionOf(req *protocol.CreateRequest) (*recSession, protocol.Items) {
	if id := req.PreviousResponseID; id != "" {
		if r := im.responses[id]; r != nil {
			return r.sess, req.Input
		}
		im.rep.skip("request (continuing a response not in the log)")
		return nil, req.Input
	}
	for i := len(req.Input) - 1; i >= 0; i-- {
		k := itemKey(req.Input[i])
		if k == "" {
			continue
		}
		// Replayed sessions make the same items (a replay's call ids are
		// its trace's): the one waiting on the call, else the latest that
		// made it.
		owners := im.owner[k]
		for j := len(owners) - 1; j >= 0; j-- {
			if id, ok := strings.CutPrefix(k, "call:"); ok && owners[j].calls[id] != nil {
				return owners[j], req.Input[i+1:]
			}
		}
		if len(owners) > 0 {
			return owners[len(owners)-1], req.Input[i+1:]
		}
	}
	return nil, req.Input
}

// input takes what a client sent a session. Its last user message begins
// a turn, unless calls wait for outputs: then it steers the turn, which a
// replay cannot do. Outputs answer the turn's calls. What comes before
// that message (instructions, earlier messages, a conversation the client
// brought with its calls and outputs) is the turn's history.
func (im *recordImport) input(s *recSession, items protocol.Items, at time.Time) {
	last := -1
	for i, it := range items {
		if m, ok := it.(*protocol.Message); ok && m.Role == protocol.RoleUser {
			last = i
		}
	}
	for i, it := range items {
		switch it := it.(type) {
		case *protocol.Message:
			switch {
			case it.Role == protocol.RoleUser && s.open > 0:
				im.rep.skip("message (user, mid-turn)")
				s.context(it) // the turns after it read it
			case i == last:
				s.userMessage(contentText(it.Content, im.rep), at, im.rep)
			default:
				s.context(it)
			}
		case *protocol.FunctionCallOutput, *protocol.CustomToolCallOutput:
			callID, _, _ := protocol.AnswerOf(it)
			switch {
			case s.output(callID, toolOutputText(it, im.rep), at):
			case i < last:
				s.context(it)
			default:
				im.rep.skip(string(it.ItemType()) + " (no call of this turn)")
			}
		case *protocol.FunctionCall, *protocol.CustomToolCall:
			if i < last {
				s.context(it)
			} else {
				im.rep.skip("input/" + string(it.ItemType()))
			}
		default:
			im.rep.skip("input/" + string(it.ItemType()))
		}
	}
}

// modelItem takes an item the model made in session s.
func (im *recordImport) modelItem(s *recSession, it protocol.Item, at time.Time) {
	if k := itemKey(it); k != "" && !slices.Contains(im.owner[k], s) {
		im.owner[k] = append(im.owner[k], s)
	}
	if s.cur == nil {
		im.rep.skip("item (before any user message)")
		return
	}
	switch it := it.(type) {
	case *protocol.Message:
		s.modelText(contentText(it.Content, im.rep), at)
	case *protocol.Reasoning:
		s.modelStep(at) // its tokens come with the usage
	case *protocol.FunctionCall:
		c := sampler.TraceCall{Name: it.Name, Arguments: it.Arguments}
		if it.Namespace != "" {
			c.Name = it.Namespace + "." + it.Name
		}
		s.call(c, it.CallID, at, im.rep)
	case *protocol.CustomToolCall:
		c := sampler.TraceCall{Type: sampler.CustomCall, Name: it.Name, Arguments: it.Input}
		if it.Namespace != "" {
			c.Name = it.Namespace + "." + it.Name
		}
		s.call(c, it.CallID, at, im.rep)
	default:
		// Hosted calls (web_search_call, mcp_call, …) and the rest: a
		// replay has no way to make them.
		im.rep.skip("item/" + string(it.ItemType()))
	}
}

// itemKey is what identifies an item of the model's when a client sends
// it back: a call's call_id, a message's or a reasoning item's id; "" for
// none. A client that drops a message's id, and sends no call after it,
// begins a session of its own, whose turn has the conversation it sent as
// its history: the same trace, apart.
func itemKey(it protocol.Item) string {
	switch it := it.(type) {
	case *protocol.FunctionCall:
		return "call:" + it.CallID
	case *protocol.CustomToolCall:
		return "call:" + it.CallID
	case *protocol.Message:
		if it.Role == protocol.RoleAssistant && it.ID != "" {
			return "id:" + it.ID
		}
	case *protocol.Reasoning:
		if it.ID != "" {
			return "id:" + it.ID
		}
	}
	return ""
}

// contentText is the text of a message's content parts; others are
// counted in rep when it is not nil.
func contentText(cs protocol.Contents, rep *Report) string {
	var text []string
	for _, c := range cs {
		switch c := c.(type) {
		case *protocol.InputText:
			text = append(text, c.Text)
		case *protocol.OutputText:
			text = append(text, c.Text)
		default:
			if rep != nil {
				rep.skip("content/" + string(c.ContentType()))
			}
		}
	}
	return strings.Join(text, "\n")
}

// toolOutputText is a tool output's text as the model read it.
func toolOutputText(it protocol.Item, rep *Report) string {
	var o protocol.ToolOutput
	switch it := it.(type) {
	case *protocol.FunctionCallOutput:
		o = it.Output
	case *protocol.CustomToolCallOutput:
		o = it.Output
	}
	if o.Parts == nil {
		return o.Text
	}
	return contentText(o.Parts, rep)
}
