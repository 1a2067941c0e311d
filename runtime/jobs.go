package runtime

import (
	"bytes"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
)

// A job is one thing a lane runs in its turn: a response.create, the
// refusal of one (answered in lane order, so that it cannot be mistaken for
// an earlier turn's), a fork onto the lane, or a resume of a suspended
// rollout that reports here from then on (or of one that has ended: its
// tail). The lane's worker runs its jobs one at a time (runJob).
type job interface {
	// run runs the job on ln and returns its last frame: the terminal
	// event, or an error event; nil when the connection is ending.
	run(sess *session, ln *lane) (last []byte)
	// bytes is what the job holds of the connection's Limits.ConnBytes account
	// while it waits and runs: a create's frame size.
	bytes() int
	// inFlight reports whether it takes one of the connection's in-flight
	// slots (Limits.MaxInFlight) while it runs: every job but a refusal.
	inFlight() bool
}

// createJob is a response.create.
type createJob struct {
	req      *protocol.CreateRequest
	received time.Time
	decodeUS int64 // microseconds spent decoding the frame
	size     int   // the frame's size, on the connection's Limits.ConnBytes account
}

func (j *createJob) bytes() int     { return j.size }
func (j *createJob) inFlight() bool { return true }

func (j *createJob) run(sess *session, ln *lane) []byte {
	if sess.srv.closing() { // queued before Shutdown, not begun: refused
		return errorFrame(errShutdown(), ln.id)
	}
	return sess.create(ln, j)
}

// refusedJob is a create refused on arrival, answered in its turn.
type refusedJob struct {
	refusal *protocol.Error
	parent  string // the refused create's previous_response_id: the refusal evicts it
}

func (j *refusedJob) bytes() int     { return 0 } // a refusal holds no request
func (j *refusedJob) inFlight() bool { return false }

func (j *refusedJob) run(sess *session, ln *lane) []byte {
	if j.parent != "" { // a continuation refused before it ran failed too
		parent, _ := sess.scope.lookup(j.parent)
		sess.scope.evictAfterFailure(ln, parent)
	}
	return errorFrame(j.refusal, ln.id)
}

// forkJob is a fork of a parked rollout onto the lane (response.fork).
type forkJob struct {
	pause    *pauseState
	tree     *treeFork // a multi-agent response's, instead of pause
	received time.Time
}

func (j *forkJob) bytes() int                         { return 0 }
func (j *forkJob) inFlight() bool                     { return true }
func (j *forkJob) run(sess *session, ln *lane) []byte { return sess.forkOn(ln, j) }

// resumeJob is a response.resume of a suspended rollout: it reports to
// this connection from its turn on.
type resumeJob struct {
	sp    *suspension
	after *int // the last sequence_number the resuming client received
}

func (j *resumeJob) bytes() int                         { return 0 }
func (j *resumeJob) inFlight() bool                     { return true }
func (j *resumeJob) run(sess *session, ln *lane) []byte { return sess.resumeOn(ln, j) }

// tailJob is a response.resume of a suspended rollout that has ended: its
// tail is read back.
type tailJob struct {
	tail  *tail
	after *int // the last sequence_number the resuming client received
}

func (j *tailJob) bytes() int     { return 0 }
func (j *tailJob) inFlight() bool { return true }
func (j *tailJob) run(sess *session, ln *lane) []byte {
	defer sess.resumed(ln)
	return sess.replayTail(j.tail, j.after)
}

// jobSink is a cached-state response's sink: events go to the session, the
// terminal one is held for runJob, which sends it once the response is
// settled.
type jobSink struct {
	sess  *session
	enc   outbox.EventBuf // under the rollout's lock
	last  []byte          // written under the rollout's lock; read once run has returned
	after [][]byte        // the frames that follow last, as last
}

func (s *jobSink) put(ev protocol.Event, acct *outbox.Delivery) error {
	b, err := s.enc.Encode(ev)
	if err != nil {
		return err
	}
	if protocol.Terminal(ev) {
		s.last = bytes.Clone(b)
		return nil
	}
	if s.last != nil { // after the terminal event (response.steer.pending): sent after it
		s.after = append(s.after, bytes.Clone(b))
		return nil
	}
	return s.sess.sendCopy(b, acct)
}

func (s *jobSink) behind(acct *outbox.Delivery) bool { return acct.Behind() }
