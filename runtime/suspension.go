package runtime

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/ids"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// maxDetachedBytes bounds the frames a suspended rollout keeps for replay; a
// detached rollout that would keep more is cancelled.
const maxDetachedBytes = 8 << 20

// suspension is a suspended rollout as the server holds it, and the one
// owner of its state: the connection it reports to, whether it is parked on
// client calls, the frames a resuming client may have missed, and its
// result. Its state is one lifecycle.State, which every event, from its
// client, its loop, its timers, its store or the server, is submitted to
// (applyLocked): the one writer of that state, and the one place its
// refusals are built; a session keeps a reference per lane and asks. The
// state machine is drawn in doc.go.
//
// A suspension is also its rollout's clientCalls (and its sink): it
// announces the pause of a step's client calls and returns their outputs
// once response.append has delivered them all. Until then the loop is
// parked as a value, with no goroutine; the append that brings the last
// output drives it on (drive).
//
// The rollout runs on goroutines of the server's, so that it outlives its
// connection: detached, it keeps its frames until a connection with the
// same credentials sends response.resume, or the resume window ends and it
// is cancelled. Lock order: rollout.mu, then mu (put runs under the
// rollout's lock), then the session's outbox.
type suspension struct {
	srv   *Server
	ro    *rollout
	id    string
	creds string // hash of the Authorization header of the connection that created it
	lane  string // its stream_id, on every connection it reports to
	done  signal // closed when its loop has returned, at the rollout's end

	mu     lockrank.Mutex[lockrank.Suspension]
	st     lifecycle.State // its whole state (phase, link, checkpoint): changed only by applyLocked; guarded by mu
	sess   *session        // the connection it reports to, nil while detached (st.Link says whether it catches up); guarded by mu
	gone   signal          // closed when sess stops being that connection; guarded by mu
	expiry *time.Timer     // the resume window, while detached; guarded by mu

	// The current step's client calls, guarded by mu.
	steps    int                      // steps begun
	step     []protocol.Call          // in output order
	byID     map[string]int           // the step's calls' indexes by what an output names them by (call_id; a local shell call's id too)
	outputs  map[string]protocol.Item // call_id -> the output appended for it
	asked    bool                     // the loop has been given the step's calls, and not yet their outputs
	ready    bool                     // the last call of the step has its output (and, at a durable pause, the store the answer): the loop's to take
	left     int                      // calls of the step without an output
	answered map[string]int           // call_id -> the step it got its output in, over the rollout
	pauses   int                      // pauses so far: names the one timer is for
	timer    *time.Timer              // Suspension.Timeout of the current pause

	// The replay log, guarded by mu: frames since the client last appended
	// (appending proves it saw the pause).
	log        []frame
	logBytes   int
	logTrimmed bool            // frames before log's start, sent long ago, were dropped: its array holds them still
	pack       outbox.Packer   // the log's frames' bytes
	enc        outbox.EventBuf // the frame being put: guarded by the rollout's lock, not mu
	sent       int             // sequence_number of the last frame put to a connection
	shared     bool            // a connection other than sess may hold frames of the step (it resumed, or was dropped, since the step began)
	lastDone   *frame          // the current pause's response.done
	waitAt     int             // the current pause's next sequence number, in the multi-agent beta's dialect (no response.done); 0 otherwise
	heldFrom   int             // while a write holds its frames (lifecycle's holding), the first that waits
	answering  chan struct{}   // closed once the write of the last answer is done (or failed)
	paused     bool            // it has paused once (a fork's beginning is over)

	// Durability (suspension_durable.go), guarded by mu.
	epoch       uint64          // the epoch it writes its checkpoints at: 1, or one more than the server's it was taken over from (0 until the takeover has taken it)
	sleep       *time.Timer     // Suspension.HibernateAfter of the current pause
	deadline    time.Time       // taken over: when its pause's Suspension.Timeout ends, counted from the pause's checkpoint
	journal     journal         // where its journal stands, as it last wrote it or took it over
	appended    protocol.Items  // what the client appended at the current pause
	preAnswered protocol.Items  // taken over with the pause answered: the items its first park takes
	wakes       []*wakeEvent    // woken (suspension_wake.go): the appends and cancels its first park takes
	early       []*clientAppend // appends before the pause they answer, in the multi-agent beta's dialect (suspension_early.go)
	timeoutAt   time.Time       // when the current pause's Suspension.Timeout ends
	parkedCh    chan struct{}   // closed when it parks, for a takeover waiting to replay its pause
	writingTree bool            // a write of its agent tree's state is in flight (agents_durable.go)
	treeNext    *pauseState     // the tree's state taken while it was: written next
	treeWritten chan struct{}   // closed once the tree's writes are done (or failed), and what they held has gone out

	// What run left, once it has returned; guarded by mu.
	terminal []byte // the terminal frame, held for the connection that settles the rollout
	conv     *conversation
}

