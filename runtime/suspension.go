package runtime

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// maxDetachedBytes bounds the frames a suspended rollout keeps for replay; a
// detached rollout that would keep more is cancelled.
const maxDetachedBytes = 8 << 20

// suspension is a suspended rollout as the server holds it, and the one
// owner of its state: the connection it reports to, whether it is parked on
// client calls, the frames a resuming client may have missed, and its
// result. Every event that changes its state, or is refused by it, is
// decided here from one table (suspRules, decide), and its refusals are
// built here; a session keeps a reference per lane and asks. The state
// machine is drawn in doc.go.
//
// A suspension is also its rollout's client Tool (and its sink): the
// rollout's own goroutine parks on a step's client calls (park) until
// response.append has delivered every output; no goroutine waits per call.
//
// The rollout runs on a goroutine of the server's, so that it outlives its
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
	done  chan struct{} // closed when run has returned

	mu     lockrank.Mutex[lockrank.Suspension]
	state  suspState     // guarded by mu
	sess   *session      // the connection it reports to, nil while detached; guarded by mu
	gone   chan struct{} // closed when sess stops being that connection; guarded by mu
	expiry *time.Timer   // the resume window, while detached; guarded by mu

	// The current step's client calls, guarded by mu.
	steps    int                      // steps begun
	step     []protocol.Call          // in output order
	byID     map[string]protocol.Call // the step's calls by what an output names them by (call_id; a local shell call's id too)
	outputs  map[string]protocol.Item // call_id -> the output appended for it
	answer   chan struct{}            // closed when the last call of the step has its output
	left     int                      // calls of the step without an output
	answered map[string]int           // call_id -> the step it got its output in, over the rollout
	pauses   int                      // pauses so far: names the one timer is for
	timer    *time.Timer              // Suspension.Timeout of the current pause

	// The replay log, guarded by mu: frames since the client last appended
	// (appending proves it saw the pause).
	log       []frame
	logBytes  int
	pack      framePacker // the log's frames' bytes
	enc       eventBuf    // the frame being put: guarded by the rollout's lock, not mu
	sent      int         // sequence_number of the last frame put to a connection
	lastDone  *frame      // the current pause's response.done
	paused    bool        // it has paused once (a fork's beginning is over)
	replaying bool        // a resuming connection is catching up from the log; new frames wait there

	// Durability (durable.go), guarded by mu.
	epoch          uint64          // the epoch it writes its checkpoints at: 1, or one more than the server's it was taken over from
	holding        bool            // the pause's checkpoint is being written: its response.done waits in the log
	checkpointed   bool            // a checkpoint of it is in the store
	durablePause   bool            // the pause it is parked at is that checkpoint: Shutdown may hand it over
	released       release         // why it left this server for its checkpoint, if it did: it sends nothing more
	sleep          *time.Timer     // Suspension.HibernateAfter of the current pause
	deadline       time.Time       // taken over: when its pause's Suspension.Timeout ends, counted from the pause's checkpoint
	announced      bool            // taken over at a pause its response.done announced already: its first park is silent
	lastCheckpoint *checkpointData // the pause last checkpointed, for the checkpoint of its answer
	appended       protocol.Items  // what the client appended at the current pause
	preAnswered    protocol.Items  // taken over with the pause answered: the items its first park takes
	wakes          []*wakeEvent    // woken (wake.go): the appends and cancels its first park takes
	waking         bool            // woken, and the events queued for it not all taken yet: it does not hibernate
	timeoutAt      time.Time       // when the current pause's Suspension.Timeout ends
	parkedCh       chan struct{}   // closed when it parks, for a takeover waiting to replay its pause

	// What run left, once it has returned; guarded by mu.
	terminal []byte // the terminal frame, held for the connection that settles the rollout
	conv     *conversation
}

// suspState is where a suspended rollout is in its life. Whether it is
// attached to a connection, and whether that connection is still catching
// up from the replay log, is told by suspension.sess and .replaying.
type suspState int

const (
	suspRunning suspState = iota // sampling, running hosted tools, or ending
	suspPausing                  // its loop waits on the step's client calls; the pause's response.done waits behind the step's held output_item.done events
	suspParked                   // response.done is out; waiting for the client's outputs
	suspEnded                    // run has returned; the result waits for a connection to settle it
	suspSettled                  // a connection took the result; gone from the server
	suspExpired                  // detached past the resume window; cancelled and gone
	numSuspStates
)

func (st suspState) String() string {
	return [...]string{"running", "pausing", "parked", "ended", "settled", "expired"}[st]
}

// suspEvent is what can happen to a suspended rollout: its client's events,
// the end of the connection it reports to, its loop's progress, its timers,
// the server's shutdown.
type suspEvent int

