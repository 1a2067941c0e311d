package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a lane: one ordered line of a connection's responses, what
// waits on it and why, and what occupies it.

// lane is one stream_id's responses, in arrival order: what runs there
// (its occupant) and what waits there (held). Everything but after is
// guarded by session.mu.
type lane struct {
	id string

	// held is what waits on the lane, in arrival order, each with why;
	// the connection's queue bounds it (connScope.reserve).
	held      []held
	working   bool   // the lane's worker runs: it takes what waits forTurn (session_lanes.go)
	resolving bool   // the lane's resolver runs: it takes what waits forResolve (session_events.go)
	waking    string // the rollout that wakes on the lane, whose events wait forWake (session_wake.go)
	resuming  string // the rollout a resume on the lane is taking, whose events wait forResume (session_suspend.go)

	occ       occupant // what holds it
	placesGen int      // counts the places it kept for a hibernated rollout: a timer of an earlier one does nothing

	// after are the frames that follow the last frame of the job running
	// (a cached-state turn's response.steer.pending after its
	// response.completed); following is the suspended rollout the job
	// follows, which it ends with (session.follow). Only the lane's worker
	// touches them.
	after     [][]byte
	following *following
}

// waitsFor is why an event waits on its lane, and so what takes it.
type waitsFor uint8

const (
	// forTurn: a job (a create, a fork, a resume, a wake) waits for the
	// lane's worker, which runs them one at a time, in arrival order.
	forTurn waitsFor = iota
	// forResolve: an event waits behind an append whose item references
	// are being resolved; the lane's resolver takes it after, in arrival
	// order, as if it had just arrived.
	forResolve
	// forWake: an append's items, a cancel, or the end of its pause's
	// timeout, for the rollout that wakes on the lane; taken as it parks.
	forWake
	// forResume: an append or a cancel naming the rollout a resume on the
	// lane is taking; handled once it reports here, the client's missed
	// frames replayed, as if it had just arrived.
	forResume
)

// held is one event waiting on its lane, and why.
type held struct {
	why  waitsFor
	job  job        // forTurn
	ev   laneEvent  // forResolve, forResume
	wake *wakeEvent // forWake
}

// hold puts h at the end of what waits on ln, and reports whether the
// goroutine that takes what waits for h.why must start, none running: the
// lane's worker, or its resolver (a wake's events are taken by the wake).
func (ln *lane) hold(h held) (start bool) {
	ln.held = append(ln.held, h)
	switch h.why {
	case forTurn:
		start, ln.working = !ln.working, true
	case forResolve:
		start, ln.resolving = !ln.resolving, true
	}
	return start
}

// holds reports whether anything waits on ln for why.
func (ln *lane) holds(why waitsFor) bool {
	for _, h := range ln.held {
		if h.why == why {
			return true
		}
	}
	return false
}

// dequeue takes the first of what waits on ln for why.
func (ln *lane) dequeue(why waitsFor) (held, bool) {
	for i, h := range ln.held {
		if h.why == why {
			n := len(ln.held) - 1
			copy(ln.held[i:], ln.held[i+1:])
			ln.held[n] = held{}
			ln.held = ln.held[:n]
			if n == 0 {
				ln.held = nil // let a long queue's array go
			}
			return h, true
		}
	}
	return held{}, false
}

// dequeueAll takes everything that waits on ln for why, in order.
func (ln *lane) dequeueAll(why waitsFor) []held {
	var out []held
	kept := ln.held[:0]
	for _, h := range ln.held {
		if h.why == why {
			out = append(out, h)
		} else {
			kept = append(kept, h)
		}
	}
	clear(ln.held[len(kept):])
	ln.held = kept
	if len(ln.held) == 0 {
		ln.held = nil
	}
	return out
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
// sess, its frame size bytes: its answer, or wake when the rollout is in
// its checkpoint and the session must wake it on the event's lane.
func (o occupant) append(sess *session, ln *lane, ev *protocol.AppendEvent, size int) (wake bool, _ *protocol.Error) {
	switch {
	case o.sp != nil:
		return o.sp.deliver(sess, ev, size)
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
