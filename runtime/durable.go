package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file makes suspended rollouts durable when the server has
// Checkpoints (Options.Checkpoints): at each pause the rollout's state is
// written before the pause's response.done goes out, so that nothing its
// client saw is missing from it, and a response.resume that finds no
// rollout here takes the rollout over from its last checkpoint, on this
// server, under its own id, its sequence numbers going on.
//
// What is durable: a rollout parked on its client's calls, from the moment
// its client can see the pause. What is not (yet): the outputs an append
// brought, until the next pause is checkpointed (a server that dies
// mid-step leaves the pause before it, whose outputs the client appends
// again); a pause whose step still runs a hosted call (not checkpointed:
// the one before it stays); a rollout that ended (its tail stays with the
// server that ran it).

// checkpointTimeout bounds one checkpoint operation: a store that does not
// answer in time leaves the pause in memory only.
const checkpointTimeout = 2 * time.Second

// checkpointVersion is the version of checkpointData's written form.
const checkpointVersion = 1

// checkpointData is what a Checkpoint's Data holds: the state at the pause,
// and the frames since the client last appended, the pause's response.done
// last, for a resuming client that missed some.
type checkpointData struct {
	Version int               `json:"version"`
	Pause   json.RawMessage   `json:"pause"` // a pauseState, as decodePause reads it
	Frames  []checkpointFrame `json:"frames"`
	// Answer is what the client appended at the pause, once it answered
	// every pending call: the loop went on from there.
	Answer json.RawMessage `json:"answer,omitempty"`
	// Parked is when the pause was written (Unix milliseconds): its
	// Suspension.Timeout runs from then on whichever server holds it.
	Parked int64 `json:"parked_ms,omitempty"`
}

type checkpointFrame struct {
	Seq   int             `json:"seq"`
	Event json.RawMessage `json:"event"`
}

// newCheckpoint is the checkpoint of the pause ps, whose frames are those
// since the last append: its pause encoded once, for the checkpoint of its
// answer too.
func newCheckpoint(ps *pauseState, frames []frame, parked time.Time) (*checkpointData, error) {
	pause, err := protocol.Marshal(ps)
	if err != nil {
		return nil, err
	}
	d := &checkpointData{Version: checkpointVersion, Pause: pause, Frames: make([]checkpointFrame, len(frames)), Parked: parked.UnixMilli()}
	for i, f := range frames {
		d.Frames[i] = checkpointFrame{Seq: f.seq, Event: f.b}
	}
	return d, nil
}

// encode writes the checkpoint out, with the pause's answer when there is
// one.
func (d checkpointData) encode(answer protocol.Items) ([]byte, error) {
	if answer != nil {
		var err error
		if d.Answer, err = protocol.Marshal(answer); err != nil {
			return nil, err
		}
	}
	return json.Marshal(d)
}

// loadedCheckpoint is a checkpoint read back: the pause, its frames, the
// last of them its response.done, and its answer if any.
type loadedCheckpoint struct {
	data   *checkpointData // as written, without the answer
	pause  *pauseState
	frames []frame
	answer protocol.Items
}

// decodeCheckpoint reads back what checkpointData.encode wrote.
func decodeCheckpoint(b []byte) (*loadedCheckpoint, error) {
	var d checkpointData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	if d.Version != checkpointVersion || len(d.Frames) == 0 {
		return nil, errPauseUnreadable(d.Version)
	}
	ps, err := decodePause(d.Pause)
	if err != nil {
		return nil, err
	}
	lc := &loadedCheckpoint{pause: ps, frames: make([]frame, len(d.Frames))}
	for i, f := range d.Frames {
		if i > 0 && f.Seq <= lc.frames[i-1].seq || f.Seq >= ps.Seq {
			return nil, errPauseUnreadable(d.Version)
		}
		lc.frames[i] = frame{seq: f.Seq, b: f.Event}
	}
	if len(d.Answer) > 0 {
		var perr *protocol.Error
		if lc.answer, perr = protocol.DecodeItems(d.Answer, "answer"); perr != nil {
			return nil, perr
		}
		if perr = protocol.ValidateItems(lc.answer, "answer"); perr != nil { // as an append's are
			return nil, perr
		}
	}
	d.Answer = nil
	lc.data = &d
	return lc, nil
}

