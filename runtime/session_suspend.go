package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is the session's side of suspended rollouts: the events that
// name a running response (append, cancel, resume) and the lane that follows
// a suspended rollout. What the rollout's state allows is the suspension's
// to say.

// SuspendBeta is the OpenAI-Beta value that makes suspended rollouts the
// default on a connection (the prototype's protocol version).
const SuspendBeta = "responses_websockets=2026-02-04"

// credentials hashes the Authorization header: resume is allowed to the same
// credentials only, and the secret itself is never kept.
func credentials(r *http.Request) string {
	sum := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	return hex.EncodeToString(sum[:])
}

// suspendByDefault reports whether the connection asked for the prototype
// protocol with its OpenAI-Beta header.
func suspendByDefault(r *http.Request) bool {
	for _, v := range r.Header.Values("OpenAI-Beta") {
		for _, part := range strings.Split(v, ",") {
			if strings.TrimSpace(part) == SuspendBeta {
				return true
			}
		}
	}
	return false
}

// follow occupies ln with a suspended rollout reporting to this connection
// until the rollout ends, moves to another connection (gone), or the
// connection ends: the job that started or took it ends there, and its last
// frame is followed's. Its lane's worker goes meanwhile (runJob), so that a
// parked rollout holds no goroutine of its connection's.
func (sess *session) follow(ln *lane, sp *suspension, gone context.Context, parent *conversation) (last []byte) {
	ln.following = &following{sp: sp, gone: gone, parent: parent}
	return nil
}

// following is a lane's suspended rollout, followed, and what the job that
// follows it needs once it ends: gone, closed when the rollout stops
// reporting to the connection, and the response it continued from.
type following struct {
	sp     *suspension
	gone   context.Context
	parent *conversation
}

// then calls next, in a goroutine of its own, once the rollout has ended,
// or stopped reporting to sess, or sess is ending.
func (f *following) then(sess *session, next func()) {
	whenFirst(next, f.sp.done, f.gone, sess.ctx)
}

// followed ends the job that followed f on ln, once then called it: a
// rollout that ended is settled (what it left is cached; its terminal
// frame is the job's last), and one that sleeps in its checkpoint keeps the
// lane, for the event that wakes it; one that moved or lives on past the
// connection (teardown detaches it) leaves it.
func (sess *session) followed(ln *lane, f *following) (last []byte) {
	sp, parent := f.sp, f.parent
	if !sp.returned() {
		if sess.ctx.Err() == nil {
			sess.setRunning(ln, nil, nil)
		}
		return nil
	}
	if at, epoch, ok := sp.sleptOn(sess); ok { // its checkpoint holds it: the lane stays its, for the event that wakes it
		sess.mu.Lock()
		sess.sleepLaneLocked(ln, sp.id, at, epoch)
		sess.mu.Unlock()
		return nil
	}
	sess.setRunning(ln, nil, nil)
	conv, terminal, ok := sp.settle(sess)
	if !ok {
		return nil
	}
	if conv != nil {
		sess.scope.publish(ln, conv, sess.srv.opts.Limits.CacheResponses, sess.srv.opts.Limits.CacheBytes)
	} else {
		sess.scope.evictAfterFailure(ln, parent)
	}
	return terminal
}

// resume handles response.resume: a suspended rollout whose connection
// dropped reports here from now on, in its lane's turn.
func (sess *session) resume(ev *protocol.ResumeEvent, received time.Time) {
	var j job
	var laneID string
	if sp := sess.srv.suspended.lookup(ev.ResponseID); sp != nil && sp.resumable(sess, sess.creds) {
		j, laneID = &resumeJob{sp: sp, after: ev.After}, sp.lane
	} else if t := sess.srv.suspended.lookupTail(ev.ResponseID, sess.creds); t != nil {
		j, laneID = &tailJob{tail: t, after: ev.After}, t.lane
	} else if sp == nil && sess.srv.opts.Checkpoints != nil {
		// Not here: another server's, perhaps, that checkpointed it. The
		// job checks its lane once it has read the checkpoint.
		j, laneID = &takeoverJob{id: ev.ResponseID, after: ev.After, received: received}, ev.StreamID
	} else {
		sess.sendError(errResumeNotFound(ev.ResponseID), ev.StreamID)
		return
	}
	if laneID != ev.StreamID {
		sess.sendError(errResumeLane(ev.ResponseID, laneID), ev.StreamID)
		return
	}
	// What the client sends it next waits until it reports here: a client
	// of the multi-agent beta, told nothing by a resume, injects at once.
	sess.admit(ev.StreamID, j, func(taking *lane) *protocol.Error {
		taking.resuming = ev.ResponseID
		return nil
	})
}

