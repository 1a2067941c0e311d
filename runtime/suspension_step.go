package runtime

import (
	"cmp"
	"context"
	"maps"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is a suspended rollout's steps: the client calls its loop
// parks on, the frames it puts, and the events of its client that answer
// the pause (end it: cancel; branch it: fork). The append that answers it
// is suspension.go's: it drives the loop on.

// answer is the suspended rollout's clientCalls. Asked first for a step's
// calls, it opens them for outputs and announces the pause (response.done,
// once their output_item.done events are out); then, and whenever the loop
// asks again, it returns their outputs by call_id once response.append has
// delivered them all, or errParked: the loop then parks, as a value
// (rollout.sleep), and the append that brings the last output drives it on
// (rollout.kick). It never blocks on the client: a suspended rollout
// parks here, and only here.
func (sp *suspension) answer(ctx context.Context, calls []protocol.Call) (map[string]protocol.Item, error) {
	if sp.beginStep(calls) {
		sp.announce()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case sp.ready:
		sp.asked = false
		return sp.outputs, nil
	}
	return nil, errParked
}

// outputsReady reports whether the step's client calls all have their outputs,
// for the loop to take; see rollout.sleep.
func (sp *suspension) outputsReady() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.ready
}

// beginStep opens the step's client calls for outputs, unless the loop
// asked for them already (it asks again as it is driven on): it reports
// whether it did.
func (sp *suspension) beginStep(calls []protocol.Call) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.asked {
		return false
	}
	sp.asked = true
	sp.steps++
	sp.step, sp.left, sp.ready = calls, len(calls), false
	sp.byID = make(map[string]int, len(calls)) // indexes into step: with the Calls as its values, its table would take about a KB a step
	for i, c := range calls {
		for _, id := range c.Names() {
			sp.byID[id] = i
		}
	}
	sp.outputs = make(map[string]protocol.Item, len(calls))
	sp.appended = nil
	if sp.answered == nil {
		sp.answered = make(map[string]int)
	}
	return true
}

// announce announces the pause of the step's client calls, with every one
// of them; the loop's goroutine runs it, while the step's hosted calls go
// on. A rollout taken over at a pause its client has seen parks silently.
func (sp *suspension) announce() {
	sp.mu.Lock()
	silent := sp.st.Announced()
	sp.applyLocked(lifecycle.Park, nil, "", "")
	pause := make([]protocol.PendingCall, len(sp.step))
	for i, c := range sp.step {
		pause[i] = pendingCall(c)
	}
	sp.mu.Unlock()
	if silent {
		sp.parkSilently(pause)
	} else {
		sp.ro.requireAction(pause)
	}
}

// pendingCall is a call as a pause lists it.
func pendingCall(c protocol.Call) protocol.PendingCall {
	p := protocol.PendingCall{Type: c.Type, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace}
	if c.Type == protocol.ItemCustomToolCall {
		p.Input = c.Input
	} else {
		p.Arguments = c.Input
	}
	return p
}

// put is the rollout's sink. Every frame goes into the replay log and, when
// attached, to the connection; detached, only to the log. The terminal frame
// is held back for the connection that settles the rollout. The pause's
// response.done parks the rollout as it goes out.
func (sp *suspension) put(ev protocol.Event, acct *outbox.Delivery) error {
	enc, err := sp.enc.Encode(ev)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.st.Phase().Released() {
		return nil // another server owns it now, or will
	}
	b := sp.pack.Keep(enc)
	f := frame{seq: protocol.Header(ev).SequenceNumber, b: b}
	switch protocol.Type(ev) {
	case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		sp.terminal = b
		return nil
	case protocol.EventDone:
		if f.seq <= sp.sent {
			// A step run again after a takeover pauses where its client
			// has been already, and beyond: the checkpoint is older than
			// what the client saw (the store did not take a later pause),
			// and what it answered there is lost. Told, not left waiting.
			sp.ro.abort(errCheckpointBehind)
			return nil
		}
		done := f // its own: f stays on the stack for the deltas
		sp.lastDone, sp.paused = &done, true
		// Parked once the pause is queued: arming its timer (a syscall
		// when it wakes the netpoller) is not on the way to the client.
		// mu is held throughout, so no append can come first. A pause
		// being checkpointed parks once written (writeCheckpoint): until
		// then its client cannot see it, nor answer it.
		if !sp.checkpointLocked(&f, f.seq) {
			defer sp.parkLocked()
		}
	case protocol.EventCreated, protocol.EventInProgress:
		// A fork's beginning shows what its first pause shows again: a
		// resume replays that pause, so once sent these are not kept for
		// one (64 forks hold 64 fewer pairs of step views). Not sent, the
		// log keeps them: the client learns the fork's id from them.
		if sp.ro.paused != nil && !sp.paused && sp.sess != nil && !sp.st.Replaying() && sp.sess.send(b, acct) == nil {
			sp.sent = f.seq
			return nil
		}
	}
	sp.log = append(sp.log, f)
	sp.logBytes += len(b)
	if protocol.Type(ev) == protocol.EventDone {
		sp.compactLogLocked()
	}
	if f.seq <= sp.sent {
		return nil // its client has it: a step run again after a takeover
	}
	if sp.sess != nil && !sp.st.Behind() && sp.sess.send(b, acct) == nil {
		sp.sent = f.seq
		for sp.logBytes > maxDetachedBytes && len(sp.log) > 1 { // sent long ago: beyond replay
			sp.logBytes -= len(sp.log[0].b)
			sp.log, sp.logTrimmed = sp.log[1:], true
		}
		return nil
	}
	// Detached, catching up, or the connection is going away: the log
	// keeps it for the client.
	if sp.logBytes > maxDetachedBytes {
		return errDetachedFull
	}
	return nil
}

