package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is hibernation and waking. A durable rollout parked at a
// checkpointed pause past Suspension.HibernateAfter leaves memory: its loop
// ends as at a handover, the suspended set keeps its id (asleep, for the
// quotas), and the lane it reported on keeps its place (lane.asleep). An
// append or a cancel naming a rollout this server does not hold, or holds
// asleep, wakes it: a takeover job (durable.go) on the event's lane, with
// nothing replayed (its client saw the pause). The events naming it that
// arrive while it wakes queue on the session (waking), and are taken in
// order: those before it parks as it parks, under its lock, before its
// hibernation timer can act (takeAnswersLocked); the rest once it has
// (settleWake), after which the lane follows it as any other.

// wakeEvent is an event that wakes a rollout, or arrives while it wakes:
// an append's items, a cancel, or the end of its pause's timeout for the
// connection it hibernated on; and the append's refusal, written under the
// suspension's lock as the event is taken and read by settleWake after
// (the rollout's parking, or that lock, orders the two).
type wakeEvent struct {
	items    protocol.Items
	cancel   bool
	deadline bool
	refused  *protocol.Error
}

// waking is a wake in progress on a session: its lane, and the events
// queued for the rollout since.
type waking struct {
	lane   string
	events []*wakeEvent
}

// hibernate takes the rollout, parked at a durable pause since pause
// began, out of memory: its loop ends, and the event that names it next
// takes it over from its checkpoint, on this server or another. Not while
// a resuming client catches up, nor once some of the pause's outputs are
// appended (the checkpoint has none of them), nor while a wake's events
// are being taken: such a rollout stays in memory until its next pause.
func (sp *suspension) hibernate(pause int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.pauses == pause { // not a later pause's: that one has a timer of its own
		sp.releaseLocked(lifecycle.Hibernate)
	}
}

// asleep reports whether the rollout hibernated.
func (sp *suspension) asleep() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.st.Phase() == lifecycle.Hibernated
}

// awake reports whether the rollout is this server's, in memory: not
// released to its checkpoint, not ended.
func (sp *suspension) awake() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.st.Phase() <= lifecycle.Parked
}

// sleptOn reports whether the rollout hibernated while it reported to
// sess, when its pause's timeout ends, and the epoch of its checkpoint.
func (sp *suspension) sleptOn(sess *session) (timeoutAt time.Time, epoch uint64, ok bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.timeoutAt, sp.epoch, sp.st.Phase() == lifecycle.Hibernated && sp.sess == sess
}

// wake queues ev for rollout id, and starts waking it on lane unless a
// wake of it is in progress on this session. Without checkpoints there
// is no such rollout; while the server drains, the event is dropped (its
// client resumes on another server, is shown the pause again and sends
// it again).
func (sess *session) wake(id, lane string, ev *wakeEvent) *protocol.Error {
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
	if ln := sess.lanes[lane]; ln != nil && ln.asleep != "" && ln.asleep != id {
		sess.mu.Unlock()
		return errLaneSuspended(ln.asleep, false) // the lane holds another's place
	}
	if w := sess.waking[id]; w != nil {
		defer sess.mu.Unlock()
		if w.lane != lane {
			return errOtherLane(id, w.lane, lane)
		}
		w.events = append(w.events, ev)
		return nil
	}
	if sess.waking == nil {
		sess.waking = make(map[string]*waking)
	}
	sess.waking[id] = &waking{lane: lane, events: []*wakeEvent{ev}}
	sess.mu.Unlock()
	if !sess.admit(lane, &takeoverJob{id: id, wake: true, received: sess.srv.now()}, nil) {
		sess.endWake(nil, id)
	}
	return nil
}

// wakeEvents takes the events queued for rollout id's wake.
func (sess *session) wakeEvents(id string) []*wakeEvent {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	w := sess.waking[id]
	if w == nil {
		return nil
	}
	evs := w.events
	w.events = nil
	return evs
}

// endWake ends a wake of rollout id that took nothing over (the store had
// no checkpoint, or did not answer): what was queued for it is dropped,
// and ln (nil: none) no longer holds a place for it.
func (sess *session) endWake(ln *lane, id string) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	delete(sess.waking, id)
	if ln != nil && ln.asleep == id {
		ln.clearAsleep()
	}
}

// settleWake, once the rollout sp woken on ln has parked, tells the
// client what its first park refused of the events in wakes, takes the
// events queued since, in order, and makes ln follow sp: from then on the
// session finds sp on ln, as any rollout running there.
func (sess *session) settleWake(ln *lane, sp *suspension, wakes []*wakeEvent) {
	for {
		for _, w := range wakes {
			if w.refused != nil {
				sess.sendError(w.refused, ln.id)
			}
		}
		sess.mu.Lock()
		w := sess.waking[sp.id]
		if w == nil || len(w.events) == 0 {
			delete(sess.waking, sp.id)
			ln.ro, ln.sp = nil, sp
			ln.clearAsleep()
			sess.mu.Unlock()
			break
		}
		wakes, w.events = w.events, nil
		sess.mu.Unlock()
		sp.takeWakes(wakes)
	}
	sp.wakeDone()
}