// waitResume takes e, an append or a cancel naming response id, when a
// resume on its lane is taking that rollout: it waits forResume. It
// reports whether it took e (an event it could not reserve room for is
// refused, and taken too).
func (sess *session) waitResume(laneID string, e laneEvent, id string) bool {
	sess.mu.Lock()
	ln := sess.lanes[laneID]
	taking := ln != nil && ln.resuming == id
	sess.mu.Unlock()
	if !taking {
		return false
	}
	if perr := sess.scope.reserve(e.size, &sess.srv.opts); perr != nil {
		sess.sendError(perr, laneID)
		return true
	}
	sess.mu.Lock()
	if ln.resuming == id {
		ln.hold(held{why: forResume, ev: e})
		sess.mu.Unlock()
		return true
	}
	sess.mu.Unlock() // the resume ended meanwhile
	sess.scope.release(e.size)
	return false
}

// resumed ends the resume on ln: the rollout reports here (or the resume
// failed), and what waited for it is handled, in order, as if it had just
// arrived; what arrives meanwhile waits behind it. It does nothing when no
// resume is taking a rollout on ln.
func (sess *session) resumed(ln *lane) {
	for {
		sess.mu.Lock()
		h, ok := ln.dequeue(forResume)
		if !ok {
			ln.resuming = ""
			sess.mu.Unlock()
			return
		}
		sess.mu.Unlock()
		sess.scope.release(h.ev.size)
		sess.handle(h.ev, true)
	}
}

// replayTail runs a resume of a rollout that has ended: its client gets the
// frames it missed, then the terminal frame, returned as the job's last.
func (sess *session) replayTail(t *tail, after *int) (last []byte) {
	frames, err := t.since(after)
	if err != nil {
		sess.srv.log.Error("resume", "response", t.id, "err", err)
		return errorFrame(errResumeGone(t.id), t.lane)
	}
	for _, b := range frames[:len(frames)-1] {
		if sess.send(b, nil) != nil || sess.flow(sess.ctx) != nil {
			return nil
		}
	}
	return frames[len(frames)-1]
}

// resumeOn runs a resume job: the rollout reports to this connection, which
// gets the frames its client missed, then follows it on ln.
func (sess *session) resumeOn(ln *lane, j *resumeJob) (last []byte) {
	defer sess.resumed(ln) // failed: what waited for it is answered as it comes
	sp := j.sp
	switch sp.reclaim(sess.ctx) {
	case reclaimMoved: // another server took it over: take it back from there
		return sess.takeover(ln, &takeoverJob{id: sp.id, after: j.after, received: sess.srv.now()})
	case reclaimEnded:
		return errorFrame(errResumeNotFound(sp.id), ln.id)
	}
	sess.setRunning(ln, nil, sp) // first: an append that races the attach asks sp
	gone, from, ok := sp.attach(sess, j.after)
	if !ok {
		sess.setRunning(ln, nil, nil)
		if t := sess.srv.suspended.lookupTail(sp.id, sess.creds); t != nil { // settled since the resume was admitted
			return sess.replayTail(t, j.after)
		}
		return errorFrame(errResumeGone(sp.id), ln.id)
	}
	sp.replay(sess.ctx, sess, from)
	sess.resumed(ln)
	return sess.follow(ln, sp, gone, nil)
}
