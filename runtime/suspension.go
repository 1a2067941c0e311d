package runtime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// maxDetachedBytes bounds the frames a suspended rollout keeps for replay; a
// detached rollout that would keep more is cancelled.
const maxDetachedBytes = 8 << 20

// suspension is a suspended rollout as the server holds it, and the one
// owner of its state: the connection it reports to, whether it is parked on
// client calls, the frames a resuming client may have missed, and its
// result. Its methods are the only way to ask or change that state; a
// session keeps a reference per lane and asks. The state machine is drawn
// in doc.go.
//
// A suspension is also its rollout's client Tool (and its sink): the
// rollout's own goroutine parks on a step's client calls (park) until
// response.append has delivered every output; no goroutine waits per call.
//
// The rollout runs on a goroutine of the server's, so that it outlives its
// connection: detached, it keeps its frames until a connection with the
// same credentials sends response.resume, or the resume window ends and it
// is cancelled. Lock order: rollout.mu, then mu (put runs under the
// rollout's lock), then the session's outbox.
type suspension struct {
	srv   *Server
	ro    *rollout
	id    string
	creds string        // hash of the Authorization header of the connection that created it
	lane  string        // its stream_id, on every connection it reports to
	done  chan struct{} // closed when run has returned

	mu     sync.Mutex
	state  suspState     // guarded by mu
	sess   *session      // the connection it reports to, nil while detached; guarded by mu
	gone   chan struct{} // closed when sess stops being that connection; guarded by mu
	expiry *time.Timer   // the resume window, while detached; guarded by mu

	// The current step's client calls, guarded by mu.
	steps    int                      // steps begun
	step     []protocol.Call          // in output order
	byID     map[string]protocol.Call // the step's calls by what an output names them by (call_id; a local shell call's id too)
	outputs  map[string]protocol.Item // call_id -> the output appended for it
	answer   chan struct{}            // closed when the last call of the step has its output
	left     int                      // calls of the step without an output
	answered map[string]int           // call_id -> the step it got its output in, over the rollout
	pauses   int                      // pauses so far: names the one timer is for
	timer    *time.Timer              // SuspendTimeout of the current pause

	// The replay log, guarded by mu: frames since the client last appended
	// (appending proves it saw the pause).
	log       []frame
	logBytes  int
	sent      int    // sequence_number of the last frame put to a connection
	lastDone  *frame // the current pause's response.done
	paused    bool   // it has paused once (a fork's beginning is over)
	replaying bool   // a resuming connection is catching up from the log; new frames wait there

	// What run left, once it has returned; guarded by mu.
	terminal []byte // the terminal frame, held for the connection that settles the rollout
	conv     *conversation
}

// suspState is where a suspended rollout is in its life. Whether it is
// attached to a connection is told by suspension.sess.
type suspState int

const (
	suspRunning suspState = iota // sampling, running hosted tools, or ending
	suspParked                   // response.done is out; waiting for the client's outputs
	suspEnded                    // run has returned; the result waits for a connection to settle it
	suspSettled                  // a connection took the result; gone from the server
	suspExpired                  // detached past the resume window; cancelled and gone
)

// frame is one encoded event and its sequence_number.
type frame struct {
	seq int
	b   []byte
}

// suspend makes ro a suspended rollout reporting to sess on lane. It
// refuses when the server already holds MaxSuspended of them: each may
// outlive its connection, so they are bounded server-wide. start runs it.
func (s *Server) suspend(ro *rollout, sess *session, lane string) (*suspension, <-chan struct{}, *protocol.Error) {
	sp := &suspension{srv: s, ro: ro, id: ro.ID(), creds: sess.creds, lane: lane, done: make(chan struct{}),
		sess: sess, gone: make(chan struct{}), sent: -1}
	ro.client = sp
	if perr := s.register(sp); perr != nil {
		return nil, nil, perr
	}
	return sp, sp.gone, nil
}