// checkpointTTL is how long a checkpoint is kept: a pause's whole timeout,
// then a resume window for a client that dropped at its end.
func (s *Server) checkpointTTL() time.Duration {
	return s.opts.Suspension.Timeout + s.opts.Suspension.ResumeWindow
}

// checkpointLocked starts writing the rollout's checkpoint at the pause
// whose response.done is done: until it is written the frame waits in the
// log (holding), so that a client never sees a pause that is not durable
// yet, and the rollout is not parked (it takes no append) until it is. The
// caller holds the rollout's lock and the suspension's, putting the frame;
// it reports whether the write started.
func (sp *suspension) checkpointLocked(done frame) bool {
	cps := sp.srv.opts.Checkpoints
	if v, _ := lifecycle.Decide(sp.st, lifecycle.Hold, lifecycle.Sender{}); cps == nil || v != lifecycle.Allow {
		return false
	}
	ps, perr := sp.ro.pauseStateLocked()
	if perr != nil { // a hosted call of the step still runs: the pause before stays the checkpoint
		sp.srv.log.Debug("pause not checkpointed: a hosted call of its step still runs", "response_id", sp.id)
		return false
	}
	ps.Creds, ps.Answered, ps.ClientSteps = sp.creds, maps.Clone(sp.answered), sp.steps
	frames := append(slices.Clip(sp.log), done)
	sp.applyLocked(lifecycle.Hold, nil, "", "")
	sp.srv.wg.Add(1)
	go sp.writeCheckpoint(cps, ps, frames, sp.epoch)
	return true
}

// checkpointAnswerLocked starts writing the checkpoint of the pause's
// answer, when the pause is durable: the pause, and every item the client
// appended at it. The loop goes on (answer is closed) once it is written,
// so that a server that dies mid-step leaves the step's start in the store,
// for the next to run again; a store that fails lets the loop go on all
// the same. It reports whether it did; the caller holds the suspension's
// lock and has the last pending call's output.
func (sp *suspension) checkpointAnswerLocked() bool {
	cps := sp.srv.opts.Checkpoints
	if cps == nil || !sp.st.Durable() || sp.st.Phase().Released() || sp.lastCheckpoint == nil {
		return false
	}
	d, answer, epoch, tenant := *sp.lastCheckpoint, slices.Clone(sp.appended), sp.epoch, sp.ro.tenant
	sp.srv.wg.Add(1)
	go func() {
		defer sp.srv.wg.Done()
		data, err := d.encode(answer)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
			err = cps.Save(ctx, &Checkpoint{Tenant: tenant, ID: sp.id, Creds: sp.creds, Epoch: epoch, Data: data}, sp.srv.checkpointTTL())
			cancel()
		}
		sp.mu.Lock()
		defer sp.mu.Unlock()
		switch {
		case errors.Is(err, ErrFenced):
			sp.fenceLocked() // the loop, aborted, stops parking
			return
		case err != nil:
			sp.srv.log.Warn("answer not checkpointed", "response_id", sp.id, "err", err)
		}
		sp.readyLocked()
	}()
	return true
}

