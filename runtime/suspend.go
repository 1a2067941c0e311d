package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// SuspendBeta is the OpenAI-Beta value that makes suspended rollouts the
// default on a connection (the prototype's protocol version).
const SuspendBeta = "responses_websockets=2026-02-04"

// maxDetachedBytes bounds the frames a detached rollout keeps for resume; a
// rollout that would produce more is cancelled.
const maxDetachedBytes = 8 << 20

var (
	errResumeExpired = errors.New("runtime: suspended response not resumed within the resume window")
	errDetachedFull  = errors.New("runtime: detached response produced more events than a resume can replay")
)

// link ties a suspended rollout to the connection it reports to. A suspended
// rollout runs on its own goroutine, owned by the server, so that it
// survives its connection: detached, it keeps its frames until a new
// connection with the same credentials sends response.resume, or the resume
// window ends and it is cancelled.
type link struct {
	srv   *Server
	ro    *Rollout
	creds string        // hash of the Authorization header of the connection that created it
	lane  string        // its stream_id, on every connection it reports to
	done  chan struct{} // closed when the rollout's Run has returned

	mu       sync.Mutex
	sess     *Session      // guarded by mu; nil while detached
	log      []frame       // frames since the client last appended, for replay on resume; guarded by mu
	logBytes int           // guarded by mu
	sent     int           // sequence_number of the last frame queued to a connection, guarded by mu
	lastDone *frame        // the pending response.done, guarded by mu
	terminal []byte        // the terminal frame, held for the job that settles the rollout; guarded by mu
	conv     *conversation // what the rollout left, once done; guarded by mu
	settled  bool          // a session took the result, guarded by mu
	expired  bool          // the resume window ended, guarded by mu
	expiry   *time.Timer   // the resume window while detached, guarded by mu
}

// frame is one encoded event and its sequence_number.
type frame struct {
	seq int
	b   []byte
}

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

// startSuspended runs ro on a server-owned goroutine, reporting to sess.
// It refuses when the server already holds MaxSuspended of them: each may
// outlive its connection, so they are bounded server-wide.
func (s *Server) startSuspended(ro *Rollout, sess *Session, lane string) (*link, *protocol.Error) {
	l := &link{srv: s, ro: ro, creds: sess.creds, lane: lane, sess: sess, sent: -1, done: make(chan struct{})}
	ro.client.suspend = true
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerError, "", "The server is shutting down.")
	}
	if len(s.suspended) >= s.opts.MaxSuspended {
		s.mu.Unlock()
		return nil, protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTooManySuspended, "suspend",
			"This server already holds %d suspended rollouts. Finish or cancel one, or retry without 'suspend'.", s.opts.MaxSuspended)
	}
	s.suspended[ro.ID()] = l
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		var conv *conversation
		var err error
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("suspended rollout panicked", "panic", p)
				err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
					"The server had an error while processing the request.")
			}
			l.mu.Lock()
			l.conv = conv
			if l.terminal == nil && err != nil && !errors.Is(err, context.Canceled) {
				// It ended without a terminal event for a reason the client
				// can be told (a panic, a replay log overflow while
				// detached; not a shutdown or an expired resume window): the
				// job that settles it answers with an error event, as runJob
				// does for a cached-state response, rather than leave the
				// client waiting.
				l.terminal = errorFrame(protocol.AsError(err), l.lane)
			}
			l.mu.Unlock()
			close(l.done)
		}()
		conv, err = ro.Run(s.ctx, l.sink)
	}()
	return l, nil
}

// sink is the rollout's Sink. Every frame goes to the attached connection
// and into the replay log, which holds what the client may not have seen:
// the frames since its last response.append (appending proves it saw the
// pause). Detached, frames only go to the log. The terminal frame is held
// back for the job that settles the rollout on its connection.
func (l *link) sink(ev protocol.Event) error {
	h := protocol.Header(ev)
	h.StreamID = l.lane
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f := frame{seq: h.SequenceNumber, b: b}
	// Holding mu across the send keeps frames in order against a concurrent
	// attach or detach; only those wait on it.
	l.mu.Lock()
	defer l.mu.Unlock()
	switch protocol.Type(ev) {
	case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		l.terminal = b
		return nil
	case protocol.EventDone:
		l.lastDone = &f
	case protocol.EventInProgress:
		if f.seq > 1 { // resuming after a pause: the client has seen everything before
			l.log, l.logBytes, l.lastDone = nil, 0, nil
		}
	}
	l.log = append(l.log, f)
	l.logBytes += len(b)
	if l.sess != nil && l.sess.send(b) == nil {
		l.sent = f.seq
		for l.logBytes > maxDetachedBytes && len(l.log) > 1 { // sent long ago: beyond replay
			l.logBytes -= len(l.log[0].b)
			l.log = l.log[1:]
		}
		return nil
	}
	// Detached, or the connection is going away: the log keeps it for response.resume.
	if l.logBytes > maxDetachedBytes {
		return errDetachedFull
	}
	return nil
}

// detach unlinks the rollout from a connection that ended and starts the
// resume window.
func (l *link) detach(sess *Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != sess || l.settled {
		return
	}
	l.sess = nil
	l.expiry = time.AfterFunc(l.srv.opts.ResumeWindow, l.expire)
}

// expire ends a rollout nobody resumed in time.
func (l *link) expire() {
	l.mu.Lock()
	if l.sess != nil || l.settled {
		l.mu.Unlock()
		return
	}
	l.expired = true
	l.mu.Unlock()
	l.ro.abort(errResumeExpired)
	l.srv.unregister(l)
}

// attach reports to sess from now on. It replays the logged frames after
// the client's last sequence_number (after; nil means after the last frame
// the server sent), and the pending response.done in any case when the
// rollout is parked on it. A rollout still attached to another connection is
// taken over: a client whose connection died half-open resumes before the
// server notices the drop.
func (l *link) attach(sess *Session, after *int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == sess || l.expired || l.settled {
		return false
	}
	if l.expiry != nil {
		l.expiry.Stop()
		l.expiry = nil
	}
	l.sess = sess
	from := l.sent
	if after != nil {
		from = *after
	}
	var replay [][]byte
	if d := l.lastDone; d != nil && d.seq <= from && l.ro.client.Parked() {
		replay = append(replay, d.b)
	}
	for _, f := range l.log {
		if f.seq > from {
			replay = append(replay, f.b)
			l.sent = f.seq
		}
	}
	for _, b := range replay {
		sess.send(b)
	}
	return true
}

// settle hands the finished rollout's result to sess, if sess is where it
// reports; the rollout then leaves the registry.
func (l *link) settle(sess *Session) (conv *conversation, terminal []byte, ok bool) {
	l.mu.Lock()
	if l.sess != sess || l.settled {
		l.mu.Unlock()
		return nil, nil, false
	}
	l.settled = true
	conv, terminal = l.conv, l.terminal
	l.mu.Unlock()
	l.srv.unregister(l)
	return conv, terminal, true
}

func (l *link) attachedTo(sess *Session) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess == sess
}

func (s *Server) unregister(l *link) {
	s.mu.Lock()
	if s.suspended[l.ro.ID()] == l {
		delete(s.suspended, l.ro.ID())
	}
	s.mu.Unlock()
}

func (s *Server) lookupSuspended(id string) *link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended[id]
}