// start runs the rollout on a server goroutine.
func (sp *suspension) start() {
	go func() {
		defer sp.srv.wg.Done() // added by register
		var conv *conversation
		var err error
		defer func() {
			if p := recover(); p != nil {
				sp.srv.log.Error("suspended rollout panicked", "panic", p)
				err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
					"The server had an error while processing the request.")
			}
			sp.ended(conv, err)
		}()
		conv, err = sp.ro.run(sp.srv.ctx, sp)
	}()
}

// ended records what run left.
func (sp *suspension) ended(conv *conversation, err error) {
	sp.mu.Lock()
	defer close(sp.done)
	defer sp.mu.Unlock()
	if sp.state != suspExpired {
		sp.state = suspEnded
	}
	sp.stopTimerLocked()
	sp.conv = conv
	if sp.terminal == nil && err != nil && !errors.Is(err, context.Canceled) {
		// It ended without a terminal event for a reason the client can be
		// told (a panic, a replay log overflow while detached; not a
		// shutdown or an expired resume window): the connection that
		// settles it answers with an error event, as runJob does for a
		// cached-state response, rather than leave the client waiting.
		sp.terminal = errorFrame(protocol.AsError(err), sp.lane)
	}
}

// Definition describes the client's functions collectively.
func (sp *suspension) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolFunction} }

// beginStep opens the step's client calls for outputs.
func (sp *suspension) beginStep(calls []protocol.Call) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.steps++
	sp.step, sp.left = calls, len(calls)
	sp.byID = make(map[string]protocol.Call, len(calls))
	for _, c := range calls {
		for _, id := range c.Names() {
			sp.byID[id] = c
		}
	}
	sp.outputs, sp.answer = make(map[string]protocol.Item, len(calls)), make(chan struct{})
	if sp.answered == nil {
		sp.answered = make(map[string]int)
	}
}