const (
	evPark     suspEvent = iota // the loop waits on its step's client calls
	evPause                     // the pause's response.done goes out
	evAppend                    // response.append with outputs for the pending calls
	evAnswered                  // the last pending call has its output: the loop runs again
	evCancel                    // response.cancel
	evFork                      // response.fork
	evCreate                    // response.create on the rollout's lane
	evResume                    // response.resume
	evDrop                      // the connection it reports to ends
	evTimeout                   // Suspension.Timeout passed on the pause
	evExpire                    // the resume window passed while detached
	evEnd                       // run returned
	evSettle                    // its connection takes the result
	evShutdown                  // the server's drain is over
	evSteer                     // response.steer
	numSuspEvents
)

func (ev suspEvent) String() string {
	return [...]string{"park", "pause", "append", "answered", "cancel", "fork", "create", "resume",
		"drop", "timeout", "expire", "end", "settle", "shutdown", "steer"}[ev]
}

// verdict is what an event does in a state.
type verdict int

const (
	allow           verdict = iota // the event applies; the state becomes the rule's
	ignore                         // nothing changes: a timer or a teardown that lost a race
	refuseNotFound                 // response_not_found: no such suspended response here
	refuseNotParked                // response_not_suspended: it is not waiting for tool outputs
	refuseLaneBusy                 // stream_suspended: a create on a lane parked on its client
	refuseLane                     // stream_id_mismatch: the rollout runs on another lane
	refuseCompleted                // response_already_completed: a steer of a rollout that has ended
)

// suspRule is an event's verdict in a state, and the state it leads to.
type suspRule struct {
	v  verdict
	to suspState
}

// suspRules is the state machine doc.go draws: every event in every state.
// Client events (append, cancel, fork, resume, create) are also judged by
// who sends them (see decide).
var suspRules = func() (t [numSuspStates][numSuspEvents]suspRule) {
	to := func(st suspState) suspRule { return suspRule{allow, st} }
	no := func(v verdict) suspRule { return suspRule{v: v} }
	t[suspRunning] = [numSuspEvents]suspRule{
		evPark: to(suspPausing), evPause: no(ignore), evAppend: no(refuseNotParked), evAnswered: no(ignore),
		evCancel: to(suspRunning), evFork: no(refuseNotParked), evCreate: to(suspRunning), evResume: to(suspRunning),
		evDrop: to(suspRunning), evTimeout: no(ignore), evExpire: to(suspExpired), evEnd: to(suspEnded),
		evSettle: no(ignore), evShutdown: to(suspRunning), evSteer: to(suspRunning)}
	t[suspPausing] = [numSuspEvents]suspRule{
		evPark: no(ignore), evPause: to(suspParked), evAppend: no(refuseNotParked), evAnswered: no(ignore),
		evCancel: to(suspRunning), evFork: no(refuseNotParked), evCreate: to(suspPausing), evResume: to(suspPausing),
		evDrop: to(suspPausing), evTimeout: no(ignore), evExpire: to(suspExpired), evEnd: to(suspEnded),
		evSettle: no(ignore), evShutdown: to(suspRunning), evSteer: to(suspPausing)}
	t[suspParked] = [numSuspEvents]suspRule{
		evPark: no(ignore), evPause: no(ignore), evAppend: to(suspParked), evAnswered: to(suspRunning),
		evCancel: to(suspRunning), evFork: to(suspParked), evCreate: no(refuseLaneBusy), evResume: to(suspParked),
		evDrop: to(suspParked), evTimeout: to(suspRunning), evExpire: to(suspExpired), evEnd: to(suspEnded),
		evSettle: no(ignore), evShutdown: to(suspRunning), evSteer: to(suspParked)}
	t[suspEnded] = [numSuspEvents]suspRule{
		evPark: no(ignore), evPause: no(ignore), evAppend: no(refuseNotFound), evAnswered: no(ignore),
		evCancel: no(refuseNotFound), evFork: no(refuseNotFound), evCreate: to(suspEnded), evResume: to(suspEnded),
		evDrop: to(suspEnded), evTimeout: no(ignore), evExpire: to(suspExpired), evEnd: no(ignore),
		evSettle: to(suspSettled), evShutdown: no(ignore), evSteer: no(refuseCompleted)}
	for _, gone := range []suspState{suspSettled, suspExpired} {
		t[gone] = [numSuspEvents]suspRule{
			evPark: no(ignore), evPause: no(ignore), evAppend: no(refuseNotFound), evAnswered: no(ignore),
			evCancel: no(refuseNotFound), evFork: no(refuseNotFound), evCreate: to(gone), evResume: no(refuseNotFound),
			evDrop: no(ignore), evTimeout: no(ignore), evExpire: no(ignore), evEnd: no(ignore),
			evSettle: no(ignore), evShutdown: no(ignore), evSteer: no(refuseCompleted)}
	}
	return t
}()

