package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file makes suspended rollouts durable when the server has
// Checkpoints (Options.Checkpoints): each pause is journaled (journal.go)
// before its response.done goes out, and each answer before the client
// sees anything of the step it starts, so that nothing its client saw is
// missing from the store; a response.resume that finds no rollout here
// takes the rollout over from its journal, on this server, under its own
// id, its sequence numbers going on. A write holds the frames back, not
// the loop: the step an answer starts runs while the answer is written.
//
// What is durable: a rollout parked on its client's calls, from the moment
// its client can see the pause, and its answer, from the moment its client
// sees the step go on. What is not: a pause whose step still runs a hosted
// call (not journaled: the one before it stays); a rollout that ended (its
// tail stays with the server that ran it).

// checkpointLocked starts journaling the pause whose frames since the last
// append are the log's, then done when not nil (its response.done, not in
// the log yet; the multi-agent beta's dialect has none): until it is
// written what the pause holds back, its frames from heldFrom on, waits
// in the log (holding), so that a client never sees a pause that is not
// durable yet, and the rollout is not parked (it takes no append) until it
// is. The caller holds the rollout's lock and the suspension's; it reports
// whether the write started.
func (sp *suspension) checkpointLocked(done *frame, heldFrom int) bool {
	cps := sp.srv.opts.Checkpoints
	if cps == nil {
		return false // and the frames are not gathered
	}
	frames := slices.Clip(sp.log)
	if done != nil {
		frames = append(frames, *done)
	}
	if v, _ := lifecycle.Decide(sp.st, lifecycle.Hold, lifecycle.Sender{}); v != lifecycle.Allow || len(frames) == 0 {
		return false
	}
	if t := sp.ro.tree; t != nil && t.spawned() {
		// The root's own pause in a tree: its state is the tree's, which
		// is journaled at rest (agents_durable.go); the last rest stays
		// the checkpoint.
		return false
	}
	ps, perr := sp.ro.pauseStateLocked()
	if perr != nil { // a hosted call of the step still runs: the pause before stays the checkpoint
		sp.srv.log.Debug("pause not checkpointed: a hosted call of its step still runs", "response_id", sp.id)
		return false
	}
	ps.Creds, ps.Answered, ps.ClientSteps = sp.creds, maps.Clone(sp.answered), sp.steps
	sp.applyLocked(lifecycle.Hold, nil, "", "")
	sp.heldFrom = heldFrom // the pause waits, and what follows it
	sp.srv.wg.Add(1)
	go sp.writeCheckpoint(cps, sp.journal, ps, frames, sp.epoch, sp.srv.now())
	return true
}

// checkpointAnswerLocked starts journaling the pause's answer, when the
// pause was durable: every item the client appended at it. The loop goes
// on at once, the write beside the model's work, and what the step sends
// waits for the write (holding, from heldFrom on), so that a server that
// dies mid-step leaves the step's start in the store, for the next to run
// again, and its client has seen nothing of the step the store does not
// have; a store that fails lets the frames go all the same. The caller
// holds the suspension's lock, has the last pending call's output, and
// has had the pause answered (lifecycle's Answered), which was durable:
// written.
func (sp *suspension) checkpointAnswerLocked() {
	cps := sp.srv.opts.Checkpoints
	if cps == nil || sp.st.Phase().Released() || sp.journal.n == 0 || sp.journal.state.Tree {
		return // no pause of its in the journal: a tree's state, which takes its outputs as they come
	}
	if v, _ := sp.applyLocked(lifecycle.Hold, nil, "", ""); v != lifecycle.Allow {
		return
	}
	sp.heldFrom = 0 // everything from the pause on
	jr, answer, epoch := sp.journal, slices.Clone(sp.appended), sp.epoch
	answering := make(chan struct{})
	sp.answering = answering
	sp.srv.wg.Add(1)
	go func() {
		defer sp.srv.wg.Done()
		defer close(answering)
		entry, encoded, err := answerEntry(answer)
		if err == nil {
			err = sp.writeJournal(cps, &jr, [][]byte{entry}, jr.state, nil, jr.parked, epoch)
			jr.answered = encoded
		}
		// The rollout's lock first, as the lock order says: a pause the
		// loop came to meanwhile is checkpointed now, and the early answers
		// it takes, if it parks, acknowledged once the suspension's lock is
		// let go.
		sp.ro.mu.Lock()
		defer sp.ro.mu.Unlock()
		var early []*clientAppend
		sp.mu.Lock()
		defer func() {
			sp.mu.Unlock()
			sp.answerEarly(early)
		}()
		if sp.landedLocked(jr, err, "answer") {
			return // fenced: the loop, aborted, stops parking
		}
		// The loop came to its next pause while the answer was written:
		// that pause's write follows the answer's, or it goes out now.
		if at, ok := sp.pauseAtLocked(); ok && sp.st.Phase() == lifecycle.Pausing && !sp.checkpointLocked(nil, at) {
			sp.parkLocked()
			early = sp.takeEarlyLocked()
		}
		sp.sendHeldLocked()
	}()
}

