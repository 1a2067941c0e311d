package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is hibernation and waking. A durable rollout parked at a
// checkpointed pause past Suspension.HibernateAfter leaves memory: its loop
// ends as at a handover, the suspended set keeps its id (asleep, for the
// quotas), and the lane it reported on keeps its place (its occupant, asleep). An
// append or a cancel naming a rollout this server does not hold, or holds
// asleep, wakes it: a takeover job (session_takeover.go) on the event's lane, with
// nothing replayed (its client saw the pause). The events naming it that
// arrive while it wakes wait on the lane (forWake), and are taken in
// order: those before it parks as it parks, under its lock, before its
// hibernation timer can act (acceptAnswersLocked); the rest once it has
// (finishWake), after which the lane follows it as any other.

// wakeEvent is an event that wakes a rollout, or arrives while it wakes:
// an append's items, a cancel, or the end of its pause's timeout for the
// connection it hibernated on; and the append's refusal, written under the
// suspension's lock as the event is taken and read by finishWake after
// (the rollout's parking, or that lock, orders the two).
type wakeEvent struct {
	items    protocol.Items
	size     int // the append's frame's bytes
	cancel   bool
	deadline bool
	inject   *protocol.AppendEvent // a response.inject's items: answered inject.created or inject.failed
	refused  *protocol.Error
	taken    bool // its items are the rollout's
}

// wake queues ev for rollout id, and starts waking it on the lane named
// laneID unless a wake of it is in progress on this session. Without
// checkpoints there is no such rollout; while the server drains, the event
// is dropped (its client resumes on another server, is shown the pause
// again and sends it again).
func (sess *session) wake(id, laneID string, ev *wakeEvent) *protocol.Error {
	switch {
	case sess.srv.opts.Checkpoints == nil && ev.cancel:
		return errNoResponse(id)
	case sess.srv.opts.Checkpoints == nil:
		return errNoSuspended(id)
	case sess.srv.closing():
		return nil
	}
	if !ev.cancel {
		if perr := protocol.ValidateItems(ev.items, "input"); perr != nil {
			return perr // refused before the store is asked
		}
	}
	sess.mu.Lock()
	if ln := sess.lanes[laneID]; ln != nil && ln.occ.asleep != id {
		// A wake is a job on the lane, refused as a create is: the lane
		// follows another rollout parked here, or holds another's place.
		if perr := ln.queueRefusal(sess, false); perr != nil {
			sess.mu.Unlock()
			return perr
		}
	}
	if ln := sess.wakingLaneLocked(id); ln != nil {
		defer sess.mu.Unlock()
		if ln.id != laneID {
			return errOtherLane(id, ln.id, laneID)
		}
		ln.hold(held{why: forWake, wake: ev})
		return nil
	}
	ln, perr := sess.laneLocked(laneID)
	switch {
	case perr != nil:
	case ln.waking != "":
		perr = errLaneSuspended(ln.waking, false) // another wakes there
	default:
		ln.waking = id
		ln.hold(held{why: forWake, wake: ev})
	}
	sess.mu.Unlock()
	if perr != nil {
		return perr
	}
	if !sess.admit(laneID, &takeoverJob{id: id, wake: true, received: sess.srv.now(), inject: ev.inject}, nil) {
		sess.mu.Lock()
		ln.endWakeLocked()
		sess.mu.Unlock()
	}
	return nil
}

// wakingLaneLocked is the lane rollout id wakes on; nil when it wakes on
// none of this session's. The caller holds sess.mu.
func (sess *session) wakingLaneLocked(id string) *lane {
	for _, ln := range sess.lanes {
		if ln.waking == id {
			return ln
		}
	}
	return nil
}

// endWakeLocked ends the wake on ln: what waits for it is dropped. The
// caller holds the session's lock.
func (ln *lane) endWakeLocked() {
	ln.waking = ""
	ln.dequeueAll(forWake)
}

// wakeEvents takes the events waiting on ln for the rollout waking there.
func (sess *session) wakeEvents(ln *lane) []*wakeEvent {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return ln.wakeEventsLocked()
}

// wakeEventsLocked is wakeEvents, the caller holding the session's lock.
func (ln *lane) wakeEventsLocked() []*wakeEvent {
	var evs []*wakeEvent
	for _, h := range ln.dequeueAll(forWake) {
		evs = append(evs, h.wake)
	}
	return evs
}

