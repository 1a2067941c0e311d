package runtime

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is a takeover: a response.resume, or a wake, of a rollout this
// server does not hold, which loads its checkpoint and runs it here.

// takeoverJob is a response.resume of a rollout this server does not hold,
// or a wake (an append or a cancel naming it, session_wake.go): its checkpoint may
// be in the store.
type takeoverJob struct {
	id       string
	after    *int // the last sequence_number the resuming client received
	received time.Time
	// wake: the job is a wake (session_wake.go), for the appends and cancels
	// naming the rollout that the session queues meanwhile (its client
	// saw the pause: nothing is replayed). deadline: the lane's own, at
	// its pause's timeout, for the checkpoint of epoch.
	wake, deadline bool
	epoch          uint64
	retry          bool                  // a deadline wake the store did not answer: tried again later (wakeFailed)
	inject         *protocol.AppendEvent // a wake by a response.inject: its failure is an inject.failed
}

func (j *takeoverJob) bytes() int { return 0 }

func (j *takeoverJob) inFlight() bool { return true }

func (j *takeoverJob) run(sess *session, ln *lane) []byte { return sess.takeover(ln, j) }

// takeover runs a takeover job: it loads the rollout's checkpoint (under
// the connection's tenant and credentials: another's reads as unknown),
// raises its epoch, which fences out the server that held it, and rebuilds
// the loop parked at that pause, reporting here. The client gets the
// frames it missed, the pending response.done among them, and the rollout
// goes on as it would have where it was.
func (sess *session) takeover(ln *lane, j *takeoverJob) (last []byte) {
	cps := sess.srv.opts.Checkpoints
	ctx, cancel := context.WithTimeout(sess.ctx, checkpointTimeout)
	defer cancel()
	if !j.wake {
		defer sess.resumed(ln) // failed: what waited for it is answered as it comes
	}
	settled := false
	if j.wake {
		defer func() {
			if !settled && !j.retry { // what waited for it is answered by the job's error, or not at all
				sess.endWake(ln, j.id)
			}
		}()
	}
	jn, err := cps.Load(ctx, sess.tenant, j.id, sess.creds)
	if err != nil {
		return sess.wakeFailed(ln, j, sess.takeoverError(j, err))
	}
	if j.deadline && jn.Epoch != j.epoch {
		return nil // moved since it hibernated here: its timeout is its new holder's
	}
	lc, err := readJournal(jn.Head, jn.Entries)
	if err != nil || lc.pause.Tenant != sess.tenant || lc.pause.Creds != sess.creds || lc.pause.Response.ID != j.id {
		sess.srv.log.Warn("checkpoint unreadable", "response_id", j.id, "err", err)
		return sess.wakeFailed(ln, j, j.notFound())
	}
	ps, frames, answer := lc.pause, lc.frames, lc.answer
	switch {
	case ps.Lane != ln.id && j.wake:
		return sess.wakeFailed(ln, j, errOtherLane(j.id, ps.Lane, ln.id))
	case ps.Lane != ln.id:
		return errorFrame(errResumeLane(j.id, ps.Lane), ln.id)
	case ps.Tree:
		last, settled = sess.takeoverTree(ln, j, jn, lc)
		return last
	}
	ro, perr := sess.srv.restore(ctx, ps, ln.id) // before the takeover: a rollout this server cannot run stays where it is
	if perr != nil {
		return sess.wakeFailed(ln, j, perr)
	}
	// Its state is in memory again: charged before the takeover, so that a
	// server with no room for it leaves it in the store for one that has.
	if perr := ro.holdContext(); perr != nil {
		return sess.wakeFailed(ln, j, perr)
	}
	ro.moved = true
	ro.path.Transport = sess.transport
	ro.onConnection(&sess.scope.mcp)
	ro.start = j.received
	// Registered before the takeover too: a server at its bound of
	// suspended rollouts leaves the rollout to its owner, or another.
	sp, gone, perr := sess.srv.suspendAt(ro, sess, ln.id, lifecycle.Restored(answer == nil, j.wake, ps.Request.MultiAgentEnabled()), 0)
	if perr != nil {
		ro.held.letGo(sess.srv.mem)
		return sess.wakeFailed(ln, j, perr)
	}
	if err := cps.Take(ctx, sess.tenant, j.id, jn.Epoch, sess.srv.leases.lease); err != nil {
		ro.held.letGo(sess.srv.mem)
		sess.srv.unregister(sp)
		return sess.wakeFailed(ln, j, sess.takeoverError(j, err))
	}
	sess.srv.leases.held() // its state began leased
	pause := frames[len(frames)-1].seq
	if answer != nil && j.after != nil && *j.after > pause && !deterministic(ro.model) {
		// The client saw part of the step, which runs again from its
		// start and may come out otherwise: announced, and numbered after
		// what the client has, so that every frame of the run again
		// reaches it.
		ro.restartStep(*j.after, pause, len(ps.Response.Output))
	}
	var wakes []*wakeEvent
	if j.wake {
		// What waits for it so far is taken as the rollout parks; what
		// comes from now on, once it has (finishWake). Taken
		// before sp's lock, which the lock order puts after the session's.
		// The rollout does not hibernate again meanwhile (its state is
		// waking).
		wakes = sess.wakeEvents(ln)
	}
	parked := make(chan struct{})
	from := sp.restore(jn.Epoch, lc, j, wakes, parked)
	if !j.wake {
		sess.setRunning(ln, nil, sp) // first: an append that races the attach asks sp
	}
	sp.start()
	select { // it parks at once: its step's pause was announced already
	case <-parked:
	case <-sp.done.Done():
	case <-sess.ctx.Done():
		if j.wake {
			sp.detach(sess) // the lane never followed it: teardown does not know it
			sp.wakeDone()   // nothing more comes from this connection: it may hibernate again
		}
		return nil // the connection ended: the rollout, detached, waits for a resume
	}
	if j.wake {
		sess.finishWake(ln, sp, wakes, sp.acceptWakes)
		settled = true
	} else {
		sp.replay(sess.ctx, sess, from)
		sess.resumed(ln)
	}
	return sess.follow(ln, sp, gone, nil)
}

// deterministic reports whether a model says the same whenever it is asked
// the same (sampler.Scripted and sampler.Replay do): a step it runs again
// lines up with its first run.
func deterministic(m Sampler) bool {
	d, ok := m.(interface{ Deterministic() bool })
	return ok && d.Deterministic()
}

// notFound is what the job's event is told when there is no rollout to
// take over.
func (j *takeoverJob) notFound() *protocol.Error {
	if j.wake {
		return errNoSuspended(j.id)
	}
	return errResumeNotFound(j.id)
}

// takeoverError is what a takeover's event is told when the store had no
// checkpoint for it, another server took it first or runs it now, or the
// store did not answer.
func (sess *session) takeoverError(j *takeoverJob, err error) *protocol.Error {
	switch {
	case errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrFenced):
		return j.notFound()
	case errors.Is(err, ErrOwnedElsewhere):
		return errLeasedElsewhere(j.id)
	}
	sess.srv.log.Warn("checkpoint store", "response_id", j.id, "err", err)
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable, "",
		"The store of suspended rollouts did not answer; send the event again.")
}
