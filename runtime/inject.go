package runtime

import (
	"net/http"

	"github.com/tether-run/tether/protocol"
)

// This file is response.inject (OpenAI's multi-agent beta's name for tool
// outputs sent to a waiting response): taken as response.append is (one
// dispatcher, one commit), answered otherwise. Taken, the response says
// so in its own sequence (response.inject.created), before the step the
// outputs resume; refused, the connection gets response.inject.failed with
// the input given back, and a response that ended on it is
// response_already_completed.

// injectCreatedLocked acknowledges an inject the rollout took, in its
// sequence. The caller holds the rollout's lock.
func (r *rollout) injectCreatedLocked() {
	r.emitLocked(&protocol.InjectCreatedEvent{EventHeader: protocol.EventHeader{Type: protocol.EventInjectCreated}, ResponseID: r.resp.ID})
}

// injectsTakenLocked acknowledges the injects among a wake's events that
// the rollout took. The caller holds the rollout's lock.
func (r *rollout) injectsTakenLocked(wakes []*wakeEvent) {
	for _, w := range wakes {
		if w.inject != nil && w.taken {
			r.injectCreatedLocked()
		}
	}
}

// injectFailed answers an inject that was not taken.
func (sess *session) injectFailed(ev *protocol.AppendEvent, perr *protocol.Error) {
	if b := sess.injectFailedFrame(ev, perr); b != nil {
		sess.send(b, nil)
	}
}

// injectFailedFrame is the response.inject.failed frame of perr for ev.
func (sess *session) injectFailedFrame(ev *protocol.AppendEvent, perr *protocol.Error) []byte {
	if perr.Code == protocol.CodeResponseNotFound && sess.ended(ev.ResponseID) {
		perr = protocol.Errorf(http.StatusBadRequest, protocol.CodeResponseAlreadyCompleted, "response_id",
			"Response '%s' has already completed; send the input in a response.create with previous_response_id '%s'.", ev.ResponseID, ev.ResponseID)
	}
	b, err := protocol.Marshal(protocol.InjectFailure(ev, perr))
	if err != nil {
		return nil
	}
	return b
}

// ended reports whether response id ended on this connection (or its
// tail is kept for these credentials).
func (sess *session) ended(id string) bool {
	if conv, _ := sess.scope.lookup(id); conv != nil {
		return true
	}
	return sess.srv.suspended.lookupTail(id, sess.creds) != nil
}