// writeCheckpoint writes the checkpoint, then lets the frames held for it go
// to the client. A store that fails leaves the pause in memory only (the
// rollout goes on, and its previous checkpoint, if any, stays); a store that
// says another server owns the rollout now stops it here, without a frame
// more for its client.
func (sp *suspension) writeCheckpoint(cps Checkpoints, ps *pauseState, frames []frame, epoch uint64) {
	defer sp.srv.wg.Done()
	d, err := newCheckpoint(ps, frames, sp.srv.now())
	var data []byte
	if err == nil {
		data, err = d.encode(nil)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		err = cps.Save(ctx, &Checkpoint{Tenant: ps.Tenant, ID: sp.id, Creds: sp.creds, Epoch: epoch, Data: data}, sp.srv.checkpointTTL())
		cancel()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch {
	case errors.Is(err, ErrFenced):
		sp.applyLocked(lifecycle.Unwritten, nil, "", "")
		sp.fenceLocked()
		return
	case err != nil:
		sp.srv.log.Warn("pause not checkpointed", "response_id", sp.id, "err", err)
		sp.applyLocked(lifecycle.Unwritten, nil, "", "")
	default:
		sp.applyLocked(lifecycle.Written, nil, "", "")
		sp.lastCheckpoint = d
		// The server is draining: handed over here, its pause not sent,
		// for its client to resume (and be shown the pause) on another
		// server, rather than answered here.
		if sp.srv.closing() && sp.releaseLocked(lifecycle.HandOver) {
			return
		}
	}
	sp.parkLocked() // the client may see it now (unless the rollout ended meanwhile: the state machine says)
	if sp.sess == nil || sp.st.Replaying() {
		return // a resuming connection replays them
	}
	for _, f := range sp.log {
		if f.seq > sp.sent && sp.sess.send(f.b, nil) == nil {
			sp.sent = f.seq
		}
	}
}

// releaseLocked submits ev (lifecycle.Fence, HandOver or Hibernate), which
// releases the rollout to its checkpoint when its state allows: it sends
// nothing more, its timers stop, and its loop, aborted, returns without
// dropping the checkpoint. It reports whether it did.
func (sp *suspension) releaseLocked(ev lifecycle.Event) bool {
	if v, _ := sp.applyLocked(ev, nil, "", ""); v != lifecycle.Allow {
		return false
	}
	sp.stopTimerLocked()
	if sp.expiry != nil {
		sp.expiry.Stop()
		sp.expiry = nil
	}
	sp.ro.abort(releaseCause(sp.st.Phase()))
	return true
}

// releaseCause is what a rollout released to its checkpoint ends with.
func releaseCause(p lifecycle.Phase) error {
	switch p {
	case lifecycle.Fenced:
		return errFenced
	case lifecycle.HandedOver:
		return errHandedOver
	}
	return errHibernated
}

// fenceLocked stops a rollout another server has taken over: it sends
// nothing more, and ends.
func (sp *suspension) fenceLocked() {
	if sp.releaseLocked(lifecycle.Fence) {
		sp.srv.log.Info("suspended rollout taken over by another server", "response_id", sp.id)
	}
}

// dropCheckpointLocked ends the checkpoint of a rollout that has ended,
// or whose first is being written: Drop fences out a write still in
// flight, whichever lands first.
func (sp *suspension) dropCheckpointLocked() {
	cps := sp.srv.opts.Checkpoints
	if cps == nil || !sp.st.Checkpointed() && !sp.st.Holding() || sp.st.Phase().Released() {
		return
	}
	tenant, epoch, ttl := sp.ro.tenant, sp.epoch, sp.srv.checkpointTTL()
	sp.srv.wg.Add(1)
	go func() {
		defer sp.srv.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		defer cancel()
		if err := cps.Drop(ctx, tenant, sp.id, epoch, ttl); err != nil {
			sp.srv.log.Warn("checkpoint of an ended rollout not dropped", "response_id", sp.id, "err", err)
		}
	}()
}

// takeoverJob is a response.resume of a rollout this server does not hold,
// or a wake (an append or a cancel naming it, wake.go): its checkpoint may
// be in the store.
type takeoverJob struct {
	id       string
	after    *int // the last sequence_number the resuming client received
	received time.Time
	// wake: the job is a wake (wake.go), for the appends and cancels
	// naming the rollout that the session queues meanwhile (its client
	// saw the pause: nothing is replayed). deadline: the lane's own, at
	// its pause's timeout, for the checkpoint of epoch.
	wake, deadline bool
	epoch          uint64
	retry          bool // a deadline wake the store did not answer: tried again later (wakeFailed)
}

func (j *takeoverJob) bytes() int                         { return 0 }
func (j *takeoverJob) inFlight() bool                     { return true }
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
	settled := false
	if j.wake {
		defer func() {
			if !settled && !j.retry { // what the session queued for it is answered by the job's error, or not at all
				sess.endWake(ln, j.id)
			}
		}()
	}
	cp, err := cps.Load(ctx, sess.tenant, j.id, sess.creds)
	if err != nil {
		return sess.wakeFailed(ln, j, sess.takeoverError(j, err))
	}
	if j.deadline && cp.Epoch != j.epoch {
		return nil // moved since it hibernated here: its timeout is its new holder's
	}
	lc, err := decodeCheckpoint(cp.Data)
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
	}
	ro, perr := sess.srv.restore(ps, ln.id) // before the takeover: a rollout this server cannot run stays where it is
	if perr != nil {
		return sess.wakeFailed(ln, j, perr)
	}
	ro.moved = true
	ro.path.Transport = sess.transport
	ro.onConnection(&sess.scope.mcp)
	ro.start = j.received
	// Registered before the takeover too: a server at its bound of
	// suspended rollouts leaves the rollout to its owner, or another.
	sp, gone, perr := sess.srv.suspendAt(ro, sess, ln.id, lifecycle.Restored(answer == nil, j.wake))
	if perr != nil {
		return sess.wakeFailed(ln, j, perr)
	}
	if err := cps.Take(ctx, sess.tenant, j.id, cp.Epoch); err != nil {
		sess.srv.unregister(sp)
		return sess.wakeFailed(ln, j, sess.takeoverError(j, err))
	}
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
		// What the session queued so far is taken as the rollout parks;
		// what it queues from now on, once it has (settleWake). Taken
		// before sp's lock, which the lock order puts after the session's.
		// The rollout does not hibernate again meanwhile (its state is
		// waking).
		wakes = sess.wakeEvents(j.id)
	}
	parked := make(chan struct{})
	from := sp.restore(cp.Epoch, lc, j, wakes, parked)
	if !j.wake {
		sess.setRunning(ln, nil, sp) // first: an append that races the attach asks sp
	}
	sp.start()
	select { // it parks at once: its step's pause was announced already
	case <-parked:
	case <-sp.done:
	case <-sess.ctx.Done():
		if j.wake {
			sp.detach(sess) // the lane never followed it: teardown does not know it
			sp.wakeDone()   // nothing more comes from this connection: it may hibernate again
		}
		return nil // the connection ended: the rollout, detached, waits for a resume
	}
	if j.wake {
		sess.settleWake(ln, sp, wakes)
		settled = true
	} else {
		sp.replay(sess.ctx, sess, from)
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

// restore sets up the rollout taken over from lc, whose store had it at
// epoch, for its first park (which takes the events that woke it, wakes,
// and closes parked) and for what its client has: it returns the
// sequence_number the client's replay starts after. Answered in the
// checkpoint, the step runs again from its start, and the client gets what
// it has not seen of it; unanswered, its log is the checkpoint's frames,
// the pause's response.done last. Its state began Restored (suspendAt).
func (sp *suspension) restore(epoch uint64, lc *loadedCheckpoint, j *takeoverJob, wakes []*wakeEvent, parked chan struct{}) (from int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	frames, answer := lc.frames, lc.answer
	sp.epoch, sp.parkedCh, sp.wakes = epoch+1, parked, wakes
	sp.lastCheckpoint, sp.paused = lc.data, true
	if lc.data.Parked > 0 && answer == nil { // answered, the pause did not time out
		sp.deadline = time.UnixMilli(lc.data.Parked).Add(sp.srv.opts.Suspension.Timeout)
	}
	from = frames[len(frames)-1].seq // the pause
	if answer != nil {
		sp.preAnswered = answer
	} else {
		sp.log, sp.lastDone = frames, &frames[len(frames)-1]
		for _, f := range frames {
			sp.logBytes += len(f.b)
		}
	}
	if j.after != nil {
		from = *j.after
	}
	if answer != nil || j.wake {
		sp.sent = from // the client has it: the pause it answers, or the step run again
	}
	return from
}

// notFound is what the job's event is told when there is no rollout to
// take over.
func (j *takeoverJob) notFound() *protocol.Error {
	if j.wake {
		return errNoSuspended(j.id)
	}
	return errResumeNotFound(j.id)
}

// takeAnswersLocked takes, as a rollout taken over parks, what its
// takeover brought: the answer in its checkpoint, then the events that
// woke it, in order. The caller holds the suspension's lock: its
// hibernation timer cannot act first.
func (sp *suspension) takeAnswersLocked() {
	if items := sp.preAnswered; items != nil {
		sp.preAnswered = nil
		if _, perr := sp.takeLocked(items); perr != nil { // the store's answer does not answer this pause
			sp.srv.log.Warn("checkpointed answer refused", "response_id", sp.id, "err", perr)
			sp.ro.abort(perr)
		}
	}
	for _, w := range sp.wakes {
		w.refused = sp.takeWakeLocked(w)
	}
	sp.wakes = nil
}

// takeoverError is what a takeover's event is told when the store had no
// checkpoint for it, another server took it first, or the store did not
// answer.
func (sess *session) takeoverError(j *takeoverJob, err error) *protocol.Error {
	if errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrFenced) {
		return j.notFound()
	}
	sess.srv.log.Warn("checkpoint store", "response_id", j.id, "err", err)
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable, "",
		"The store of suspended rollouts did not answer; send the event again.")
}