// park announces the pause of the step's client calls (with every one of
// them, once their output_item.done events are out) and waits until
// response.append has delivered all their outputs, which it returns by
// call_id; the rollout's goroutine runs it, while the step's hosted calls
// go on. It is the one place a suspended rollout parks.
func (sp *suspension) park(ctx context.Context) (map[string]protocol.Item, error) {
	sp.mu.Lock()
	pause := make([]protocol.PendingCall, len(sp.step))
	for i, c := range sp.step {
		pause[i] = pendingCall(c)
	}
	answer := sp.answer
	sp.mu.Unlock()
	sp.ro.requireAction(pause)
	select {
	case <-answer:
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return sp.outputs, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Call is park, for a step of the one call: the rollout parks a step's
// client calls together (parker), never through Call.
func (sp *suspension) Call(ctx context.Context, call protocol.Call, _ func(protocol.Event)) (protocol.Item, error) {
	outs, err := sp.park(ctx)
	return outs[call.CallID], err
}

// pendingCall is a call as a pause lists it.
func pendingCall(c protocol.Call) protocol.PendingCall {
	p := protocol.PendingCall{Type: c.Type, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace}
	if c.Type == protocol.ItemCustomToolCall {
		p.Input = c.Input
	} else {
		p.Arguments = c.Input
	}
	return p
}

// put is the rollout's sink. Every frame goes into the replay log and, when
// attached, to the connection; detached, only to the log. The terminal frame
// is held back for the connection that settles the rollout. The pause's
// response.done parks the rollout as it goes out.
func (sp *suspension) put(ev protocol.Event, acct *delivery) error {
	b, err := protocol.Marshal(ev)
	if err != nil {
		return err
	}
	f := frame{seq: protocol.Header(ev).SequenceNumber, b: b}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch protocol.Type(ev) {
	case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		sp.terminal = b
		return nil
	case protocol.EventDone:
		sp.lastDone, sp.paused = &f, true
		// Parked once the pause is queued: arming its timer (a syscall
		// when it wakes the netpoller) is not on the way to the client.
		// mu is held throughout, so no append can come first.
		defer sp.parkLocked()
	case protocol.EventCreated, protocol.EventInProgress:
		// A fork's beginning shows what its first pause shows again: a
		// resume replays that pause, so once sent these are not kept for
		// one (64 forks hold 64 fewer pairs of step views). Not sent, the
		// log keeps them: the client learns the fork's id from them.
		if sp.ro.fork != nil && !sp.paused && sp.sess != nil && !sp.replaying && sp.sess.send(b, acct) == nil {
			sp.sent = f.seq
			return nil
		}
	}
	sp.log = append(sp.log, f)
	sp.logBytes += len(b)
	if sp.sess != nil && !sp.replaying && sp.sess.send(b, acct) == nil {
		sp.sent = f.seq
		for sp.logBytes > maxDetachedBytes && len(sp.log) > 1 { // sent long ago: beyond replay
			sp.logBytes -= len(sp.log[0].b)
			sp.log = sp.log[1:]
		}
		return nil
	}
	// Detached, catching up, or the connection is going away: the log
	// keeps it for the client.
	if sp.logBytes > maxDetachedBytes {
		return errDetachedFull
	}
	return nil
}

// behind reports whether the rollout's frames wait for a client: on the
// connection it reports to, or in the replay log while it is detached or a
// resuming client catches up. Merged there, deltas keep the log short.
func (sp *suspension) behind(acct *delivery) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.sess == nil || sp.replaying || acct.behind()
}

// parkLocked: the pause's response.done is going out; from now on the step
// takes outputs, for SuspendTimeout at most.
func (sp *suspension) parkLocked() {
	sp.state = suspParked
	sp.pauses++
	sp.srv.obs.Paused()
	pause := sp.pauses
	sp.timer = time.AfterFunc(sp.srv.opts.SuspendTimeout, func() { sp.timeout(pause) })
}

// timeout ends a rollout whose pause waited longer than SuspendTimeout.
func (sp *suspension) timeout(pause int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != suspParked || sp.pauses != pause {
		return
	}
	sp.state = suspRunning // to its end: it takes no more outputs
	sp.ro.abort(errToolTimeout)
}

func (sp *suspension) stopTimerLocked() {
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
}

// ownedLocked checks that the rollout reports to sess, on lane, and has not
// ended.
func (sp *suspension) ownedLocked(sess *session, lane string) *protocol.Error {
	if sp.sess != sess || sp.state >= suspEnded {
		return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
			"No suspended response '%s' on this connection.", sp.id)
	}
	if lane != sp.lane {
		return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
			"Response '%s' belongs to stream '%s', not '%s'.", sp.id, sp.lane, lane)
	}
	return nil
}

