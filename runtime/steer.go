package runtime

import (
	"net/http"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// response.steer puts user input into a response running on the
// connection, in both designs: the input waits in the rollout's inbox
// until the current step ends. What then happens depends on the design and
// on how the step ends:
//
//   - a cached-state turn whose step ends with a final answer or with
//     hosted calls' results ends incomplete ("steered"), and a successor
//     response, continuing it on the same lane, takes the input as its own
//     (OpenAI's shape: session.succeed); one steered after that step's end
//     completes, and its successor follows all the same;
//   - a suspended rollout, one response by design, takes the input in:
//     after a final answer it takes another step, the steering message now
//     in its context; after hosted calls, before the next step;
//   - with calls its client answers: a suspended rollout pauses
//     (response.done) and the input joins the context after the outputs
//     that resume it; a cached-state turn completes, and the input joins
//     the next response.create that continues it on this connection, after
//     the outputs it begins with. response.steer.pending, with stubs of the
//     outputs still required, comes just before the pause (so that a
//     durable rollout's checkpoint counts it) or after the completion.
//
// A parked suspended rollout answers accepted and pending at once, unless
// it is durable: its pause's checkpoint would not hold the input (a
// takeover or a wake would lose it), so it is refused, and response.append
// carries steering with the outputs. A steer
// the response cannot take is answered response.steer.failed: its input
// invalid, the response unknown here, finished, conversation-bound, or
// holding maxPendingSteers already. A response that ends before a queued
// steer joined its context fails it (response_not_active).

// maxPendingSteers bounds the submissions waiting in one response.
const maxPendingSteers = 16

func errSteerCompleted(id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeSteerAlreadyCompleted, "previous_response_id",
		"Response '%s' has already completed and takes no more steering; continue it with response.create.", id)
}

// steer handles response.steer, whose frame is size bytes: it is answered
// on the lane of the response it steers (accepted, then pending), or
// failed at once.
func (sess *session) steer(ev *protocol.SteerEvent, size int) {
	if ev.Err != nil {
		sess.steerFailed(ev, ev.Err, "")
		return
	}
	id := ev.PreviousResponseID
	ln, occ := sess.running(id)
	ro, sp := occ.ro, occ.sp
	if sp != nil {
		ro = sp.ro
	}
	var perr *protocol.Error
	switch {
	case ro != nil:
		perr = ro.steerIn(ev, size, sp, sess)
	case ln != nil: // asleep or waking: not running here now
		perr = errSteerNotActive(id)
	default:
		if conv, _ := sess.scope.lookup(id); conv != nil {
			perr = errSteerCompleted(id)
		} else {
			perr = protocol.Errorf(http.StatusNotFound, protocol.CodeSteerNotFound, "previous_response_id",
				"No response '%s' in progress on this connection.", id)
		}
	}
	if perr != nil {
		lane := ""
		if ln != nil {
			lane = ln.id
		}
		sess.steerFailed(ev, perr, lane)
	}
}

// steerFailed answers a steer that was not taken, on lane.
func (sess *session) steerFailed(ev *protocol.SteerEvent, perr *protocol.Error, lane string) {
	fe := protocol.SteerFailure(ev, "", perr)
	fe.StreamID = lane
	if b, err := protocol.Marshal(fe); err == nil {
		sess.send(b, nil)
	}
}

// steerIn takes a steer into r (size: its frame's bytes; sp: its
// suspension, for a suspended rollout; sess, the connection it came on), or
// says why not.
func (r *rollout) steerIn(ev *protocol.SteerEvent, size int, sp *suspension, sess *session) *protocol.Error {
	if c := r.req.Conversation; c != nil {
		return protocol.Invalid(protocol.CodeSteeringNotSupported, "previous_response_id",
			"Response '%s' belongs to conversation '%s': responses bound to a conversation do not take steering.", r.ID(), c.ID)
	}
	if r.req.MultiAgentEnabled() {
		return protocol.Invalid(protocol.CodeSteeringNotSupported, "previous_response_id",
			"Response '%s' is a multi-agent response: such responses do not take steering.", r.ID())
	}
	if r.req.CompactThreshold() > 0 {
		return protocol.Invalid(protocol.CodeSteeringNotSupported, "previous_response_id",
			"Response '%s' compacts its context (context_management): such responses do not take steering.", r.ID())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.steerClosed:
		return errSteerCompleted(r.resp.ID)
	case r.order.sink == nil: // taken over or woken, its loop not started yet
		return protocol.Errorf(http.StatusConflict, protocol.CodeSteerResponseNotActive, "previous_response_id",
			"Response '%s' is starting on this connection; steer it once it runs.", r.resp.ID)
	}
	var required []protocol.RequiredInput
	parked := false
	if sp != nil { // rollout.mu -> suspension.mu
		var perr *protocol.Error
		if parked, required, perr = sp.steerable(sess); perr != nil {
			return perr
		}
	}
	if r.inbox.steerCount() >= maxPendingSteers {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTooManyPendingSteers, "previous_response_id",
			"Response '%s' holds %d steering submissions not yet in its context, the most it takes.", r.resp.ID, maxPendingSteers)
	}
	// Held twice while it waits (decoded, and as sent for a
	// response.steer.failed), then in the context until the rollout ends.
	if perr := r.holdInput(2 * size); perr != nil {
		return perr
	}
	ids.NameInputs(ev.Input)
	if rec := r.srv.opts.Recorder; rec != nil {
		rec.Appended(r.srv.now(), r.resp.ID, ev.Input) // steering, as a response.append's user messages are recorded
	}
	id := ids.New("steer")
	r.inbox.addSteer(id, ev)
	r.emitLocked(&protocol.SteerAcceptedEvent{EventHeader: protocol.EventHeader{Type: protocol.EventSteerAccepted},
		Steer: protocol.SteerRef{ID: id, PreviousResponseID: r.resp.ID}})
	if parked {
		r.emitSteerPendingLocked(required)
	}
	return nil
}

