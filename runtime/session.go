package runtime

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// maxEvicted bounds the ids a session remembers as evicted.
const maxEvicted = 1024

// outQueueFrames is a session's soft bound on frames queued for its client
// (see outbox).
const outQueueFrames = 1024

// session is one connection's lanes: a WebSocket's (named by stream_id),
// or one WebTransport stream, which is one lane. It holds their FIFO
// queues and what runs on them; the cache and the limits are its scope's,
// which the streams of one WebTransport connection share.
//
// The read loop runs on the session's own goroutine and never waits on a
// rollout: it takes only locks that nobody holds across a wait. Each lane
// has one worker goroutine that runs its responses in order; one writer
// goroutine owns the connection's write side, and one closer closes it when
// the session is stopped. Everything the session starts is joined before
// run returns.
type session struct {
	srv     *Server
	conn    FrameConn
	scope   *connScope
	started time.Time
	creds   string // hash of the Authorization header: suspended rollouts resume only under it
	tenant  string // its key's tenant, "" without keys
	suspend bool   // suspended rollouts by default (OpenAI-Beta: responses_websockets=2026-02-04)
	// encoding is the frames' encoding, negotiated in the upgrade (or a
	// WebTransport stream's header). Every producer queues JSON (a
	// suspended rollout's replay log and tail may be read back on a
	// connection of either encoding); the writer transcodes.
	encoding protocol.Encoding
	// served and written are the responses created on the session and the
	// bytes written to it, for its access line.
	served, written atomic.Int64
	// writing is the frames of the batch being written, for WriteBatch to
	// charge once they are; the writer's alone.
	writing []outbox.Frame
	// transport is transportWS, or the label of the Connection the
	// session is a lane of (transportWT: a WebTransport stream).
	transport string
	// oneLane: the session is one lane of a Connection (a WebTransport
	// stream), which replaces stream_id; a frame that names another is
	// refused.
	oneLane bool

	ctx      context.Context    // cancelled when the session ends
	cancel   context.CancelFunc //
	out      *outbox.Outbox     // frames for the connection, written by the outbox's writer on demand
	wg       sync.WaitGroup     // lane workers, and lane resolvers (session_events.go)
	quit     chan struct{}      // closed by goAway: lanes finish the job in hand and stop
	quitOnce sync.Once

	stopOnce    sync.Once
	tooSlowOnce sync.Once
	closeStatus CloseStatus // set once by stop, before ctx ends; read by the closer after
	closeReason string      //

	mu    lockrank.Mutex[lockrank.Session]
	lanes map[string]*lane // guarded by mu; "" is the default lane
	named int              // named lanes, guarded by mu
}

// newSession makes the session of conn, whose upgrade request was r, in
// scope (nil: a scope of its own).
func newSession(s *Server, conn FrameConn, r *http.Request, enc protocol.Encoding, scope *connScope) *session {
	if scope == nil {
		scope = newConnScope(&s.opts, s.mem)
	}
	ctx, cancel := context.WithCancel(WithTenant(context.Background(), Tenant(r.Context())))
	sess := &session{
		srv: s, conn: conn, scope: scope, transport: transportWS, started: s.now(), tenant: Tenant(r.Context()),
		creds: credentials(r), suspend: suspendByDefault(r), encoding: enc,
		ctx: ctx, cancel: cancel, quit: make(chan struct{}),
		out:   s.newOutbox(),
		lanes: make(map[string]*lane),
	}
	// The writer runs while there are frames to write (writeBatch).
	sess.out.WriteOnDemand(sess)
	sess.out.HoldBy(s.holds)
	scope.join(sess)
	return sess
}

// run serves the connection until it ends, then joins every goroutine.
func (sess *session) run(reqCtx context.Context) {
	// The closer runs once the session ends (no goroutine waits for that
	// meanwhile: a connection holding a parked rollout costs its stack).
	closerDone := make(chan struct{})
	context.AfterFunc(sess.ctx, func() {
		defer close(closerDone)
		if sess.closeStatus != 0 {
			// Close sends the close frame and waits for the client's; the
			// read loop then returns.
			sess.conn.Close(sess.closeStatus, sess.closeReason)
		}
	})
	// Deferred, so that even a panic in the read loop joins the goroutines and
	// hands suspended rollouts to their resume window.
	defer sess.teardown(closerDone)
	if err := sess.readLoop(reqCtx); err != nil && !sess.conn.Ordinary(err) {
		sess.srv.log.Debug("connection read ended", "err", err)
	}
}

// stop ends the session; a non-zero status closes the connection with it
// (1001 at shutdown, 1008 for a client too slow). The first stop wins. It
// takes no lock but the outbox's, so a producer may call it under its own.
func (sess *session) stop(status CloseStatus, reason string) {
	sess.stopOnce.Do(func() {
		sess.closeStatus, sess.closeReason = status, reason
		sess.out.Close()
		sess.cancel()
	})
}