// sender is how sess, sending an event on lane with creds, stands to the
// rollout (nil, "": the rollout's own loop, a timer, the store, the server).
func (sp *suspension) sender(sess *session, lane, creds string) lifecycle.Sender {
	return lifecycle.Sender{Here: sess != nil && sp.sess == sess, Lane: lane == sp.lane, Creds: creds != "" && creds == sp.creds}
}

// applyLocked submits ev, from sess on lane with creds (nil, "", "": the
// rollout's own loop, a timer, the store, the server), to the rollout's
// state, which it changes when the verdict is Allow; it returns the
// verdict, and its refusal as the client reads it. The caller holds mu.
// Nothing else writes sp.st.
func (sp *suspension) applyLocked(ev lifecycle.Event, sess *session, lane, creds string) (lifecycle.Verdict, *protocol.Error) {
	return sp.submitLocked(ev, sp.sender(sess, lane, creds), lane)
}

// submitLocked is applyLocked for an event whose sender is known as
// lifecycle sees it: a woken rollout's client's (wakeSender).
func (sp *suspension) submitLocked(ev lifecycle.Event, from lifecycle.Sender, lane string) (lifecycle.Verdict, *protocol.Error) {
	leased := sp.st.Leased()
	v := sp.st.Apply(ev, from)
	if v == lifecycle.Allow {
		sp.leaseChangedLocked(leased)
	}
	return v, sp.refusal(v, ev, lane)
}

// decideLocked is what applyLocked would do, without doing it: for an
// event asked about before it is sent (may a create queue, may a resume be
// admitted, may a steer be taken now). The caller holds mu.
func (sp *suspension) decideLocked(ev lifecycle.Event, sess *session, lane, creds string) (lifecycle.Verdict, *protocol.Error) {
	v, _ := lifecycle.Decide(sp.st, ev, sp.sender(sess, lane, creds))
	return v, sp.refusal(v, ev, lane)
}

// refusal is what a client is told of ev, sent on lane, refused with v;
// nil when v refuses nothing. Every refusal of a suspended rollout's
// events is built here.
func (sp *suspension) refusal(v lifecycle.Verdict, ev lifecycle.Event, lane string) *protocol.Error {
	switch v {
	case lifecycle.RefuseNotFound:
		if ev == lifecycle.Resume {
			return errResumeNotFound(sp.id)
		}
		return errNoSuspended(sp.id)
	case lifecycle.RefuseNotParked:
		if ev == lifecycle.Fork {
			return errForkNotParked(sp.id)
		}
		return errAppendNotParked(sp.id)
	case lifecycle.RefuseAppended:
		return errForkAppended(sp.id)
	case lifecycle.RefuseLaneBusy:
		return errLaneSuspended(sp.id, ev == lifecycle.Fork)
	case lifecycle.RefuseLane:
		return errOtherLane(sp.id, sp.lane, lane)
	case lifecycle.RefuseCompleted:
		return errSteerCompleted(sp.id)
	case lifecycle.RefuseNotActive:
		return errSteerNotActive(sp.id)
	case lifecycle.RefuseDurable:
		return errSteerDurable(sp.id)
	}
	return nil
}

// The refusals of a suspended rollout's events. Each keeps the connection
// usable.

// frame is one encoded event and its sequence_number.
type frame struct {
	seq int
	b   []byte
}

// start runs the rollout on a server goroutine, which ends where the loop
// parks on its client: the append that brings the pause's last output, or
// whatever ends the rollout meanwhile, drives it on from there on another.
func (sp *suspension) start() {
	sp.ro.driveOn = func() { go sp.drive(sp.ro.resume) }
	go sp.drive(func() (*conversation, error) { return sp.ro.run(sp.srv.ctx, sp) })
}

// drive runs loop, the rollout's loop from where it is, on this goroutine,
// until the rollout ends, or parks on its client's calls as a value
// (rollout.sleep): then the goroutine ends, and the rollout's kick starts
// another.
func (sp *suspension) drive(loop func() (*conversation, error)) {
	var conv *conversation
	var err error
	defer func() {
		if p := recover(); p != nil {
			sp.srv.log.Error("suspended rollout panicked", "panic", p)
			err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
				"The server had an error while processing the request.")
		}
		if errors.Is(err, errParked) {
			return // a value until it is driven on
		}
		if sp.asleep() {
			sp.srv.suspended.sleep(sp, sp.srv.checkpointTTL()) // first: a resume from now on finds it in the store
		}
		sp.ended(conv, err)
		sp.srv.wg.Done() // added by register
	}()
	for {
		conv, err = loop()
		if !errors.Is(err, errParked) || sp.ro.sleep(sp.outputsReady) {
			return
		}
		loop = sp.ro.resume // its outputs came as it parked
	}
}