// steerable says whether the rollout takes a steer from sess now and, when
// it is parked, the outputs its pause still waits for, which the steer's
// response.steer.pending lists. The caller holds the rollout's lock.
func (sp *suspension) steerable(sess *session) (parked bool, required []protocol.RequiredInput, _ *protocol.Error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if _, perr := sp.decideLocked(lifecycle.Steer, sess, sp.lane, ""); perr != nil {
		return false, nil, perr
	}
	if sp.st.Phase() == lifecycle.Parked {
		return true, sp.requiredLocked(), nil
	}
	return false, nil, nil
}

// errSteerNotActive: a steer of a rollout that is not running here now:
// hibernated, waking, or released to its checkpoint.
func errSteerNotActive(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeSteerResponseNotActive, "previous_response_id",
		"Response '%s' is not running on this connection now (it waits, hibernated, for its tool outputs); steer it once it runs.", id)
}

// errSteerDurable: a steer of a durable rollout at a pause, whose
// checkpoint is taken (or being taken) without the input: a takeover or a
// wake would lose it.
func errSteerDurable(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeSteeringNotSupported, "previous_response_id",
		"Response '%s' is a durable rollout at a pause: steer it with the outputs, as user messages in its response.append, which its checkpoint keeps.", id)
}

// requiredLocked stubs the outputs the parked step still waits for. The
// caller holds mu.
func (sp *suspension) requiredLocked() []protocol.RequiredInput {
	out := []protocol.RequiredInput{}
	for _, c := range sp.step {
		if _, has := sp.outputs[c.CallID]; !has {
			out = append(out, requiredInput(c.Type, c.CallID, c.Name))
		}
	}
	return out
}

// requiredInput is the stub of the output that answers a call of type typ
// ("": a function's).
func requiredInput(typ protocol.ItemType, callID, name string) protocol.RequiredInput {
	if typ == "" {
		typ = protocol.ItemFunctionCall
	}
	ri := protocol.RequiredInput{Type: protocol.OutputFor(typ), CallID: callID}
	if typ == protocol.ItemFunctionCall {
		ri.Name = name
	}
	return ri
}

// emitSteerPendingLocked sends response.steer.pending for each queued
// steer not yet told: the response waits for required. The caller holds
// r.mu.
func (r *rollout) emitSteerPendingLocked(required []protocol.RequiredInput) {
	if required == nil {
		required = []protocol.RequiredInput{}
	}
	for _, st := range r.inbox.pend() {
		r.emitLocked(r.steerPending(st, required))
	}
}

// closeSteers closes r to steering as it ends, and settles what waits in
// its inbox: when a cached-state turn completes on calls its client
// answers, the input goes with its state (conv.steered) to the create that
// continues it, and pending follows the terminal event (the pending it
// returns, for the caller to send after it); otherwise each queued steer
// fails, before the terminal event.
func (r *rollout) closeSteers(conv *conversation) (after []protocol.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steerClosed = true
	if r.inbox.steerCount() == 0 {
		return nil
	}
	if r.succeeds && conv != nil && len(r.required) == 0 {
		// Completed, or ended steered: a successor begins with the input.
		items, steers := r.inbox.drainAll()
		r.successor = &successor{input: items, steers: steers}
		return nil
	}
	if conv != nil && len(r.required) > 0 {
		items, steers := r.inbox.drainAll()
		conv.steered.Store(&items)
		for _, st := range steers {
			if !st.pended {
				after = append(after, r.steerPending(st, r.required))
			}
		}
		return after
	}
	_, steers := r.inbox.drainAll()
	for _, st := range steers {
		perr := protocol.Errorf(http.StatusConflict, protocol.CodeSteerResponseNotActive, "previous_response_id",
			"Response '%s' ended (%s) before this steering joined its context.", r.resp.ID, r.resp.Status)
		r.emitLocked(protocol.SteerFailure(st.ev, st.id, perr))
	}
	return nil
}

// successor is the steering a cached-state turn ended holding, for the
// response that goes on from it (session.succeed).
type successor struct {
	input  protocol.Items
	steers []steerSub
}

// steerPending is response.steer.pending for st: its input waits for the
// outputs required.
func (r *rollout) steerPending(st steerSub, required []protocol.RequiredInput) *protocol.SteerPendingEvent {
	return &protocol.SteerPendingEvent{EventHeader: protocol.EventHeader{Type: protocol.EventSteerPending},
		Reason: protocol.SteerReasonWaiting, RequiredInput: required,
		Steer: protocol.SteerRef{ID: st.id, PreviousResponseID: r.resp.ID}}
}