// access is how the connection an event comes from stands to the rollout.
type access struct {
	here     bool // it is the connection the rollout reports to
	lane     bool // the event names the rollout's lane
	creds    bool // it bears the credentials the rollout was created with
	attached bool // the rollout reports to some connection
}

// decide is what ev, sent as a says, does to a suspended rollout in state
// st. Events of the connection the rollout reports to (append, cancel,
// fork) are refused, as response_not_found, to any other, and on another
// lane; a resume is for another connection with the same credentials; a
// create is refused only on the lane of a rollout parked on this
// connection. Teardowns and timers that lost a race are ignored: a drop
// or a settle from a connection the rollout no longer reports to, the
// resume window of a rollout attached again.
func decide(st suspState, ev suspEvent, a access) suspRule {
	r := suspRules[st][ev]
	switch ev {
	case evAppend, evCancel, evFork:
		switch {
		case !a.here || r.v == refuseNotFound:
			return suspRule{v: refuseNotFound}
		case !a.lane:
			return suspRule{v: refuseLane}
		}
	case evSteer: // it names no lane: the rollout's answers it
		if !a.here {
			return suspRule{v: refuseNotFound}
		}
	case evResume:
		if a.here || !a.creds {
			return suspRule{v: refuseNotFound}
		}
	case evCreate:
		if !a.here {
			return suspRule{allow, st}
		}
	case evDrop, evSettle:
		if !a.here {
			return suspRule{v: ignore}
		}
	case evExpire:
		if a.attached {
			return suspRule{v: ignore}
		}
	}
	return r
}

// decideLocked decides ev from sess on lane (nil, "": the rollout's own
// loop, a timer, the server) and applies the state it leads to; its
// refusal, if it is one, as the client reads it. The caller holds mu.
func (sp *suspension) decideLocked(ev suspEvent, sess *session, lane string, creds string) (suspRule, *protocol.Error) {
	r := decide(sp.state, ev, access{here: sess != nil && sp.sess == sess, lane: lane == sp.lane, creds: creds == sp.creds, attached: sp.sess != nil})
	switch r.v {
	case allow:
		sp.state = r.to
		return r, nil
	case refuseNotFound:
		if ev == evResume {
			return r, errResumeNotFound(sp.id)
		}
		return r, errNoSuspended(sp.id)
	case refuseNotParked:
		if ev == evFork {
			return r, errForkNotParked(sp.id)
		}
		return r, errAppendNotParked(sp.id)
	case refuseLaneBusy:
		return r, errLaneSuspended(sp.id, ev)
	case refuseLane:
		return r, errOtherLane(sp.id, sp.lane, lane)
	case refuseCompleted:
		return r, errSteerCompleted(sp.id)
	}
	return r, nil
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
func errNotSuspendedRollout(id string, ev suspEvent) *protocol.Error {
	if ev == evFork {
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
func errLaneSuspended(id string, ev suspEvent) *protocol.Error {
	if ev == evFork {
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
	sp := &suspension{srv: s, ro: ro, id: ro.ID(), creds: sess.creds, lane: lane, done: make(chan struct{}),
		sess: sess, gone: make(chan struct{}), sent: -1, epoch: 1}
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

// start runs the rollout on a server goroutine.
func (sp *suspension) start() {
	go func() {
		defer sp.srv.wg.Done() // added by register
		var conv *conversation
		var err error
		defer func() {
			if p := recover(); p != nil {
				sp.srv.log.Error("suspended rollout panicked", "panic", p)
				err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
					"The server had an error while processing the request.")
			}
			if sp.asleep() {
				sp.srv.suspended.sleep(sp, sp.srv.checkpointTTL()) // first: a resume from now on finds it in the store
			}
			sp.ended(conv, err)
		}()
		conv, err = sp.ro.run(sp.srv.ctx, sp)
	}()
}

// ended records what run left.
func (sp *suspension) ended(conv *conversation, err error) {
	sp.mu.Lock()
	defer close(sp.done)
	defer sp.mu.Unlock()
	sp.decideLocked(evEnd, nil, "", "")
	sp.stopTimerLocked()
	sp.conv = conv
	sp.dropCheckpointLocked()
	if sp.terminal == nil && err != nil && !errors.Is(err, context.Canceled) && sp.released == stayed {
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
	sp.decideLocked(evShutdown, nil, "", "") // it runs to its end: it takes no more outputs
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
	return sp.state == suspParked
}