// wakeDone ends the wake of the rollout: the events queued for it are all
// taken, or nothing more comes from the connection that woke it. From now
// on it may hibernate again.
func (sp *suspension) wakeDone() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.applyLocked(lifecycle.Awake, nil, "", "")
	sp.sleepLocked()
}

// takeWakes applies the events of a wake queued since the rollout parked,
// in order, each refusal written on its event.
func (sp *suspension) takeWakes(wakes []*wakeEvent) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, w := range wakes {
		w.refused = sp.takeWakeLocked(w)
	}
}

// takeWakeLocked applies one event of a wake to the rollout: a cancel
// ends it, an append's items answer its pause (unless the pause is over:
// answered by its checkpoint, or timed out while no server held it). It
// returns the append's refusal. The caller holds mu.
func (sp *suspension) takeWakeLocked(w *wakeEvent) *protocol.Error {
	switch {
	case w.deadline:
		return nil // parked, the rollout timed out as it did
	case w.cancel:
		if v, _ := sp.submitLocked(lifecycle.Cancel, wakeSender, sp.lane); v == lifecycle.Allow {
			sp.stopTimerLocked()
			sp.ro.abort(errCancelled)
		}
		return nil
	}
	if v, perr := sp.submitLocked(lifecycle.Append, wakeSender, sp.lane); v != lifecycle.Allow {
		return perr
	}
	_, perr := sp.takeLocked(w.items)
	return perr
}

// wakeSender is the sender of the events that woke a rollout: its client,
// on its lane, whether or not the connection they came on is still there.
var wakeSender = lifecycle.Sender{Here: true, Lane: true, Creds: true}

// sleepLocked arms the hibernation timer of the pause the rollout is
// parked at, when it may hibernate: Suspension.HibernateAfter from now.
// The caller holds mu.
func (sp *suspension) sleepLocked() {
	d := sp.srv.opts.Suspension.HibernateAfter
	if d <= 0 || !sp.st.MayHibernate() {
		return
	}
	if sp.sleep != nil {
		sp.sleep.Stop()
	}
	pause := sp.pauses
	sp.sleep = time.AfterFunc(d, func() { sp.hibernate(pause) })
}

// sleepLaneLocked keeps ln's place for rollout id, which hibernated at
// epoch while it reported there: until the event that wakes it, or the
// end of its pause's timeout (at), when the session wakes it for its
// client to be told it timed out. The caller holds sess.mu.
func (sess *session) sleepLaneLocked(ln *lane, id string, at time.Time, epoch uint64) {
	ln.clearAsleep()
	ln.ro, ln.sp, ln.asleep = nil, nil, id
	ln.asleepGen++
	gen := ln.asleepGen
	ln.asleepTimer = time.AfterFunc(max(at.Sub(sess.srv.now()), 0), func() { sess.wakeAtDeadline(ln, id, gen, epoch) })
}

// wakeAtDeadline wakes rollout id, asleep on ln since generation gen, at
// its pause's timeout: taken over, it times out at once and its client is
// told. Not when the lane let the rollout go meanwhile, nor when a wake of
// it is in progress; nor, once loaded, when its checkpoint is no longer
// the one it hibernated at (epoch: its client moved it elsewhere). The
// job takes no place in the connection's queue: the client sent nothing.
func (sess *session) wakeAtDeadline(ln *lane, id string, gen int, epoch uint64) {
	sess.mu.Lock()
	if sess.ctx.Err() != nil || ln.asleep != id || ln.asleepGen != gen || sess.waking[id] != nil {
		sess.mu.Unlock()
		return
	}
	if sess.waking == nil {
		sess.waking = make(map[string]*waking)
	}
	sess.waking[id] = &waking{lane: ln.id, events: []*wakeEvent{{deadline: true}}}
	ln.asleepTimer = nil
	sess.mu.Unlock()
	sess.scope.hold()
	sess.push(ln, &takeoverJob{id: id, wake: true, deadline: true, epoch: epoch, received: sess.srv.now()})
}

// wakeFailed is what a wake that took nothing over answers: the error,
// to the client that sent the event. A wake at a pause's timeout sent
// nothing: it tells nothing, and when the store did not answer it tries
// again in a while, the lane keeping its place.
func (sess *session) wakeFailed(ln *lane, j *takeoverJob, perr *protocol.Error) []byte {
	if !j.deadline {
		return errorFrame(perr, ln.id)
	}
	if perr != nil && perr.Code == protocol.CodeStoreUnavailable {
		sess.mu.Lock()
		delete(sess.waking, j.id)
		if ln.asleep == j.id {
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

// clearAsleep frees the lane's place for a hibernated rollout. The caller
// holds the session's lock.
func (ln *lane) clearAsleep() {
	ln.asleep = ""
	if ln.asleepTimer != nil {
		ln.asleepTimer.Stop()
		ln.asleepTimer = nil
	}
}