// endWake ends a wake of rollout id on ln that took nothing over (the
// store had no checkpoint, or did not answer): what waits for it is
// dropped, and ln no longer holds a place for it.
func (sess *session) endWake(ln *lane, id string) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if ln.waking == id {
		ln.endWakeLocked()
	}
	if ln.occ.asleep == id {
		ln.clearAsleep()
	}
}

// finishWake, once the rollout sp woken on ln has taken the events in
// wakes (its first park, or a tree's deliveries), tells the client what
// it refused of them, has take take the events that waited for it since,
// in order, and makes ln follow sp: from then on the session finds sp on
// ln, as any rollout running there.
func (sess *session) finishWake(ln *lane, sp *suspension, wakes []*wakeEvent, take func([]*wakeEvent)) {
	for {
		for _, w := range wakes {
			switch {
			case w.refused != nil && w.inject != nil:
				sess.injectFailed(w.inject, w.refused)
			case w.refused != nil:
				sess.sendError(w.refused, ln.id)
			}
		}
		sess.mu.Lock()
		if wakes = ln.wakeEventsLocked(); len(wakes) == 0 {
			ln.waking = ""
			ln.occupy(occupant{sp: sp})
			sess.mu.Unlock()
			break
		}
		sess.mu.Unlock()
		take(wakes)
	}
	sp.wakeDone()
}

// sleepLaneLocked keeps ln's place for rollout id, which hibernated at
// epoch while it reported there: until the event that wakes it, or the
// end of its pause's timeout (at), when the session wakes it for its
// client to be told it timed out. The caller holds sess.mu.
func (sess *session) sleepLaneLocked(ln *lane, id string, at time.Time, epoch uint64) {
	ln.placesGen++
	gen := ln.placesGen
	// The session held weakly: a timer stopped by the wake that comes
	// first must not keep a closed connection's session alive (afterFunc);
	// the server holds it while it is open.
	ln.occupy(occupant{asleep: id, timer: afterFunc(max(at.Sub(sess.srv.now()), 0), sess, func(sess *session) { sess.wakeAtDeadline(ln, id, gen, epoch) })})
}

// wakeAtDeadline wakes rollout id, asleep on ln since generation gen, at
// its pause's timeout: taken over, it times out at once and its client is
// told. Not when the lane let the rollout go meanwhile, nor when a wake of
// it is in progress; nor, once loaded, when its checkpoint is no longer
// the one it hibernated at (epoch: its client moved it elsewhere). The
// job takes no place in the connection's queue: the client sent nothing.
func (sess *session) wakeAtDeadline(ln *lane, id string, gen int, epoch uint64) {
	sess.mu.Lock()
	if sess.ctx.Err() != nil || ln.occ.asleep != id || ln.placesGen != gen || sess.wakingLaneLocked(id) != nil {
		sess.mu.Unlock()
		return
	}
	ln.waking = id
	ln.hold(held{why: forWake, wake: &wakeEvent{deadline: true}})
	ln.occ.timer = nil // fired
	sess.mu.Unlock()
	sess.scope.hold()
	sess.push(ln, &takeoverJob{id: id, wake: true, deadline: true, epoch: epoch, received: sess.srv.now()})
}

// wakeFailed is what a wake that took nothing over answers: the error,
// to the client that sent the event. A wake at a pause's timeout sent
// nothing: it tells nothing, and when the store did not answer (or the
// memory budget had no room for the rollout) it tries again in a while,
// the lane keeping its place.
func (sess *session) wakeFailed(ln *lane, j *takeoverJob, perr *protocol.Error) []byte {
	switch {
	case j.inject != nil:
		return sess.injectFailedFrame(j.inject, perr)
	case !j.deadline:
		return errorFrame(perr, ln.id)
	}
	if perr != nil && (perr.Code == protocol.CodeStoreUnavailable || perr.Code == protocol.CodeServerMemory) {
		sess.mu.Lock()
		if ln.waking == j.id {
			ln.endWakeLocked()
		}
		if ln.occ.asleep == j.id {
			sess.sleepLaneLocked(ln, j.id, sess.srv.now().Add(deadlineRetry), j.epoch)
			j.retry = true
		}
		sess.mu.Unlock()
	}
	return nil
}

// deadlineRetry is how long a wake at a pause's timeout waits for a store
// that did not answer before it tries again.
const deadlineRetry = 5 * time.Second