// ended records what run left.
func (sp *suspension) ended(conv *conversation, err error) {
	sp.mu.Lock()
	answering, treeWritten := sp.answering, sp.treeWritten
	sp.mu.Unlock()
	if answering != nil {
		<-answering // the step's frames wait for its answer's write: they go out before the end
	}
	if treeWritten != nil {
		<-treeWritten // as an answer's, a tree's write holds its frames
	}
	sp.mu.Lock()
	defer sp.done.close()
	defer sp.mu.Unlock()
	sp.applyLocked(lifecycle.End, nil, "", "")
	sp.stopTimerLocked()
	sp.refuseEarlyLocked()
	sp.conv = conv
	sp.dropCheckpointLocked()
	if sp.terminal == nil && err != nil && !errors.Is(err, context.Canceled) && !sp.st.Phase().Released() {
		// It ended without a terminal event for a reason the client can be
		// told (a panic, a replay log overflow while detached; not a
		// shutdown or an expired resume window): the connection that
		// settles it answers with an error event, as runJob does for a
		// cached-state response, rather than leave the client waiting.
		sp.terminal = errorFrame(protocol.AsError(err), sp.lane)
	}
}

// shutdown stops the rollout's timers: the server is going away, and the
// rollout with it.
func (sp *suspension) shutdown() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.applyLocked(lifecycle.Shutdown, nil, "", "") // it runs to its end: it takes no more outputs
	if sp.expiry != nil {
		sp.expiry.Stop()
		sp.expiry = nil
	}
	sp.stopTimerLocked()
}

// waitsOnClient reports whether the rollout is parked on its client's
// calls: Shutdown's drain does not wait for it.
func (sp *suspension) waitsOnClient() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.st.Phase() == lifecycle.Parked
}

// readyLocked makes the step's outputs the loop's to take, and drives a
// loop parked on them on. The caller holds mu.
func (sp *suspension) readyLocked() {
	sp.ready = true
	sp.ro.kick()
}

// deliver handles response.append from sess: function_call_outputs for the
// parked calls, and user messages, which steer the rollout (they join the
// context after the step). It checks every item before delivering any, so a
// refused append changes nothing. The moment the last parked call has its
// output, the rollout is running again.
func (sp *suspension) deliver(sess *session, ev *protocol.AppendEvent, size int) (asleep bool, perr *protocol.Error) {
	if perr := protocol.ValidateItems(ev.Input, "input"); perr != nil {
		return false, perr
	}
	// What the rollout takes it holds until it ends: charged first, and
	// given back unless it kept the items (taken, or waiting for the
	// pause they answer).
	if perr := sp.ro.holdInput(size); perr != nil {
		return false, perr
	}
	kept := false
	defer func() {
		if !kept {
			sp.ro.held.giveBack(sp.srv.mem, int64(size))
		}
	}()
	// The rollout's lock first, as the lock order says: the append that
	// answers the pause resumes the response under it (resumeAnsweredLocked)
	// before the rollout, free to go on, can take it. The suspension's lock
	// is let go first: the in_progress goes through put, which takes it.
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	ids.NameInputs(ev.Input) // before they join the tree's log: a fork shares its items
	if t := sp.ro.tree; t != nil {
		if goOn, ok := t.accept(ev.Input); ok {
			// Outputs for calls its sub-agents wait on: theirs, whatever
			// the root is doing; journaled, the tree at rest, before they
			// are acknowledged and the agents they answer go on.
			t.log = append(t.log, ev.Input...)
			t.checkpointLocked(sp)
			if ev.Inject {
				sp.ro.injectCreatedLocked()
			}
			goOn()
			kept = true
			return false, nil
		}
	}
	a := &clientAppend{sess: sess, ev: ev}
	sp.mu.Lock()
	asleep, early := sp.acceptAppendLocked(a)
	sp.mu.Unlock()
	kept = a.taken || early
	if t := sp.ro.tree; t != nil && a.taken {
		t.log = append(t.log, ev.Input...)
	}
	if ev.Inject && a.taken {
		sp.ro.injectCreatedLocked() // before the step it resumes
	}
	if a.answered {
		sp.ro.resumeAnsweredLocked(a.parked)
	}
	return asleep, a.refused
}

