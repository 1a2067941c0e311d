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

	// The response running on the lane, guarded by session.mu: a
	// cached-state rollout, or a suspended rollout the lane follows (which
	// answers for itself whether it is still this connection's).
	ro *rollout
	sp *suspension
	// asleep is the id of the suspended rollout this lane followed until
	// it hibernated (session_wake.go), guarded by session.mu: the lane stays its,
	// and an append or cancel naming it wakes it here, as does
	// asleepTimer at the end of its pause's timeout.
	asleep      string
	asleepTimer *time.Timer
	asleepGen   int // counts the places kept: a timer of an earlier one does nothing

	// after are the frames that follow the last frame of the job running
	// (a cached-state turn's response.steer.pending after its
	// response.completed); only the lane's worker touches it.
	after [][]byte
}

// queueRefusal says why a create (fork: a fork) from sess may not queue on
// ln: the lane's suspended rollout is parked, or asleep, on this
// connection. The caller holds sess.mu.
func (ln *lane) queueRefusal(sess *session, fork bool) *protocol.Error {
	switch {
	case ln.sp != nil:
		return ln.sp.queueRefusal(sess, fork)
	case ln.asleep == "":
		return nil
	case fork:
		return errLaneSuspended(ln.asleep, true)
	}
	return errLaneSuspended(ln.asleep, false)
}

// clearAsleep frees the lane's place for a hibernated rollout. The caller
// holds the session's lock.
func (ln *lane) clearAsleep() {
	ln.asleep = ""
	if ln.asleepTimer != nil {
		ln.asleepTimer.Stop()
		ln.asleepTimer = nil
	}
}