// pauseAtLocked is where the pause the loop has come to begins: its
// response.done's sequence number, or in the multi-agent beta's dialect
// the next event's; false when it has come to none since the last answer.
func (sp *suspension) pauseAtLocked() (int, bool) {
	if sp.lastDone != nil {
		return sp.lastDone.seq, true
	}
	return sp.waitAt, sp.waitAt != 0
}

// sendHeldLocked sends its client what waited for a write, up to a pause
// that waits for its own.
func (sp *suspension) sendHeldLocked() {
	if sp.sess == nil || sp.st.Replaying() {
		return // a resuming connection replays them
	}
	for _, f := range sp.log {
		if sp.st.Holding() && f.seq >= sp.heldFrom {
			break
		}
		if f.seq > sp.sent && sp.sess.send(f.b, nil) == nil {
			sp.sent = f.seq
		}
	}
}

// writeCheckpoint journals the pause of ps, whose frames are those since
// the client last appended, then lets the frames held for it since held go
// to the client. jr is the journal as it stood. A store that fails leaves the
// pause in memory only (the rollout goes on, and its journal stays at the
// pause before, if any); a store that says another server owns the
// rollout now stops it here, without a frame more for its client.
func (sp *suspension) writeCheckpoint(cps Checkpoints, jr journal, ps *pauseState, frames []frame, epoch uint64, held time.Time) {
	defer sp.srv.wg.Done()
	err := sp.writeJournal(cps, &jr, nil, ps, frames, sp.srv.now(), epoch)
	sp.ro.journalWait.Add(int64(sp.srv.now().Sub(held))) // the pause's response.done waited this long
	// The rollout's lock first, as the lock order says: the early answers
	// the pause takes as it parks are acknowledged in its sequence, once
	// the suspension's lock is let go.
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	var early []*clientAppend
	sp.mu.Lock()
	defer func() {
		sp.mu.Unlock()
		sp.answerEarly(early)
	}()
	if sp.landedLocked(jr, err, "pause") {
		return
	}
	// The server is draining: handed over here, its pause not sent, for
	// its client to resume (and be shown the pause) on another server,
	// rather than answered here.
	if err == nil && sp.srv.closing() && sp.releaseLocked(lifecycle.HandOver) {
		return
	}
	sp.parkLocked() // the client may see it now (unless the rollout ended meanwhile: the state machine says)
	early = sp.takeEarlyLocked()
	sp.sendHeldLocked()
}

// landedLocked applies what came of a write of the journal that held the
// frames back, jr the journal it leaves: a write the store took is the
// journal's, one it failed lets the frames go all the same (what says
// what was not written), and one fenced out stops the rollout here, which
// it reports. The caller holds mu.
func (sp *suspension) landedLocked(jr journal, err error, what string) (fenced bool) {
	switch {
	case errors.Is(err, ErrFenced):
		sp.applyLocked(lifecycle.Unwritten, nil, "", "")
		sp.fenceLocked()
		return true
	case err != nil:
		sp.srv.log.Warn(what+" not checkpointed", "response_id", sp.id, "err", err)
		sp.applyLocked(lifecycle.Unwritten, nil, "", "")
	default:
		sp.applyLocked(lifecycle.Written, nil, "", "")
		sp.journal = jr
	}
	return false
}

