package runtime

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
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
	creds string        // hash of the Authorization header of the connection that created it
	lane  string        // its stream_id, on every connection it reports to
	done  chan struct{} // closed when its loop has returned, at the rollout's end

	mu     lockrank.Mutex[lockrank.Suspension]
	st     lifecycle.State // its whole state (phase, link, checkpoint): changed only by applyLocked; guarded by mu
	sess   *session        // the connection it reports to, nil while detached (st.Link says whether it catches up); guarded by mu
	gone   chan struct{}   // closed when sess stops being that connection; guarded by mu
	expiry *time.Timer     // the resume window, while detached; guarded by mu

	// The current step's client calls, guarded by mu.
	steps    int                      // steps begun
	step     []protocol.Call          // in output order
	byID     map[string]protocol.Call // the step's calls by what an output names them by (call_id; a local shell call's id too)
	outputs  map[string]protocol.Item // call_id -> the output appended for it
	asked    bool                     // the loop has been given the step's calls, and not yet their outputs
	ready    bool                     // the last call of the step has its output (and, at a durable pause, the store the answer): the loop's to take
	left     int                      // calls of the step without an output
	answered map[string]int           // call_id -> the step it got its output in, over the rollout
	pauses   int                      // pauses so far: names the one timer is for
	timer    *time.Timer              // Suspension.Timeout of the current pause

	// The replay log, guarded by mu: frames since the client last appended
	// (appending proves it saw the pause).
	log      []frame
	logBytes int
	pack     framePacker // the log's frames' bytes
	enc      eventBuf    // the frame being put: guarded by the rollout's lock, not mu
	sent     int         // sequence_number of the last frame put to a connection
	lastDone *frame      // the current pause's response.done
	paused   bool        // it has paused once (a fork's beginning is over)

	// Durability (suspension_durable.go), guarded by mu.
	epoch          uint64          // the epoch it writes its checkpoints at: 1, or one more than the server's it was taken over from
	sleep          *time.Timer     // Suspension.HibernateAfter of the current pause
	deadline       time.Time       // taken over: when its pause's Suspension.Timeout ends, counted from the pause's checkpoint
	lastCheckpoint *checkpointData // the pause last checkpointed, for the checkpoint of its answer
	appended       protocol.Items  // what the client appended at the current pause
	preAnswered    protocol.Items  // taken over with the pause answered: the items its first park takes
	wakes          []*wakeEvent    // woken (suspension_wake.go): the appends and cancels its first park takes
	timeoutAt      time.Time       // when the current pause's Suspension.Timeout ends
	parkedCh       chan struct{}   // closed when it parks, for a takeover waiting to replay its pause

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
	v := sp.st.Apply(ev, from)
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

// errNoSuspended: no suspended rollout by that id reports to this
// connection (it never did, it ended, or another connection took it).
func errNoSuspended(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' on this connection.", id)
}

// errResumeNotFound: nothing to resume by that id under these credentials.
func errResumeNotFound(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' to resume under these credentials.", id)
}

// errResumeGone: the rollout a resume was admitted for ended, or its
// resume window passed, before the resume's turn came.
func errResumeGone(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No suspended response '%s' to resume: it ended, or its resume window passed.", id)
}

// errAppendNotParked: outputs for a rollout that is not waiting for them.
func errAppendNotParked(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not waiting for tool outputs: append only after response.done.", id)
}

// errForkNotParked: a fork of a rollout not parked on its client's calls.
func errForkNotParked(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not waiting for tool outputs: fork it after its response.done.", id)
}

// errForkAppended: a fork of a pause some of whose outputs are in.
func errForkAppended(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' has outputs of this pause appended already: fork it before appending any.", id)
}

// errForkHostedRunning: a fork of a pause whose step still runs a hosted
// tool.
func errForkHostedRunning(id, tool string) *protocol.Error {
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is still running a hosted tool of its step (%s): fork it once the step waits on its client's calls alone.", id, tool)
}