// acceptAppendLocked is deliver's part under the suspension's lock: it
// takes a's items, or refuses them, and writes in a what came of it. It
// reports asleep when the rollout is in its checkpoint (the session wakes
// it), early when a came before the pause it answers and waits for it
// (takeEarlyLocked). The caller holds mu.
func (sp *suspension) acceptAppendLocked(a *clientAppend) (asleep, early bool) {
	v, perr := sp.applyLocked(lifecycle.Append, a.sess, a.ev.StreamID, "")
	switch v {
	case lifecycle.Asleep:
		return true, false
	case lifecycle.Early:
		if len(sp.early) >= maxEarly {
			a.refused = errTooEarly(sp.id)
			return false, false
		}
		sp.early = append(sp.early, a)
		return false, true
	case lifecycle.Allow:
		a.answered, a.refused = sp.acceptLocked(a.ev.Input)
		a.taken, a.parked = a.refused == nil, len(sp.step)
	default: // ignored: another server has it, or will, and there its pause is replayed and answered again
		a.refused = perr
	}
	return false, false
}

// acceptLocked takes an append's items for the parked step, all or none:
// outputs for its pending calls and steering messages. The moment the last
// pending call has its output the rollout runs again (answered reports that
// these items did it); when its pause is durable, once the store has the
// outputs too (suspension_durable.go).
func (sp *suspension) acceptLocked(items protocol.Items) (answered bool, _ *protocol.Error) {
	seen := map[string]bool{}
	var steering protocol.Items
	for i, it := range items {
		param := protocol.IndexParam("input", i)
		if named, answers, ok := protocol.AnswerOf(it); ok {
			callID := sp.stepCall(named).CallID
			if callID == "" {
				callID = named
			}
			// Call ids need only be unique within a step: some backends
			// number them per completion (call_0 in every step). An id of
			// an earlier step that is not pending now was answered then.
			step, answered := sp.answered[callID]
			_, inStep := sp.byID[callID]
			_, has := sp.outputs[callID]
			pending := inStep && !has
			switch {
			case seen[callID] || answered && (step == sp.steps || !pending):
				return false, errOutputTwice(param, callID)
			case !pending:
				return false, errNoPendingCall(param, callID, sp.id)
			}
			if call := sp.stepCall(callID); call.Type != answers {
				return false, protocol.OutputMismatch(it, callID, call.Type, param)
			}
			seen[callID] = true
			continue
		}
		switch it := it.(type) {
		case *protocol.Message:
			if it.Role != protocol.RoleUser {
				return false, errSteerRole(param, it.Role)
			}
			steering = append(steering, it)
		default:
			return false, errAppendItem(param, it.ItemType())
		}
	}
	ids.NameInputs(items)
	if rec := sp.srv.opts.Recorder; rec != nil {
		rec.Appended(sp.srv.now(), sp.id, items)
	}
	// Steering first: it must be in the rollout's inbox when the step ends.
	if len(steering) > 0 {
		sp.ro.steer(steering...)
	}
	for _, it := range items {
		named, _, ok := protocol.AnswerOf(it)
		if !ok {
			continue
		}
		callID := sp.stepCall(named).CallID
		sp.answered[callID] = sp.steps
		sp.left--
		sp.outputs[callID] = it
	}
	if sp.srv.opts.Checkpoints != nil {
		sp.appended = append(sp.appended, items...) // for the checkpoint of the pause's answer
	}
	if sp.left > 0 {
		sp.applyLocked(lifecycle.Appended, nil, "", "")
	} else {
		durable := sp.st.Durable()
		sp.applyLocked(lifecycle.Answered, nil, "", "")
		if durable {
			sp.checkpointAnswerLocked() // journaled beside the step, which waits to be seen
		}
		sp.readyLocked()
		answered = true
		sp.appended = nil
		sp.stopTimerLocked()
		// Appending proves the client saw the pause and everything before
		// it: a resume from now on replays what follows, never the pause.
		sp.letStepGoLocked()
	}
	return answered, nil
}

// stepCall is the current step's call that an output naming callID
// answers; the zero Call when there is none.
func (sp *suspension) stepCall(callID string) protocol.Call {
	if i, ok := sp.byID[callID]; ok {
		return sp.step[i]
	}
	return protocol.Call{}
}

func (sp *suspension) stopTimerLocked() {
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
	if sp.sleep != nil {
		sp.sleep.Stop()
		sp.sleep = nil
	}
}