// teardown ends the session: it joins the lane workers, the writer and the
// closer, closes the socket and detaches the suspended rollouts following
// its lanes.
func (sess *session) teardown(closerDone <-chan struct{}) {
	sess.stop(0, "")
	sess.scope.leave(sess)
	sess.mu.Lock() // a push that saw the session open has counted its worker
	sess.mu.Unlock()
	sess.wg.Wait()
	<-sess.out.Done()
	<-closerDone
	sess.conn.Done()
	sess.mu.Lock()
	var sps []*suspension
	for _, ln := range sess.lanes {
		if sp := ln.occ.sp; sp != nil {
			sps = append(sps, sp)
		}
		ln.occupy(occupant{}) // nobody to tell at a kept place's timeout
	}
	sess.mu.Unlock()
	for _, sp := range sps {
		sp.detach(sess)
	}
}

// send queues a frame without waiting, on acct's account (nil for none):
// callers may hold their locks. A client that lets the queue reach its hard
// bound is too slow.
func (sess *session) send(b []byte, acct *outbox.Delivery) error {
	return sess.queued(sess.out.Put(b, acct))
}

// sendCopy is send for a frame in the caller's buffer (outbox.Outbox.PutCopy).
func (sess *session) sendCopy(b []byte, acct *outbox.Delivery) error {
	return sess.queued(sess.out.PutCopy(b, acct))
}

// queued is what send returns for the outbox's answer err: a client that
// let the queue reach its hard bound is too slow.
func (sess *session) queued(err error) error {
	if err == errSlowClient {
		sess.tooSlow()
	}
	return err
}

// flow waits, with no lock held, until the client has room for more frames:
// a replay (of a resumed rollout's log, or of a tail) keeps pace with its
// client this way; a rollout never waits. A queue that stays full for
// Timeouts.SlowClient means the client is not reading.
func (sess *session) flow(ctx context.Context) error {
	room := sess.out.Room()
	if room == nil {
		return nil
	}
	t := time.NewTimer(sess.srv.opts.Timeouts.SlowClient)
	defer t.Stop()
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-sess.ctx.Done():
		return errSessionClosed
	case <-t.C:
		sess.tooSlow()
		return errSlowClient
	}
}

// tooSlow is the slow-client rule, in one place: rather than buffer without
// bound or stall every lane, drop what is queued, tell the client why in one
// last error event (client_too_slow) and close the connection with a policy
// violation. Its suspended rollouts detach, to be resumed (their replay logs
// keep what was dropped).
func (sess *session) tooSlow() {
	sess.tooSlowOnce.Do(func() {
		sess.srv.log.Warn("closing slow client")
		sess.fail(protocol.Errorf(http.StatusRequestTimeout, protocol.CodeClientTooSlow, "",
			"The client did not read its events for %s: the connection is closed.", sess.srv.opts.Timeouts.SlowClient), ClosePolicy, "client too slow")
	})
}

// fail ends the session with one last error event: what is queued is
// dropped, the writer writes perr after the batch in its hands (within
// Timeouts.Write), then the connection closes with status and reason (a
// WebSocket close frame's, at most 123 bytes).
func (sess *session) fail(perr *protocol.Error, status CloseStatus, reason string) {
	sess.out.Finish(errorFrame(perr, ""))
	go func() {
		<-sess.out.Done()
		sess.stop(status, reason)
	}()
}

// sendError queues an error event for laneID.
func (sess *session) sendError(perr *protocol.Error, laneID string) {
	sess.send(errorFrame(perr, laneID), nil)
}

// errorFrame encodes the error event for laneID.
func errorFrame(perr *protocol.Error, laneID string) []byte {
	b, _ := protocol.Marshal(perr.WebSocketError(laneID))
	return b
}

// resolve finds previous_response_id in the connection cache, or hydrates it
// from the store. An id a failed continuation evicted stays unknown on this
// connection, stored or not. from says which it was ("cache" or "store").
func (sess *session) resolve(id string) (conv *conversation, from string, perr *protocol.Error) {
	conv, evicted := sess.scope.lookup(id)
	switch {
	case conv != nil:
		if perr := notInConversation(conv.response); perr != nil {
			return nil, "", perr
		}
		return conv, stateCache, nil
	case evicted:
		return nil, "", previousNotFound(id)
	}
	conv, perr = sess.srv.hydrate(sess.ctx, id, true)
	return conv, stateStore, perr
}

func formatAge(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return d.String()
}

// suspended reports whether req runs as a suspended rollout: asked for,
// the connection's default, or the multi-agent beta's waiting response.
func (sess *session) suspended(req *protocol.CreateRequest) bool {
	if req.Suspend != nil {
		return *req.Suspend
	}
	return sess.suspend || req.MultiAgentEnabled()
}