// errNotSuspendedRollout: an append or a fork naming a cached-state
// response running on this connection.
func errNotSuspendedRollout(id string, fork bool) *protocol.Error {
	if fork {
		return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' is not a suspended rollout: fork a suspended response parked on its client's calls.", id)
	}
	return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
		"Response '%s' is not a suspended rollout: it takes no tool outputs by response.append (send them with response.create and previous_response_id).", id)
}

// errOutputTwice: an append whose output answers a call answered already.
func errOutputTwice(param, callID string) *protocol.Error {
	return protocol.Invalid(protocol.CodeDuplicateToolOutput, param+".call_id",
		"The tool call '%s' already has an output.", callID)
}

// errNoPendingCall: an append whose output answers no call of the pause.
func errNoPendingCall(param, callID, id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeToolCallNotFound, param+".call_id",
		"No pending tool call with call_id '%s' in response '%s'.", callID, id)
}

// errSteerRole: an appended message that is not the user's.
func errSteerRole(param string, role protocol.Role) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidValue, param+".role",
		"Only user messages may steer a suspended response, not '%s' messages.", role)
}

// errAppendItem: an appended item that is neither an output nor a message.
func errAppendItem(param string, typ protocol.ItemType) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidValue, param+".type",
		"response.append takes tool outputs (function_call_output, custom_tool_call_output, shell_call_output, …) and user messages, not '%s'.", typ)
}

// errLaneSuspended: a create, or a fork, onto a lane whose rollout is
// parked on its client.
func errLaneSuspended(id string, fork bool) *protocol.Error {
	if fork {
		return protocol.Invalid(protocol.CodeStreamSuspended, "stream_id",
			"Response '%s' on this lane is suspended, waiting for tool outputs: fork onto a lane of its own.", id)
	}
	return protocol.Invalid(protocol.CodeStreamSuspended, "stream_id",
		"Response '%s' on this stream is suspended, waiting for tool outputs: send response.append, or response.cancel it, before creating another response on the stream.", id)
}

// errForkOwnStream: on WebTransport, a fork asked on the stream of the
// rollout it forks.
func errForkOwnStream(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamSuspended, "response_id",
		"Response '%s' is this stream's: open another stream and send response.fork on it.", id)
}

// errOtherLane: an event on another lane than the rollout's.
func errOtherLane(id, lane, got string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
		"Response '%s' belongs to stream '%s', not '%s'.", id, lane, got)
}

// errResumeLane: a resume on another lane than the rollout's.
func errResumeLane(id, lane string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
		"Response '%s' belongs to stream '%s': resume it with that stream_id.", id, lane)
}

// frame is one encoded event and its sequence_number.
type frame struct {
	seq int
	b   []byte
}

// suspend makes ro a suspended rollout reporting to sess on lane. It
// refuses when the server already holds Suspension.Max of them: each may
// outlive its connection, so they are bounded server-wide. start runs it.
func (s *Server) suspend(ro *rollout, sess *session, lane string) (*suspension, <-chan struct{}, *protocol.Error) {
	return s.suspendAt(ro, sess, lane, lifecycle.New(s.opts.Checkpoints != nil))
}

// suspendAt is suspend for a rollout whose state begins at st: one taken
// over from its checkpoint (lifecycle.Restored).
func (s *Server) suspendAt(ro *rollout, sess *session, lane string, st lifecycle.State) (*suspension, <-chan struct{}, *protocol.Error) {
	sp := &suspension{srv: s, ro: ro, id: ro.ID(), creds: sess.creds, lane: lane, done: make(chan struct{}),
		sess: sess, gone: make(chan struct{}), sent: -1, epoch: 1, st: st}
	ro.client = sp
	ro.everyDelta = ro.everyDelta || s.opts.Checkpoints != nil
	if ro.paused != nil { // restored: the calls answered before the pause stay answered, counted by the steps before it
		sp.answered, sp.steps = maps.Clone(ro.paused.Answered), max(ro.paused.ClientSteps-1, 0)
	}
	if perr := s.register(sp); perr != nil {
		return nil, nil, perr
	}
	return sp, sp.gone, nil
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
	defer close(sp.done)
	defer sp.mu.Unlock()
	sp.applyLocked(lifecycle.End, nil, "", "")
	sp.stopTimerLocked()
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