// parkSilently parks a rollout taken over from its checkpoint on the
// step's calls without announcing the pause again: the server that wrote
// the checkpoint sent its response.done, which the resume replays. The
// rollout's lock first, as the lock order says.
func (sp *suspension) parkSilently(calls []protocol.PendingCall) {
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.ro.requireActionSilentlyLocked(calls)
	sp.mu.Lock()
	sp.parkLocked()
	sp.takeAnswersLocked()
	close(sp.parkedCh)
	sp.parkedCh = nil
	sp.mu.Unlock()
	sp.srv.notify()
}

// handOver releases, at Shutdown, the rollouts parked at a pause that is in
// the store: each ends here without a frame more, its checkpoint kept, and
// its client, whose connection closes with 1012 (service restart), resumes
// it on any server that shares the store. It returns their rollouts, which
// Shutdown does not fail. A rollout that comes to such a pause while the
// server drains is handed over as its checkpoint is written
// (writeCheckpoint).
func (s *Server) handOver() map[*rollout]bool {
	if s.opts.Checkpoints == nil {
		return nil
	}
	handed := map[*rollout]bool{}
	for _, sp := range s.suspended.all() {
		if sp.handOver() {
			handed[sp.ro] = true
		}
	}
	return handed
}

func (sp *suspension) handOver() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.releaseLocked(lifecycle.HandOver)
}

