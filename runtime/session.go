package runtime

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	// transport is transportWS, or the label of the Connection the
	// session is a lane of (transportWT: a WebTransport stream).
	transport string
	// oneLane: the session is one lane of a Connection (a WebTransport
	// stream), which replaces stream_id; a frame that names another is
	// refused.
	oneLane bool

	ctx      context.Context    // cancelled when the session ends
	cancel   context.CancelFunc //
	out      *outbox            // frames for the connection, written by the outbox's writer on demand
	wg       sync.WaitGroup     // lane workers, and the goroutines resolving appends' references (appendref.go)
	quit     chan struct{}      // closed by goAway: lanes finish the job in hand and stop
	quitOnce sync.Once

	stopOnce    sync.Once
	tooSlowOnce sync.Once
	closeStatus CloseStatus // set once by stop, before ctx ends; read by the closer after
	closeReason string      //

	mu     lockrank.Mutex[lockrank.Session]
	lanes  map[string]*lane   // guarded by mu; "" is the default lane
	named  int                // named lanes, guarded by mu
	waking map[string]*waking // wakes in progress by response id (wake.go), guarded by mu
	// behind holds, by lane, the events that wait behind an append whose
	// item references are being resolved (appendref.go). Guarded by mu.
	behind map[string][]laneEvent
}

// lane is one stream_id's FIFO of creates, and what runs on it.
type lane struct {
	id      string
	jobs    []job // the FIFO, guarded by session.mu; the scope bounds it (MaxQueued)
	working bool  // its worker runs (while jobs are queued or one runs), guarded by session.mu

	// The response running on the lane, guarded by session.mu: a
	// cached-state rollout, or a suspended rollout the lane follows (which
	// answers for itself whether it is still this connection's).
	ro *rollout
	sp *suspension
	// asleep is the id of the suspended rollout this lane followed until
	// it hibernated (wake.go), guarded by session.mu: the lane stays its,
	// and an append or cancel naming it wakes it here, as does
	// asleepTimer at the end of its pause's timeout.
	asleep      string
	asleepTimer *time.Timer
	asleepGen   int // counts the places kept: a timer of an earlier one does nothing

	// after are the frames that follow the last frame of the job running
	// (a cached-state turn's response.steer.pending after its
	// response.completed); only the lane's worker touches it.
	after [][]byte
}

// queueRefusal says why a create (fork: a fork) from sess may not queue on
// ln: the lane's suspended rollout is parked, or asleep, on this
// connection. The caller holds sess.mu.
func (ln *lane) queueRefusal(sess *session, fork bool) *protocol.Error {
	switch {
	case ln.sp != nil:
		return ln.sp.queueRefusal(sess, fork)
	case ln.asleep == "":
		return nil
	case fork:
		return errLaneSuspended(ln.asleep, true)
	}
	return errLaneSuspended(ln.asleep, false)
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
		out:   newOutbox(outQueueFrames, s.opts.Timeouts.SlowClient, s.now),
		lanes: make(map[string]*lane),
	}
	// The writer runs while there are frames to write (writeBatch).
	sess.out.writeOnDemand(sess)
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
		sess.out.close()
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
	<-sess.out.done()
	<-closerDone
	sess.conn.Done()
	sess.mu.Lock()
	var sps []*suspension
	for _, ln := range sess.lanes {
		if ln.sp != nil {
			sps = append(sps, ln.sp)
			ln.sp = nil
		}
		ln.clearAsleep() // nobody to tell at its timeout
	}
	sess.mu.Unlock()
	for _, sp := range sps {
		sp.detach(sess)
	}
}

// send queues a frame without waiting, on acct's account (nil for none):
// callers may hold their locks. A client that lets the queue reach its hard
// bound is too slow.
func (sess *session) send(b []byte, acct *delivery) error {
	return sess.queued(sess.out.put(b, acct))
}

