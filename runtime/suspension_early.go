package runtime

import (
	"net/http"

	"github.com/tether-run/tether/protocol"
)

// This file is the multi-agent beta's early answers. Its waiting response
// announces no pause: a call is its client's from the call's
// output_item.done on, and a beta client answers it at once
// (response.inject), while the step may still stream its other calls, or
// its pause be written to the store. Such an append is neither refused nor
// taken then (lifecycle.Early): it waits in early, and the rollout takes
// it as it parks, in order, each whole or refused, as if it came then.

// clientAppend is an append (or inject) from sess, and what taking it
// came to: written under the suspension's lock, read after it (deliver,
// answerEarly). One that comes before the pause it answers waits in early.
type clientAppend struct {
	sess *session
	ev   *protocol.AppendEvent

	taken, answered bool
	parked          int
	refused         *protocol.Error
}

// takeEarlyLocked takes, as the rollout parks, the appends its client sent
// before: for answerEarly to acknowledge once the suspension's lock is let
// go. One that comes before the next pause (the last answered this one)
// waits on for that. The caller holds mu.
func (sp *suspension) takeEarlyLocked() []*clientAppend {
	early := sp.early
	sp.early = nil
	var took []*clientAppend
	for _, a := range early {
		if _, waits := sp.acceptAppendLocked(a); !waits { // one that waits on is in early again
			took = append(took, a)
		}
	}
	return took
}

// answerEarly tells each early append's client what came of it, an
// inject's taking in the response's sequence, and drives the rollout on
// from the pause they answered. The caller holds the rollout's lock, not
// the suspension's (the events go through put).
func (sp *suspension) answerEarly(took []*clientAppend) {
	for _, a := range took {
		switch {
		case a.refused != nil:
			a.sess.answerRefused(a.ev, a.refused)
		case a.taken && a.ev.Inject:
			sp.ro.injectCreatedLocked()
		}
		if a.answered {
			sp.ro.resumeAnsweredLocked(a.parked)
		}
	}
}

// maxEarly bounds the appends that wait for a pause: a step's client
// calls answered one by one, with room to spare.
const maxEarly = 256

// refuseEarlyLocked answers the early appends of a rollout that ended
// before the pause they answer. One released to its checkpoint (taken
// over, handed over) tells nothing: its client, told to resume elsewhere,
// sends again what was not acknowledged. The caller holds mu.
func (sp *suspension) refuseEarlyLocked() {
	if !sp.st.Phase().Released() {
		for _, a := range sp.early {
			a.sess.answerRefused(a.ev, errEndedEarly(sp.id))
		}
	}
	sp.early = nil
}

// errTooEarly: an append past maxEarly before the pause.
func errTooEarly(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not waiting for tool outputs yet, and %d inputs already wait for it: send the rest once they are acknowledged.", id, maxEarly)
}

// errEndedEarly: an append, sent before the pause it answers, of a
// response that ended first.
func errEndedEarly(id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeResponseAlreadyCompleted, "response_id",
		"Response '%s' has already completed; send the input in a response.create with previous_response_id '%s'.", id, id)
}

// answerRefused tells the client of an append, or an inject, that it was
// refused.
func (sess *session) answerRefused(ev *protocol.AppendEvent, perr *protocol.Error) {
	if ev.Inject {
		sess.injectFailed(ev, perr)
		return
	}
	sess.sendError(perr, ev.StreamID)
}