// handingOver reports whether the server, shutting down with checkpoints,
// has handed its parked rollouts over: what their clients send now is
// answered on the server they resume on.
func (s *Server) handingOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborting && s.opts.Checkpoints != nil
}

// What reclaim found of a rollout this server holds.
type reclaimed int

const (
	reclaimHeld  reclaimed = iota // still this server's (or the store cannot say): resume it here
	reclaimMoved                  // its checkpoint holds it: another server took it over (this copy is fenced out), or it hibernated
	reclaimEnded                  // it ended on another server: this copy is fenced out
)

// reclaim checks, before a resume here, that the store still has this
// server's epoch of a checkpointed rollout, and raises it (a takeover of
// its own: a server that loaded it meanwhile is fenced out). A copy that
// lost the rollout is fenced out here rather than resumed from its older
// state. Without checkpoints, or before the first is written, the rollout
// is this server's.
func (sp *suspension) reclaim(ctx context.Context) reclaimed {
	cps := sp.srv.opts.Checkpoints
	sp.mu.Lock()
	epoch, st := sp.epoch, sp.st
	sp.mu.Unlock()
	if st.Phase().Released() {
		return reclaimMoved // its checkpoint holds it: take it over from there
	}
	ok := cps != nil && st.Checkpointed() && !st.Holding()
	if !ok {
		return reclaimHeld
	}
	ctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	err := cps.Take(ctx, sp.ro.tenant, sp.id, epoch)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch {
	case err == nil:
		if sp.epoch == epoch {
			sp.epoch++
		}
		return reclaimHeld
	case errors.Is(err, ErrFenced):
		sp.fenceLocked()
		return reclaimMoved
	case errors.Is(err, ErrNoCheckpoint):
		sp.fenceLocked()
		return reclaimEnded
	}
	sp.srv.log.Warn("checkpoint store", "response_id", sp.id, "err", err)
	return reclaimHeld // the store cannot say: the client is served here, as without one
}