// sendCopy is send for a frame in the caller's buffer (outbox.putCopy).
func (sess *session) sendCopy(b []byte, acct *delivery) error {
	return sess.queued(sess.out.putCopy(b, acct))
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
	room := sess.out.room()
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
	sess.out.finish(errorFrame(perr, ""))
	go func() {
		<-sess.out.done()
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

// enqueue puts a create on its lane, or refuses it at once when the
// connection is at a limit that queuing would not resolve.
func (sess *session) enqueue(ev *protocol.CreateEvent, size int, received time.Time, decodeUS int64) {
	var refusal *protocol.Error
	switch {
	case received.Sub(sess.started) >= sess.srv.opts.Timeouts.WSMaxAge:
		refusal = protocol.Invalid(protocol.CodeConnectionLimitReached, "",
			"Responses websocket connection limit reached (%s). Create a new websocket connection to continue.", formatAge(sess.srv.opts.Timeouts.WSMaxAge))
	case ev.Request.Background != nil && *ev.Request.Background:
		refusal = protocol.Invalid(protocol.CodeUnsupportedParameter, "background", "'background' is not supported over WebSocket.")
	default:
		refusal = sess.srv.admission.request(sess.tenant)
	}
	var j job = &createJob{req: ev.Request, received: received, decodeUS: decodeUS, size: size}
	if refusal != nil {
		j = &refusedJob{refusal: refusal, parent: ev.Request.PreviousResponseID}
	}
	sess.admit(ev.StreamID, j, func(ln *lane) *protocol.Error { return ln.queueRefusal(sess, false) })
}

// admit puts j on lane laneID, starting the lane if new, or refuses it at
// once (an error event) when the connection is at a limit that queuing
// would not resolve, or when check, called under mu, says why. It reports
// whether it did put it.
func (sess *session) admit(laneID string, j job, check func(*lane) *protocol.Error) (admitted bool) {
	if sess.srv.closing() {
		sess.sendError(errShutdown(), laneID)
		return false
	}
	if perr := sess.scope.reserve(j.bytes(), &sess.srv.opts); perr != nil {
		sess.sendError(perr, laneID)
		return false
	}
	sess.mu.Lock()
	ln, perr := sess.laneLocked(laneID)
	if perr == nil && check != nil {
		perr = check(ln)
	}
	sess.mu.Unlock()
	if perr != nil {
		sess.scope.release(j.bytes())
		sess.sendError(perr, laneID)
		return false
	}
	sess.push(ln, j)
	return true
}

// refuse answers a frame that could not be decoded: in its lane's order when
// the lane exists, at once otherwise. parent is the previous_response_id the
// frame continued from, if any: a failed continuation evicts it.
func (sess *session) refuse(laneID string, perr *protocol.Error, parent string, received time.Time) {
	sess.mu.Lock()
	ln, ok := sess.lanes[laneID]
	sess.mu.Unlock()
	if ok && sess.scope.reserve(0, &sess.srv.opts) == nil {
		sess.push(ln, &refusedJob{refusal: perr, parent: parent})
		return
	}
	sess.sendError(perr, laneID)
}

// laneLocked returns the lane for id, starting it if new.
func (sess *session) laneLocked(id string) (*lane, *protocol.Error) {
	if ln, ok := sess.lanes[id]; ok {
		return ln, nil
	}
	if id != "" {
		if sess.oneLane {
			return nil, protocol.Invalid(protocol.CodeInvalidStreamID, "stream_id",
				"On WebTransport each stream is one lane: omit stream_id, and open another stream for another lane.")
		}
		if sess.named >= sess.srv.opts.Limits.MaxLanes {
			return nil, protocol.Invalid(protocol.CodeStreamLimitReached, "stream_id",
				"This WebSocket connection has reached its maximum number of distinct stream IDs (%d). Reuse an existing stream_id or open a new WebSocket connection.", sess.srv.opts.Limits.MaxLanes)
		}
		sess.named++
	}
	ln := &lane{id: id}
	sess.lanes[id] = ln
	return ln, nil
}

// laneWorker runs a lane's jobs one at a time, in arrival order, until its
// queue is empty: push starts it, so that an idle lane (and an idle
// connection's every lane) holds no goroutine.
func (sess *session) laneWorker(ln *lane) {
	defer sess.wg.Done()
	for {
		j := sess.pop(ln)
		if j == nil {
			return // the queue is empty: pop let the worker go
		}
		select {
		case <-sess.quit: // a job taken as shutdown began is refused with the rest
			sess.refuseQueued(ln, j)
			return
		default:
			sess.runJob(ln, j)
		}
	}
}

// push puts j at the end of ln's queue and starts its worker if none runs. A lane's
// queue is a slice rather than a channel of MaxQueued places: a connection
// with many lanes (a rollout forked 64 ways) pays for the jobs it has.
//
// Once the session is ending no worker starts (teardown and goAway wait for
// the workers; quit is closed under mu, so no Add follows their Wait): a
// job pushed then is answered at once, as shutdown answers queued ones, or
// let go with the session.
func (sess *session) push(ln *lane, j job) {
	sess.mu.Lock()
	quitting := sess.ctx.Err() != nil || isClosed(sess.quit)
	if !quitting {
		ln.jobs = append(ln.jobs, j)
		if !ln.working {
			ln.working = true
			sess.wg.Add(1)
			go sess.laneWorker(ln)
		}
	}
	sess.mu.Unlock()
	if quitting {
		sess.scope.release(j.bytes())
		if sess.ctx.Err() == nil {
			sess.send(errorFrame(errShutdown(), ln.id), nil)
		}
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pop takes the first job of ln's queue for its worker, or nil when the
// queue is empty: the worker is then gone, and the next push starts one.
func (sess *session) pop(ln *lane) job {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if len(ln.jobs) == 0 {
		ln.jobs, ln.working = nil, false // let a long queue's array go
		return nil
	}
	j := ln.jobs[0]
	ln.jobs[0], ln.jobs = nil, ln.jobs[1:]
	return j
}

// refuseQueued answers j (if any) and the jobs still queued on ln at
// shutdown, in order.
func (sess *session) refuseQueued(ln *lane, j job) {
	if j == nil {
		j = sess.pop(ln)
	}
	for ; j != nil; j = sess.pop(ln) {
		sess.scope.release(j.bytes())
		sess.send(errorFrame(errShutdown(), ln.id), nil)
	}
}

// runJob runs one job on ln. The job's last frame (terminal event or
// error) goes out once the job is settled (response cached, queue place
// freed), so that a client acting on it finds the connection as the frame
// describes it; the in-flight slot is freed only after that frame, so that
// the client never sees more than Limits.MaxInFlight responses in flight.
func (sess *session) runJob(ln *lane, j job) {
	var last []byte
	slot := false
	defer func() {
		if p := recover(); p != nil {
			sess.srv.log.Error("rollout panicked", "panic", p)
			last = errorFrame(protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
				"The server had an error while processing the request."), ln.id)
		}
		sess.scope.release(j.bytes())
		if last != nil {
			sess.send(last, nil)
			for _, b := range ln.after {
				sess.send(b, nil)
			}
		}
		ln.after = nil
		if slot {
			<-sess.scope.slots
		}
	}()
	if j.inFlight() {
		select {
		case sess.scope.slots <- struct{}{}:
			slot = true
		case <-sess.ctx.Done():
			return
		}
	}
	last = j.run(sess, ln)
}

// create runs a response.create on ln and returns its last frame.
func (sess *session) create(ln *lane, j *createJob) (last []byte) {
	req := j.req
	t0 := sess.srv.now()
	tm := protocol.Timings{DecodeMicros: j.decodeUS, QueueMicros: t0.Sub(j.received).Microseconds() - j.decodeUS}
	path := ServePath{Transport: sess.transport, Design: designTurns, State: stateNone}
	if sess.suspended(req) {
		path.Design = designSuspend
	}
	var parent *conversation
	var perr *protocol.Error
	switch {
	case req.Conversation != nil:
		parent, perr = sess.srv.parentOf(sess.ctx, req)
		path.State = stateStore
	case req.PreviousResponseID != "":
		parent, path.State, perr = sess.resolve(req.PreviousResponseID)
	}
	if perr != nil {
		return errorFrame(perr, ln.id)
	}
	if parent != nil {
		tm.LoadMicros = sess.srv.now().Sub(t0).Microseconds()
	}
	if parent != nil {
		req.Input = parent.steeredInput(req.Input) // what response.steer queued in the response continued
	}
	tenant := Tenant(sess.ctx)
	if perr := sess.srv.admission.response(tenant); perr != nil {
		return errorFrame(perr, ln.id)
	}
	ro, perr := sess.srv.prepare(sess.ctx, req, parent, j.received, tm)
	if perr != nil {
		sess.srv.admission.responseDone(tenant)
		sess.scope.evictAfterFailure(ln, parent)
		return errorFrame(perr, ln.id)
	}
	sess.served.Add(1)
	ro.tenant, ro.inFlightHeld = tenant, true
	ro.lane, ro.path, ro.routed = ln.id, path, sess.scope.route(req.Model)
	ro.onConnection(&sess.scope.mcp)
	if path.Design == designSuspend {
		return sess.runSuspended(ln, ro, parent)
	}
	sess.setRunning(ln, ro, nil)
	defer sess.setRunning(ln, nil, nil)
	sink := &jobSink{sess: sess}
	conv, err := ro.run(sess.ctx, sink)
	switch {
	case conv != nil:
		sess.scope.publish(ln, conv, sess.srv.opts.Limits.CacheResponses, sess.srv.opts.Limits.CacheBytes)
	case err == nil: // the response failed
		sess.scope.evictAfterFailure(ln, parent)
	}
	ln.after = sink.after
	return sink.last
}

// runSuspended starts ro as a suspended rollout reporting here on ln, and
// follows it (see follow); parent is the response it continued from.
func (sess *session) runSuspended(ln *lane, ro *rollout, parent *conversation) (last []byte) {
	sp, gone, perr := sess.srv.suspend(ro, sess, ln.id)
	if perr != nil {
		if ro.inFlightHeld { // a create's place; a fork takes one when it begins
			sess.srv.admission.responseDone(ro.tenant) // ro never runs
		}
		return errorFrame(perr, ln.id)
	}
	sess.setRunning(ln, nil, sp)
	sp.start()
	return sess.follow(ln, sp, gone, parent)
}

// setRunning records what runs on ln.
func (sess *session) setRunning(ln *lane, ro *rollout, sp *suspension) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	ln.ro, ln.sp = ro, sp
	ln.clearAsleep()
}

// jobSink is a cached-state response's sink: events go to the session, the
// terminal one is held for runJob, which sends it once the response is
// settled.
type jobSink struct {
	sess  *session
	enc   eventBuf // under the rollout's lock
	last  []byte   // written under the rollout's lock; read once run has returned
	after [][]byte // the frames that follow last, as last
}

func (s *jobSink) put(ev protocol.Event, acct *delivery) error {
	b, err := s.enc.encode(ev)
	if err != nil {
		return err
	}
	switch protocol.Type(ev) {
	case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		s.last = bytes.Clone(b)
		return nil
	}
	if s.last != nil { // after the terminal event (response.steer.pending): sent after it
		s.after = append(s.after, bytes.Clone(b))
		return nil
	}
	return s.sess.sendCopy(b, acct)
}

func (s *jobSink) behind(acct *delivery) bool { return acct.behind() }

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
	conv, perr = sess.srv.hydrate(sess.ctx, id)
	return conv, stateStore, perr
}

func formatAge(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return d.String()
}

// suspended reports whether req runs as a suspended rollout.
func (sess *session) suspended(req *protocol.CreateRequest) bool {
	if req.Suspend != nil {
		return *req.Suspend
	}
	return sess.suspend
}
