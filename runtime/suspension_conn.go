package runtime

import (
	"context"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is a suspended rollout's connections: the one it reports to,
// the resume that moves it to another, the window it waits in while it
// has none, and the connection that settles its result.

// parkedOn reports whether the rollout reports to sess and waits for its
// client's outputs.
func (sp *suspension) parkedOn(sess *session) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.sess == sess && sp.st.Phase() == lifecycle.Parked
}

// queueRefusal says why a create from sess (fork: a fork) may not queue on
// the rollout's lane; nil when it may, behind the rollout.
func (sp *suspension) queueRefusal(sess *session, fork bool) *protocol.Error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if v, _ := sp.decideLocked(lifecycle.Create, sess, sp.lane, ""); v.Refused() {
		return errLaneSuspended(sp.id, fork)
	}
	return nil
}

// resumable reports whether a response.resume from sess, with creds, may
// take the rollout over.
func (sp *suspension) resumable(sess *session, creds string) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	v, _ := sp.decideLocked(lifecycle.Resume, sess, sp.lane, creds)
	return v == lifecycle.Allow
}

// attach makes sess the connection the rollout reports to, taking it over
// from another connection if need be (a client whose connection died
// half-open resumes before the server notices the drop). The frames the
// client missed are replayed by replay, from the sequence_number returned:
// after, or when nil the last frame the server sent. gone is closed when
// sess stops being the rollout's connection.
func (sp *suspension) attach(sess *session, after *int) (gone context.Context, from int, ok bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if v, _ := sp.applyLocked(lifecycle.Resume, sess, sp.lane, sess.creds); v != lifecycle.Allow {
		return nil, 0, false
	}
	if sp.expiry != nil {
		sp.expiry.Stop()
		sp.expiry = nil
	}
	if sp.sess != nil {
		sp.gone.close()
	}
	sp.sess, sp.gone, sp.shared = sess, newSignal(), true
	from = sp.sent
	if after != nil {
		from = *after
	}
	return sp.gone, from, true
}

// replay sends sess what its client has not seen, from the log: the pending
// response.done first when the rollout is parked on it (the client may have
// seen it and still needs it again, to know what to append), then every
// frame after from. A pause whose checkpoint is being written, and what
// follows it, are not replayed: the write sends them. It runs on the resuming lane's worker, with flow control
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
		if d := sp.lastDone; withDone && d != nil && d.seq <= from && sp.st.Phase() == lifecycle.Parked {
			batch = append(batch, d.b)
		}
		withDone = false
		for _, f := range sp.log {
			if sp.st.Holding() && f.seq >= sp.heldFrom {
				break // what waits for a write: a pause and what follows it, or a step for its answer's
			}
			if f.seq > from {
				batch = append(batch, f.b)
				from = f.seq
			}
		}
		if len(batch) == 0 {
			// Caught up; a pause held for its checkpoint goes out once
			// written (writeCheckpoint), as the client reads live.
			sp.applyLocked(lifecycle.CaughtUp, nil, "", "")
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
	sp.applyLocked(lifecycle.Drop, sess, "", "")
	sp.gone.close()
	sp.sess, sp.gone, sp.shared = nil, signal{}, true
	if !sp.st.Phase().Held() || sp.srv.ctx.Err() != nil {
		return // settled, expired or released already; or shutting down: it ends with the server
	}
	sp.expiry = afterFunc(sp.srv.opts.Suspension.ResumeWindow, sp, (*suspension).expire) // the suspended set holds sp meanwhile
}

// expire ends a rollout nobody resumed in time.
func (sp *suspension) expire() {
	sp.mu.Lock()
	if v, _ := sp.applyLocked(lifecycle.Expire, nil, "", ""); v != lifecycle.Allow {
		sp.mu.Unlock()
		return // resumed meanwhile, or gone already
	}
	sp.stopTimerLocked()
	sp.ro.abort(errResumeExpired)
	sp.mu.Unlock()
	sp.srv.suspended.remove(sp)
}

// returned reports whether the rollout's loop has returned (sp.done).
func (sp *suspension) returned() bool { return isClosed(sp.done.Done()) }

// settle hands the ended rollout's result to sess, if sess is where it
// reports; the rollout then leaves the server, all but its tail.
func (sp *suspension) settle(sess *session) (conv *conversation, terminal []byte, ok bool) {
	// Its tail is packed before the suspended set's lock, which every
	// settle and resume on the server takes, is taken: its loop has
	// returned (sp.done), so its frames are final.
	var t *tail
	sp.mu.Lock()
	frames, terminal := sp.log, sp.terminal
	sp.mu.Unlock()
	if terminal != nil {
		t = newTail(sp.id, sp.creds, sp.lane, frames, terminal)
	}
	// Under the suspended set's lock too: a resume that finds the rollout
	// settled finds its tail kept.
	sp.srv.suspended.mu.Lock()
	defer sp.srv.suspended.mu.Unlock()
	sp.mu.Lock()
	if v, _ := sp.applyLocked(lifecycle.Settle, sess, "", ""); v != lifecycle.Allow {
		sp.mu.Unlock()
		return nil, nil, false
	}
	conv = sp.conv
	sp.log, sp.logBytes, sp.lastDone = nil, 0, nil // the tail has them now
	sp.pack.Forget()
	sp.mu.Unlock()
	sp.srv.suspended.retireLocked(sp, t)
	return conv, terminal, true
}