// deliver handles response.append from sess: function_call_outputs for the
// parked calls, and user messages, which steer the rollout (they join the
// context after the step). It checks every item before delivering any, so a
// refused append changes nothing. The moment the last parked call has its
// output, the rollout is running again.
func (sp *suspension) deliver(sess *session, lane string, items protocol.Items) *protocol.Error {
	if perr := protocol.ValidateItems(items, "input"); perr != nil {
		return perr
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if perr := sp.ownedLocked(sess, lane); perr != nil {
		return perr
	}
	if sp.state != suspParked {
		return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' is not waiting for tool outputs: append only after response.done.", sp.id)
	}
	seen := map[string]bool{}
	var steering protocol.Items
	for i, it := range items {
		param := indexParam("input", i)
		if named, answers, ok := protocol.AnswerOf(it); ok {
			callID := sp.stepCall(named).CallID
			if callID == "" {
				callID = named
			}
			// Call ids need only be unique within a step: some backends
			// number them per completion (call_0 in every step). An id of
			// an earlier step that is not pending now was answered then.
			step, answered := sp.answered[callID]
			_, inStep := sp.byID[callID]
			_, has := sp.outputs[callID]
			pending := inStep && !has
			switch {
			case seen[callID] || answered && (step == sp.steps || !pending):
				return protocol.Invalid(protocol.CodeDuplicateToolOutput, param+".call_id",
					"The tool call '%s' already has an output.", callID)
			case !pending:
				return protocol.Invalid(protocol.CodeToolCallNotFound, param+".call_id",
					"No pending tool call with call_id '%s' in response '%s'.", callID, sp.id)
			}
			if call := sp.stepCall(callID); call.Type != answers {
				return protocol.OutputMismatch(it, callID, call.Type, param)
			}
			seen[callID] = true
			continue
		}
		switch it := it.(type) {
		case *protocol.Message:
			if it.Role != protocol.RoleUser {
				return protocol.Invalid(protocol.CodeInvalidValue, param+".role",
					"Only user messages may steer a suspended response, not '%s' messages.", it.Role)
			}
			steering = append(steering, it)
		default:
			return protocol.Invalid(protocol.CodeInvalidValue, param+".type",
				"response.append takes tool outputs (function_call_output, custom_tool_call_output, shell_call_output, …) and user messages, not '%s'.", it.ItemType())
		}
	}
	nameInputs(items)
	// Steering first: it must be in the rollout's inbox when the step ends.
	if len(steering) > 0 {
		sp.ro.steer(steering...)
	}
	for _, it := range items {
		named, _, ok := protocol.AnswerOf(it)
		if !ok {
			continue
		}
		callID := sp.stepCall(named).CallID
		sp.answered[callID] = sp.steps
		sp.left--
		sp.outputs[callID] = it
	}
	if sp.left == 0 {
		close(sp.answer)
		sp.state = suspRunning
		sp.stopTimerLocked()
		// Appending proves the client saw the pause and everything before
		// it: a resume from now on replays what follows, never the pause.
		sp.log, sp.logBytes, sp.lastDone = nil, 0, nil
	}
	return nil
}

// stepCall is the current step's call that an output naming callID
// answers; the zero Call when there is none.
func (sp *suspension) stepCall(callID string) protocol.Call { return sp.byID[callID] }

// cancel handles response.cancel from sess: the rollout ends with status
// cancelled.
func (sp *suspension) cancel(sess *session, lane string) *protocol.Error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if perr := sp.ownedLocked(sess, lane); perr != nil {
		return perr
	}
	if sp.state == suspParked {
		sp.state = suspRunning // to its end: it takes no more outputs
		sp.stopTimerLocked()
	}
	sp.ro.abort(errCancelled)
	return nil
}

// forkPoint takes the rollout's state for response.fork from sess on lane:
// it must report there, be parked on its client's calls, and have none of
// them answered yet (a fork starts from the pause, and appends its own).
// The rollout's lock is taken first, as the lock order says.
func (sp *suspension) forkPoint(sess *session, lane string) (*forkPoint, *protocol.Error) {
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if perr := sp.ownedLocked(sess, lane); perr != nil {
		return nil, perr
	}
	switch {
	case sp.state != suspParked:
		return nil, protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' is not waiting for tool outputs: fork it after its response.done.", sp.id)
	case sp.left != len(sp.step):
		return nil, protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' has outputs of this pause appended already: fork it before appending any.", sp.id)
	}
	return sp.ro.forkPointLocked()
}

// parkedOn reports whether the rollout reports to sess and waits for its
// client's outputs.
func (sp *suspension) parkedOn(sess *session) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.sess == sess && sp.state == suspParked
}

// resumable reports whether a response.resume from sess, with creds, may
// take the rollout over.
func (sp *suspension) resumable(sess *session, creds string) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.creds == creds && sp.sess != sess && sp.state != suspSettled && sp.state != suspExpired
}

// attach makes sess the connection the rollout reports to, taking it over
// from another connection if need be (a client whose connection died
// half-open resumes before the server notices the drop). The frames the
// client missed are replayed by replay, from the sequence_number returned:
// after, or when nil the last frame the server sent. gone is closed when
// sess stops being the rollout's connection.
func (sp *suspension) attach(sess *session, after *int) (gone <-chan struct{}, from int, ok bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.sess == sess || sp.state == suspSettled || sp.state == suspExpired {
		return nil, 0, false
	}
	if sp.expiry != nil {
		sp.expiry.Stop()
		sp.expiry = nil
	}
	if sp.sess != nil {
		close(sp.gone)
	}
	sp.sess, sp.gone, sp.replaying = sess, make(chan struct{}), true
	from = sp.sent
	if after != nil {
		from = *after
	}
	return sp.gone, from, true
}