// waiter is a sink that parks its rollout with no event: a suspension, in
// the multi-agent beta's dialect (rollout.pauseLocked).
type waiter interface{ wait(next int) }

// wait parks the rollout on the step's client calls as put does on a
// pause's response.done, with no event: the multi-agent beta's waiting
// response stays in_progress, its calls told by their output_item.done
// events, in the log. next is the sequence number of the rollout's next
// event: what waits for the pause's checkpoint. The caller holds the
// rollout's lock.
func (sp *suspension) wait(next int) {
	sp.mu.Lock()
	switch {
	case sp.st.Phase().Released():
		sp.mu.Unlock()
		return
	case next <= sp.sent:
		sp.ro.abort(errCheckpointBehind) // as put says of a response.done
		sp.mu.Unlock()
		return
	}
	sp.lastDone, sp.waitAt, sp.paused = nil, next, true
	sp.compactLogLocked()
	var early []*clientAppend
	if !sp.checkpointLocked(nil, next) {
		sp.parkLocked()
		early = sp.takeEarlyLocked()
	}
	sp.mu.Unlock()
	sp.answerEarly(early)
}

// compactLogLocked copies the replay log's frames that the packer's current
// chunk holds into one allocation of their size, and lets the buffers of
// streaming go, at a pause: a parked rollout keeps its log until the client
// answers, and that chunk has room to spare (outbox.Packer); the chunks
// before it are full. A frame the packer copied on its own (a response
// object) is its own size already. The frames' bytes are immutable: whoever
// holds the old ones (the connection's queue, a checkpoint being written)
// keeps them.
func (sp *suspension) compactLogLocked() {
	first, packed := len(sp.log), 0
	for i := len(sp.log) - 1; i >= 0 && (sp.pack.Holds(sp.log[i].b) || !outbox.Packed(sp.log[i].b)); i-- {
		if sp.pack.Holds(sp.log[i].b) {
			first, packed = i, packed+len(sp.log[i].b)
		}
	}
	buf := make([]byte, 0, packed)
	for i := first; i < len(sp.log); i++ {
		if !sp.pack.Holds(sp.log[i].b) {
			continue
		}
		start := len(buf)
		buf = append(buf, sp.log[i].b...)
		sp.log[i].b = buf[start:len(buf):len(buf)]
	}
	if d := sp.lastDone; d != nil && len(sp.log) > 0 && sp.log[len(sp.log)-1].seq == d.seq {
		d.b = sp.log[len(sp.log)-1].b
	}
	sp.pack.Reset()
	sp.enc.Release() // the encoding buffers too: nothing is put while it is parked
}

// letStepGoLocked lets the step's frames go, the log and their bytes, at
// its answer. The packer's chunks go back to its pool when nothing can hold
// a frame kept in them: no checkpoint's writer (there are no checkpoints),
// no connection but the rollout's since the step began (shared), and that
// connection's outbox has written every frame it was given (Idle: the
// client answers a pause it has read, so it mostly has). Otherwise they go
// to the collector, with whoever holds a frame. (A new chunk a 4 KiB of
// every step's frames was a quarter of the bytes a server allocates at 500
// streams.)
func (sp *suspension) letStepGoLocked() {
	recycle := sp.srv.opts.Checkpoints == nil && !sp.logTrimmed && !sp.shared && sp.sess != nil && sp.sess.out.Idle()
	sp.log, sp.logBytes, sp.lastDone, sp.waitAt = sp.nextLogLocked(), 0, nil, 0
	if recycle {
		sp.pack.Recycle()
	} else {
		sp.pack.Forget()
	}
	sp.shared = false
}

