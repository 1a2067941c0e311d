package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a lane: one FIFO queue of a connection's responses, and what
// occupies it.

// lane is one stream_id's FIFO of creates, and what runs on it.
type lane struct {
	id      string
	jobs    []job // the FIFO, guarded by session.mu; the scope bounds it (MaxQueued)
	working bool  // its worker runs (while jobs are queued or one runs), guarded by session.mu

	occ       occupant // what holds it; guarded by session.mu
	placesGen int      // counts the places it kept for a hibernated rollout: a timer of an earlier one does nothing; guarded by session.mu

	// after are the frames that follow the last frame of the job running
	// (a cached-state turn's response.steer.pending after its
	// response.completed); only the lane's worker touches it.
	after [][]byte
}

// occupant is what holds a lane: nothing, a cached-state rollout running
// there (ro), a suspended rollout the lane follows (sp), which answers for
// itself whether it is still this connection's, or the place of a
// suspended rollout that hibernated while the lane followed it, or wakes
// there (asleep, its id): an append or a cancel naming it wakes it on this
// lane, as does timer, when it has one, at the end of its pause's timeout
// (session_wake.go). At most one is set.
type occupant struct {
	ro     *rollout
	sp     *suspension
	asleep string
	timer  *time.Timer
}

// id is the response that holds the lane; "" when none does.
func (o occupant) id() string {
	switch {
	case o.ro != nil:
		return o.ro.ID()
	case o.sp != nil:
		return o.sp.id
	}
	return o.asleep
}

// append handles response.append naming the response that holds ln, from
// sess: its answer, or wake when the rollout is in its checkpoint and the
// session must wake it on the event's lane.
func (o occupant) append(sess *session, ln *lane, ev *protocol.AppendEvent) (wake bool, _ *protocol.Error) {
	switch {
	case o.sp != nil:
		return o.sp.deliver(sess, ev.StreamID, ev.Input)
	case o.ro != nil:
		return false, errNotSuspendedRollout(ev.ResponseID, false)
	case ln.id != ev.StreamID:
		return false, errOtherLane(ev.ResponseID, ln.id, ev.StreamID)
	}
	return true, nil
}

// cancel handles response.cancel naming the response that holds ln, from
// sess: its answer, or wake, as append.
func (o occupant) cancel(sess *session, ln *lane, ev *protocol.CancelEvent) (wake bool, _ *protocol.Error) {
	switch {
	case o.sp != nil:
		return o.sp.cancel(sess, ev.StreamID)
	case ln.id != ev.StreamID:
		return false, errOtherLane(ev.ResponseID, ln.id, ev.StreamID)
	case o.ro != nil:
		o.ro.abort(errCancelled)
		return false, nil
	}
	return true, nil
}

// queueRefusal says why a create (fork: a fork) from sess may not queue on
// ln: the lane's suspended rollout is parked, or asleep, on this
// connection. The caller holds sess.mu.
func (ln *lane) queueRefusal(sess *session, fork bool) *protocol.Error {
	switch o := ln.occ; {
	case o.sp != nil:
		return o.sp.queueRefusal(sess, fork)
	case o.asleep != "":
		return errLaneSuspended(o.asleep, fork)
	}
	return nil
}

// occupy makes o what holds ln, stopping the timer of a place it kept.
// The caller holds the session's lock.
func (ln *lane) occupy(o occupant) {
	if ln.occ.timer != nil {
		ln.occ.timer.Stop()
	}
	ln.occ = o
}

// clearAsleep frees the lane's place for a hibernated rollout, if it
// keeps one. The caller holds the session's lock.
func (ln *lane) clearAsleep() {
	if ln.occ.asleep != "" {
		ln.occupy(occupant{})
	}
}
