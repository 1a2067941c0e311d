package runtime

import (
	"bytes"
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
	buf      [][]byte      // frames made while detached, guarded by mu
	bufBytes int           // guarded by mu
	lastDone []byte        // the latest response.done frame, guarded by mu
	terminal []byte        // the terminal frame, held for the job that settles the rollout; guarded by mu
	conv     *conversation // what the rollout left, once done; guarded by mu
	runErr   error         // guarded by mu
	settled  bool          // a session took the result, guarded by mu
	expired  bool          // the resume window ended, guarded by mu
	expiry   *time.Timer   // the resume window while detached, guarded by mu
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
func (s *Server) startSuspended(ro *Rollout, sess *Session, lane string) (*link, bool) {
	l := &link{srv: s, ro: ro, creds: sess.creds, lane: lane, sess: sess, done: make(chan struct{})}
	ro.client.suspend = true
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.suspended[ro.ID()] = l
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("suspended rollout panicked", "panic", p)
			}
			close(l.done)
		}()
		conv, err := ro.Run(s.ctx, l.sink)
		l.mu.Lock()
		l.conv, l.runErr = conv, err
		l.mu.Unlock()
	}()
	return l, true
}

// sink is the rollout's Sink: frames go to the attached connection, or into
// the resume buffer while detached. The terminal frame is held back for the
// job that settles the rollout on its connection.
func (l *link) sink(ev protocol.Event) error {
	protocol.Header(ev).StreamID = l.lane
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// Holding mu across the send keeps frames in order against a concurrent
	// attach or detach; only those wait on it.
	l.mu.Lock()
	defer l.mu.Unlock()
	switch protocol.Type(ev) {
	case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		l.terminal = b
		return nil
	case protocol.EventDone:
		l.lastDone = b
	}
	if l.sess != nil && l.sess.send(b) == nil {
		return nil
	}
	// Detached, or the connection is going away: keep it for response.resume.
	if l.bufBytes+len(b) > maxDetachedBytes {
		return errDetachedFull
	}
	l.buf = append(l.buf, b)
	l.bufBytes += len(b)
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
	l.ro.cancel(errResumeExpired)
	l.srv.unregister(l)
}

// attach reports to sess from now on: it sends the pending response.done
// again (if the rollout is parked on it) and every frame made while detached.
// A rollout still attached to another connection is taken over: a client
// whose connection died half-open resumes before the server notices the drop.
func (l *link) attach(sess *Session) bool {
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
	replay := l.buf
	if l.lastDone != nil && l.ro.client.Parked() && !containsFrame(replay, l.lastDone) {
		replay = append([][]byte{l.lastDone}, replay...)
	}
	l.buf, l.bufBytes = nil, 0
	for _, b := range replay {
		sess.send(b)
	}
	return true
}

func containsFrame(frames [][]byte, f []byte) bool {
	for _, b := range frames {
		if bytes.Equal(b, f) {
			return true
		}
	}
	return false
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
