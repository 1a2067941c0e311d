package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is a suspended rollout's side of hibernation and waking (the
// session's is session_wake.go).

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

// wakeDone ends the wake of the rollout: the events queued for it are all
// taken, or nothing more comes from the connection that woke it. From now
// on it may hibernate again.
func (sp *suspension) wakeDone() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.applyLocked(lifecycle.Awake, nil, "", "")
	sp.sleepLocked()
}

// acceptWakes applies the events of a wake queued since the rollout parked,
// in order, each refusal written on its event; the injects taken are
// acknowledged before the step they resume goes on (it takes the
// rollout's lock, held here throughout, as the lock order says).
func (sp *suspension) acceptWakes(wakes []*wakeEvent) {
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.mu.Lock()
	for _, w := range wakes {
		w.refused = sp.acceptWakeLocked(w)
	}
	sp.mu.Unlock()
	sp.ro.injectsTakenLocked(wakes)
}

// acceptWakeLocked applies one event of a wake to the rollout: a cancel
// ends it, an append's items answer its pause (unless the pause is over:
// answered by its checkpoint, or timed out while no server held it). It
// returns the append's refusal. The caller holds mu.
func (sp *suspension) acceptWakeLocked(w *wakeEvent) *protocol.Error {
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
	if perr := sp.ro.holdInput(w.size); perr != nil {
		return perr
	}
	_, perr := sp.acceptLocked(w.items)
	if w.taken = perr == nil; !w.taken {
		sp.ro.held.giveBack(sp.srv.mem, int64(w.size))
	}
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
	sp.sleep = afterFunc(d, sp, func(sp *suspension) { sp.hibernate(pause) }) // the suspended set holds sp meanwhile
}