// replay sends sess what its client has not seen, from the log: the pending
// response.done first when the rollout is parked on it (the client may have
// seen it and still needs it again, to know what to append), then every
// frame after from. It runs on the resuming lane's worker, with flow control
// and no lock held across a send; frames the rollout makes meanwhile wait in
// the log, so they follow in order.
func (sp *suspension) replay(ctx context.Context, sess *session, from int) {
	withDone := true
	for {
		sp.mu.Lock()
		if sp.sess != sess {
			sp.mu.Unlock()
			return
		}
		var batch [][]byte
		if d := sp.lastDone; withDone && d != nil && d.seq <= from && sp.state == suspParked {
			batch = append(batch, d.b)
		}
		withDone = false
		for _, f := range sp.log {
			if f.seq > from {
				batch = append(batch, f.b)
				from = f.seq
			}
		}
		if len(batch) == 0 {
			sp.replaying = false
			sp.mu.Unlock()
			sp.ro.flushDelta() // what it merged while the client was away
			return
		}
		sp.sent = max(sp.sent, from)
		sp.mu.Unlock()
		for _, b := range batch {
			if sess.send(b, nil) != nil || sess.flow(ctx) != nil {
				return // the session is ending; it detaches the rollout
			}
		}
	}
}

// detach unlinks the rollout from a connection that ended and starts the
// resume window, unless the server is shutting down (the rollout then ends
// with the server).
func (sp *suspension) detach(sess *session) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.sess != sess {
		return
	}
	close(sp.gone)
	sp.sess, sp.gone, sp.replaying = nil, nil, false
	if sp.state == suspSettled || sp.state == suspExpired || sp.srv.ctx.Err() != nil {
		return
	}
	sp.expiry = time.AfterFunc(sp.srv.opts.ResumeWindow, sp.expire)
}

// expire ends a rollout nobody resumed in time.
func (sp *suspension) expire() {
	sp.mu.Lock()
	if sp.sess != nil || sp.state == suspSettled || sp.state == suspExpired {
		sp.mu.Unlock()
		return
	}
	sp.state = suspExpired
	sp.stopTimerLocked()
	sp.ro.abort(errResumeExpired)
	sp.mu.Unlock()
	sp.srv.unregister(sp)
}

// follow waits, on the lane worker of a connection the rollout reports to,
// until it ends (true: the connection settles it) or stops reporting there
// (false: taken over by another connection, or the connection is ending).
func (sp *suspension) follow(ctx context.Context, gone <-chan struct{}) bool {
	select {
	case <-sp.done:
		return true
	case <-gone:
	case <-ctx.Done():
	}
	return false
}

// settle hands the ended rollout's result to sess, if sess is where it
// reports; the rollout then leaves the server, all but its tail.
func (sp *suspension) settle(sess *session) (conv *conversation, terminal []byte, ok bool) {
	// Under the server's lock too: a resume that finds the rollout settled
	// finds its tail kept.
	sp.srv.mu.Lock()
	defer sp.srv.mu.Unlock()
	sp.mu.Lock()
	if sp.sess != sess || sp.state != suspEnded {
		sp.mu.Unlock()
		return nil, nil, false
	}
	sp.state = suspSettled
	conv, terminal = sp.conv, sp.terminal
	var t *tail
	if terminal != nil {
		t = &tail{id: sp.id, creds: sp.creds, lane: sp.lane, frames: sp.log, terminal: terminal, bytes: sp.logBytes + len(terminal)}
	}
	sp.log, sp.logBytes, sp.lastDone = nil, 0, nil // the tail has them now
	sp.mu.Unlock()
	sp.srv.retireLocked(sp, t)
	return conv, terminal, true
}

// shutdown stops the rollout's timers: the server is going away, and the
// rollout with it.
func (sp *suspension) shutdown() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.expiry != nil {
		sp.expiry.Stop()
		sp.expiry = nil
	}
	sp.stopTimerLocked()
}