// writeJournal writes jr's next entries and records them in jr: a pause's
// (ps and its frames, answer nil: a step entry, or a snapshot beginning
// the journal anew), or its answer's (answer, ps the state jr holds). A
// journal that is not where jr left it (a write lost, or landed late) is
// begun anew, with a snapshot of the pause, and its answer.
func (sp *suspension) writeJournal(cps Checkpoints, jr *journal, answer [][]byte, ps *pauseState, frames []frame, parked time.Time, epoch uint64) error {
	if answer != nil {
		frames = jr.frames // the pause's
	}
	reset, entries := false, answer
	if answer == nil {
		var entry []byte
		var err error
		if reset, entry, err = jr.pauseWrite(ps, frames, parked); err != nil {
			return err
		}
		entries = [][]byte{entry}
	}
	var head []byte
	write := func(reset bool, entries [][]byte) error {
		n := len(entries)
		if !reset {
			n += jr.n
		}
		head = jr.head(n, ps, answer != nil, parked)
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		defer cancel()
		return cps.Write(ctx, &JournalWrite{Tenant: ps.Tenant, ID: sp.id, Creds: sp.creds, Epoch: epoch, Reset: reset, At: jr.n,
			Head: head, Entries: entries, Lease: sp.srv.leases.lease}, sp.srv.checkpointTTL())
	}
	err := write(reset, entries)
	if errors.Is(err, ErrJournalGap) {
		sp.srv.log.Info("journal begun anew", "response_id", sp.id)
		snapshot, serr := snapshotEntry(ps, frames, parked)
		if serr != nil {
			return serr
		}
		reset, entries = true, append([][]byte{snapshot}, answer...)
		err = write(reset, entries)
	}
	if err == nil {
		jr.wrote(reset, entries, ps, frames, parked)
		if verifyJournal {
			jr.verify(head, ps)
		}
	}
	return err
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
// nothing more of it, and ends. A client still attached is told at once
// (response_owned_elsewhere), and its connection closes with 1012, so
// that it resumes where the rollout is rather than wait here.
func (sp *suspension) fenceLocked() {
	if !sp.releaseLocked(lifecycle.Fence) {
		return
	}
	sp.srv.log.Info("suspended rollout taken over by another server", "response_id", sp.id)
	if sp.sess != nil {
		sp.sess.fail(errOwnedElsewhere(sp.id), CloseServiceRestart, "response moved: resume it where it is")
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
	sp.journal, sp.paused = lc.journal, true
	if lc.parked.UnixMilli() > 0 && answer == nil { // answered, the pause did not time out
		sp.deadline = lc.parked.Add(sp.srv.opts.Suspension.Timeout)
	}
	from = frames[len(frames)-1].seq // the pause
	if answer != nil {
		sp.preAnswered = answer
	} else {
		sp.log = frames
		if !sp.ro.req.MultiAgentEnabled() { // the beta's pause has no response.done: its calls are in the log
			sp.lastDone = &frames[len(frames)-1]
		}
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

// acceptAnswersLocked takes, as a rollout taken over parks, what its
// takeover brought: the answer in its checkpoint, then the events that
// woke it, in order. The caller holds the suspension's lock: its
// hibernation timer cannot act first.
func (sp *suspension) acceptAnswersLocked() {
	if items := sp.preAnswered; items != nil {
		sp.preAnswered = nil
		if _, perr := sp.acceptLocked(items); perr != nil { // the store's answer does not answer this pause
			sp.srv.log.Warn("checkpointed answer refused", "response_id", sp.id, "err", perr)
			sp.ro.abort(perr)
		}
	}
	for _, w := range sp.wakes {
		w.refused = sp.acceptWakeLocked(w)
	}
	sp.wakes = nil
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
	wakes := sp.wakes
	sp.parkLocked()
	sp.acceptAnswersLocked()
	early := sp.takeEarlyLocked()
	close(sp.parkedCh)
	sp.parkedCh = nil
	sp.mu.Unlock()
	sp.ro.injectsTakenLocked(wakes) // before the step they resume goes on
	sp.answerEarly(early)
	sp.srv.notify()
}

func (sp *suspension) handOver() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.releaseLocked(lifecycle.HandOver)
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
	err := cps.Take(ctx, sp.ro.tenant, sp.id, epoch, sp.srv.leases.lease)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch {
	case err == nil:
		if sp.epoch == epoch {
			sp.epoch++
		}
		return reclaimHeld
	case errors.Is(err, ErrFenced) || errors.Is(err, ErrOwnedElsewhere):
		sp.fenceLocked()
		return reclaimMoved
	case errors.Is(err, ErrNoCheckpoint):
		sp.fenceLocked()
		return reclaimEnded
	}
	sp.srv.log.Warn("checkpoint store", "response_id", sp.id, "err", err)
	if !sp.st.Leased() || !sp.srv.leases.valid() {
		// The store cannot say, and the server's lease may have run out
		// there: another server may run the rollout by now.
		sp.fenceLocked()
		return reclaimMoved
	}
	return reclaimHeld // the store cannot say, but the server's lease holds: the rollout is still its
}