// nextLogLocked is the log for the next step, this one's frames let go.
// It is this one's array, cleared, where nothing else can hold it: no
// checkpoint's writer (there are no checkpoints), and no frames before it
// that its trim left unreachable but not let go. Otherwise, or when a long
// step made it large, it is made as long as this one at once rather than
// grown by doubling. (A new log a step, grown as the step goes, would be
// 15% of the bytes the server allocates at 500 streams.)
func (sp *suspension) nextLogLocked() []frame {
	if sp.srv.opts.Checkpoints != nil || sp.logTrimmed || cap(sp.log) > maxReusedLog {
		sp.logTrimmed = false
		return make([]frame, 0, len(sp.log))
	}
	clear(sp.log)
	return sp.log[:0]
}

// maxReusedLog is the longest log, in frames, whose array a suspended
// rollout keeps for its next step: a step's deltas, unless merged, are
// one frame for a token or two.
const maxReusedLog = 1024

// behind reports whether the rollout's frames wait for a client: on the
// connection it reports to, or in the replay log while it is detached or a
// resuming client catches up. Merged there, deltas keep the log short.
func (sp *suspension) behind(acct *outbox.Delivery) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.sess == nil || sp.st.Behind() || acct.Behind()
}

// parkLocked: the pause's response.done is going out; from now on the step
// takes outputs, for Suspension.Timeout at most (unless the rollout was
// cancelled while its pause waited for the step's other events).
func (sp *suspension) parkLocked() {
	if v, _ := sp.applyLocked(lifecycle.Pause, nil, "", ""); v != lifecycle.Allow {
		return
	}
	sp.pauses++
	sp.srv.obs.Paused()
	pause := sp.pauses
	wait := sp.srv.opts.Suspension.Timeout
	if !sp.deadline.IsZero() { // taken over: the pause has waited since its checkpoint
		wait, sp.deadline = max(sp.deadline.Sub(sp.srv.now()), 0), time.Time{}
	}
	if wait == 0 {
		sp.timeoutLocked() // it timed out while no server held it
		return
	}
	sp.timeoutAt = sp.srv.now().Add(wait)
	sp.timer = afterFunc(wait, sp, func(sp *suspension) { sp.timeout(pause) }) // the suspended set holds sp meanwhile
	sp.sleepLocked()
}

// timeout ends a rollout whose pause waited longer than Suspension.Timeout.
func (sp *suspension) timeout(pause int) {
	sp.mu.Lock()
	if sp.pauses != pause {
		sp.mu.Unlock()
		return // a later pause's timer is armed
	}
	durable := sp.srv.opts.Checkpoints != nil && sp.st.Checkpointed() && !sp.st.Holding()
	sp.mu.Unlock()
	// A durable rollout times out only while it is still this server's:
	// another may have taken it over, and its outcome is that server's
	// to give (reclaim fences this copy out then).
	if durable && sp.reclaim(context.Background()) != reclaimHeld {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.pauses == pause {
		sp.timeoutLocked()
	}
}

func (sp *suspension) timeoutLocked() {
	if v, _ := sp.applyLocked(lifecycle.Timeout, nil, "", ""); v == lifecycle.Allow {
		sp.stopTimerLocked()
		sp.ro.abort(errToolTimeout) // it runs to its end: it takes no more outputs
	}
}

// cancel handles response.cancel from sess: the rollout ends with status
// cancelled.
func (sp *suspension) cancel(sess *session, lane string) (asleep bool, perr *protocol.Error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch v, perr := sp.applyLocked(lifecycle.Cancel, sess, lane, ""); v {
	case lifecycle.Asleep:
		return true, nil // the session wakes it from its checkpoint
	case lifecycle.Allow:
		sp.stopTimerLocked() // it runs to its end: it takes no more outputs
		sp.ro.abort(errCancelled)
	default:
		return false, perr
	}
	return false, nil
}

// pause takes the rollout's state at its pause for response.fork from sess
// on lane: it must report there, be parked on its client's calls, and have
// none of them answered yet (a fork starts from the pause, and appends its
// own). The rollout's lock is taken first, as the lock order says.
func (sp *suspension) pause(sess *session, lane string) (*pauseState, *protocol.Error) {
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if v, perr := sp.applyLocked(lifecycle.Fork, sess, lane, ""); v != lifecycle.Allow {
		return nil, cmp.Or(perr, errNoSuspended(sp.id))
	}
	if t := sp.ro.tree; t != nil && t.spawned() {
		return nil, errForkTree(sp.id)
	}
	ps, perr := sp.ro.pauseStateLocked()
	if perr != nil {
		return nil, perr
	}
	ps.Creds, ps.Answered, ps.ClientSteps = sp.creds, maps.Clone(sp.answered), sp.steps
	return ps, nil
}
