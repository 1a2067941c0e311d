package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
)

// maxEvicted bounds the ids a session remembers as evicted.
const maxEvicted = 1024

// Session is one WebSocket connection: its lanes (stream_id), their FIFO
// queues, the in-flight limit, and the connection-local cache of the latest
// response of each lane.
//
// The read loop runs on the handler goroutine and never blocks on a rollout.
// Each lane has one worker goroutine that runs its responses in order; one
// writer goroutine owns the socket's write side. Everything the session
// starts is joined before the handler returns.
type Session struct {
	srv     *Server
	conn    *websocket.Conn
	started time.Time
	creds   string // hash of the Authorization header: suspended rollouts resume only under it
	suspend bool   // suspended rollouts by default (OpenAI-Beta: responses_websockets=2026-02-04)

	ctx    context.Context    // cancelled when the session ends
	cancel context.CancelFunc // ends the session
	out    chan []byte        // frames for writeLoop; bounded
	slots  chan struct{}      // one token per response in flight
	wg     sync.WaitGroup     // lane workers

	mu      sync.Mutex
	lanes   map[string]*lane         // guarded by mu; "" is the default lane
	named   int                      // named lanes, guarded by mu
	cache   map[string]*conversation // response id -> state, guarded by mu
	latest  map[string]string        // lane -> id of its cached response, guarded by mu
	evicted map[string]struct{}      // ids a failed continuation evicted, guarded by mu
	pending int                      // creates accepted and not finished, guarded by mu
	active  map[string]*Rollout      // responses running on this connection, guarded by mu
	links   map[*link]struct{}       // suspended rollouts reporting here, guarded by mu
}

// lane is one stream_id's FIFO of creates.
type lane struct {
	id    string
	queue chan *job // buffered to MaxQueued; received only by the lane worker
	link  *link     // the suspended rollout occupying the lane, guarded by Session.mu
}

// job is one response.create waiting in a lane, or the refusal of one, which
// is answered in lane order so it cannot be mistaken for an earlier turn's.
type job struct {
	req      *protocol.CreateRequest
	refusal  *protocol.Error
	parent   string // previous_response_id of a refused create: the refusal evicts it
	received time.Time
	decodeUS int64 // microseconds spent decoding the frame
	resume   *link // response.resume: reattach this suspended rollout
	after    *int  // the last sequence_number the resuming client received
}

func newSession(s *Server, conn *websocket.Conn, r *http.Request) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{
		srv: s, conn: conn, started: s.now(),
		creds: credentials(r), suspend: suspendByDefault(r),
		active: make(map[string]*Rollout),
		links:  make(map[*link]struct{}),
		ctx:    ctx, cancel: cancel,
		out:     make(chan []byte, DefaultOutQueue),
		slots:   make(chan struct{}, s.opts.MaxInFlight),
		lanes:   make(map[string]*lane),
		cache:   make(map[string]*conversation),
		latest:  make(map[string]string),
		evicted: make(map[string]struct{}),
	}
}

// run serves the connection until it ends, then joins every goroutine.
func (sess *Session) run(reqCtx context.Context) {
	writerDone := make(chan error, 1)
	go func() {
		err := sess.writeLoop(sess.ctx)
		if err != nil {
			// The socket cannot be written: end the session now rather than
			// let the queue fill and blame a slow client.
			sess.cancel()
			sess.conn.CloseNow()
		}
		writerDone <- err
	}()
	// Deferred, so that even a panic in the read loop joins the goroutines and
	// hands suspended rollouts to their resume window.
	defer sess.teardown(writerDone)
	err := sess.readLoop(reqCtx)
	if err != nil && !isNormalClose(err) && websocket.CloseStatus(err) == -1 {
		sess.srv.log.Debug("websocket read ended", "err", err)
	}
}

// teardown ends the session: it joins the lane workers and the writer,
// closes the socket and detaches the suspended rollouts reporting here.
func (sess *Session) teardown(writerDone <-chan error) {
	sess.cancel()
	sess.wg.Wait()
	<-writerDone
	sess.conn.CloseNow()
	sess.mu.Lock()
	links := sess.links
	sess.links = nil
	sess.mu.Unlock()
	for l := range links {
		l.detach(sess)
	}
}

// shutdown closes the connection with 1001 (server going away). The read
// loop then returns and run joins everything.
func (sess *Session) shutdown() {
	sess.cancel()
	go sess.conn.Close(websocket.StatusGoingAway, "server shutting down")
}

// enqueue puts a create on its lane, or refuses it at once when the
// connection is at a limit that queuing would not resolve.
func (sess *Session) enqueue(ev *protocol.CreateEvent, received time.Time, decodeUS int64) {
	j := &job{req: ev.Request, parent: ev.Request.PreviousResponseID, received: received, decodeUS: decodeUS}
	switch {
	case received.Sub(sess.started) >= sess.srv.opts.WSMaxAge:
		j.refusal = protocol.Invalid(protocol.CodeConnectionLimitReached, "",
			"Responses websocket connection limit reached (%s). Create a new websocket connection to continue.", formatAge(sess.srv.opts.WSMaxAge))
	case ev.Request.Background != nil && *ev.Request.Background:
		j.refusal = protocol.Invalid(protocol.CodeUnsupportedParameter, "background", "'background' is not supported over WebSocket.")
	}
	sess.mu.Lock()
	if sess.pending >= sess.srv.opts.MaxQueued {
		sess.mu.Unlock()
		sess.sendError(protocol.Errorf(http.StatusTooManyRequests, protocol.CodeQueueFull, "",
			"This connection already has %d responses running or queued. Wait for one to finish, or open another connection.", sess.srv.opts.MaxQueued), ev.StreamID)
		return
	}
	ln, perr := sess.laneLocked(ev.StreamID)
	if perr == nil && ln.link != nil && ln.link.ro.client.Parked() {
		perr = protocol.Invalid(protocol.CodeStreamSuspended, "stream_id",
			"Response '%s' on this stream is suspended, waiting for tool outputs: send response.append, or response.cancel it, before creating another response on the stream.", ln.link.ro.ID())
	}
	if perr != nil {
		sess.mu.Unlock()
		sess.sendError(perr, ev.StreamID)
		return
	}
	sess.pending++
	sess.mu.Unlock()
	ln.queue <- j // never blocks: the queue holds MaxQueued and pending < MaxQueued
}

// refuse answers a frame that could not be decoded: in its lane's order when
// the lane exists, at once otherwise. parent is the previous_response_id the
// frame continued from, if any: a failed continuation evicts it.
func (sess *Session) refuse(laneID string, perr *protocol.Error, parent string, received time.Time) {
	sess.mu.Lock()
	ln, ok := sess.lanes[laneID]
	if ok && sess.pending < sess.srv.opts.MaxQueued {
		sess.pending++
		sess.mu.Unlock()
		ln.queue <- &job{refusal: perr, parent: parent, received: received}
		return
	}
	sess.mu.Unlock()
	sess.sendError(perr, laneID)
}

// laneLocked returns the lane for id, starting it if new.
func (sess *Session) laneLocked(id string) (*lane, *protocol.Error) {
	if ln, ok := sess.lanes[id]; ok {
		return ln, nil
	}
	if id != "" {
		if sess.named >= sess.srv.opts.MaxLanes {
			return nil, protocol.Invalid(protocol.CodeStreamLimitReached, "stream_id",
				"This WebSocket connection has reached its maximum number of distinct stream IDs (%d). Reuse an existing stream_id or open a new WebSocket connection.", sess.srv.opts.MaxLanes)
		}
		sess.named++
	}
	ln := &lane{id: id, queue: make(chan *job, sess.srv.opts.MaxQueued)}
	sess.lanes[id] = ln
	sess.wg.Add(1)
	go sess.laneWorker(ln)
	return ln, nil
}

// laneWorker runs a lane's jobs one at a time, in arrival order.
func (sess *Session) laneWorker(ln *lane) {
	defer sess.wg.Done()
	for {
		select {
		case j := <-ln.queue:
			sess.runJob(ln, j)
		case <-sess.ctx.Done():
			return
		}
	}
}

// runJob runs one create: resolve its parent in the cache, prepare, stream,
// and cache the result as the lane's latest. The job's last frame (terminal
// event or error) goes out once the job is settled (response cached, queue
// place freed), so that a client acting on it finds the connection as the
// frame describes it; the in-flight slot is freed only after that frame, so
// that the client never sees more than MaxInFlight responses in flight.
func (sess *Session) runJob(ln *lane, j *job) {
	var last []byte
	slot := false
	defer func() {
		if p := recover(); p != nil {
			sess.srv.log.Error("rollout panicked", "panic", p)
			last = errorFrame(protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
				"The server had an error while processing the request."), ln.id)
		}
		sess.mu.Lock()
		sess.pending--
		sess.mu.Unlock()
		if last != nil {
			sess.send(last)
		}
		if slot {
			<-sess.slots
		}
	}()
	if j.resume != nil {
		if !j.resume.attach(sess, j.after) {
			last = errorFrame(protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
				"No suspended response '%s' to resume: it ended, or its resume window passed.", j.resume.ro.ID()), ln.id)
			return
		}
		last = sess.follow(ln, j.resume, nil)
		return
	}
	if j.refusal != nil {
		if j.parent != "" { // a continuation refused before it ran failed too
			sess.mu.Lock()
			parent := sess.cache[j.parent]
			sess.mu.Unlock()
			sess.evictAfterFailure(ln, parent)
		}
		last = errorFrame(j.refusal, ln.id)
		return
	}
	select {
	case sess.slots <- struct{}{}:
		slot = true
	case <-sess.ctx.Done():
		return
	}
	req := j.req
	tm := protocol.Timings{DecodeMicros: j.decodeUS}
	var parent *conversation
	if id := req.PreviousResponseID; id != "" {
		t0 := sess.srv.now()
		var perr *protocol.Error
		if parent, perr = sess.resolve(id); perr != nil {
			last = errorFrame(perr, ln.id)
			return
		}
		tm.LoadMicros = sess.srv.now().Sub(t0).Microseconds()
	}
	ro, perr := sess.srv.prepare(req, parent, j.received, tm)
	if perr != nil {
		sess.evictAfterFailure(ln, parent)
		last = errorFrame(perr, ln.id)
		return
	}
	ro.lane, ro.streamID = ln.id, ln.id
	if sess.suspended(req) {
		l, perr := sess.srv.startSuspended(ro, sess, ln.id)
		if perr != nil {
			last = errorFrame(perr, ln.id)
			return
		}
		last = sess.follow(ln, l, parent)
		return
	}
	sess.setActive(ro, true)
	defer sess.setActive(ro, false)
	conv, err := ro.Run(sess.ctx, func(ev protocol.Event) error {
		switch protocol.Type(ev) {
		case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
			var err error
			last, err = json.Marshal(ev)
			return err
		}
		return sess.sendEvent(ev)
	})
	switch {
	case conv != nil:
		sess.publish(ln, conv)
	case err == nil: // the response failed
		sess.evictAfterFailure(ln, parent)
	}
}

// resolve finds previous_response_id in the connection cache, or hydrates it
// from the store. An id a failed continuation evicted stays unknown on this
// connection, stored or not.
func (sess *Session) resolve(id string) (*conversation, *protocol.Error) {
	sess.mu.Lock()
	conv, ok := sess.cache[id]
	_, evicted := sess.evicted[id]
	sess.mu.Unlock()
	switch {
	case ok:
		return conv, nil
	case evicted:
		return nil, previousNotFound(id)
	}
	return sess.srv.hydrate(sess.ctx, id)
}

// publish makes conv its lane's cached response, replacing the previous one.
func (sess *Session) publish(ln *lane, conv *conversation) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if old, ok := sess.latest[ln.id]; ok {
		delete(sess.cache, old)
	}
	sess.latest[ln.id] = conv.response.ID
	sess.cache[conv.response.ID] = conv
}

// evictAfterFailure drops the parent of a failed continuation from the cache,
// as OpenAI does; a fork from another lane keeps its parent.
func (sess *Session) evictAfterFailure(ln *lane, parent *conversation) {
	if parent == nil || parent.lane != ln.id {
		return
	}
	id := parent.response.ID
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if _, ok := sess.cache[id]; !ok {
		return
	}
	delete(sess.cache, id)
	if sess.latest[ln.id] == id {
		delete(sess.latest, ln.id)
	}
	if len(sess.evicted) < maxEvicted {
		sess.evicted[id] = struct{}{}
	}
}

// sendEvent is the rollouts' Sink: encode now, queue for the writer.
func (sess *Session) sendEvent(ev protocol.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return sess.send(b)
}

// sendError queues an error event for laneID.
func (sess *Session) sendError(perr *protocol.Error, laneID string) {
	sess.send(errorFrame(perr, laneID))
}

// errorFrame encodes the error event for laneID.
func errorFrame(perr *protocol.Error, laneID string) []byte {
	b, _ := json.Marshal(perr.WebSocketError(laneID))
	return b
}

// send queues a frame. A full queue means the client is not reading: wait up
// to WriteTimeout, then close the connection with a policy violation rather
// than buffer without bound or stall every lane forever.
func (sess *Session) send(b []byte) error {
	if sess.ctx.Err() != nil {
		// Ended: a frame queued now would never be written, yet count as sent.
		return ErrSessionClosed
	}
	select {
	case sess.out <- b:
		return nil
	default:
	}
	t := time.NewTimer(sess.srv.opts.WriteTimeout)
	defer t.Stop()
	select {
	case sess.out <- b:
		return nil
	case <-sess.ctx.Done():
		return ErrSessionClosed
	case <-t.C:
		sess.srv.log.Warn("closing slow websocket client", "queued_frames", len(sess.out))
		sess.cancel()
		go sess.conn.Close(websocket.StatusPolicyViolation, "client too slow: event queue full")
		return ErrSlowClient
	}
}

func formatAge(d time.Duration) string {
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return d.String()
}

// suspended reports whether req runs as a suspended rollout.
func (sess *Session) suspended(req *protocol.CreateRequest) bool {
	if req.Suspend != nil {
		return *req.Suspend
	}
	return sess.suspend
}

func (sess *Session) setActive(ro *Rollout, on bool) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if on {
		sess.active[ro.ID()] = ro
	} else {
		delete(sess.active, ro.ID())
	}
}

// follow occupies ln with a suspended rollout reporting to this connection
// until the rollout ends (then it settles it: caches what it left, returns
// its terminal frame) or the connection does (then the rollout lives on,
// detached).
func (sess *Session) follow(ln *lane, l *link, parent *conversation) (last []byte) {
	sess.mu.Lock()
	if sess.links == nil { // the session is ending
		sess.mu.Unlock()
		return nil
	}
	sess.links[l] = struct{}{}
	ln.link = l
	sess.active[l.ro.ID()] = l.ro
	sess.mu.Unlock()
	select {
	case <-l.done:
	case <-sess.ctx.Done():
		return nil // the session's teardown detaches l
	}
	sess.mu.Lock()
	if ln.link == l {
		ln.link = nil
	}
	delete(sess.active, l.ro.ID())
	delete(sess.links, l)
	sess.mu.Unlock()
	conv, terminal, ok := l.settle(sess)
	if !ok {
		return nil
	}
	if conv != nil {
		sess.publish(ln, conv)
	} else {
		sess.evictAfterFailure(ln, parent)
	}
	return terminal
}

// appendOutputs handles response.append: tool outputs (and steering
// messages) for a suspended response of this connection.
func (sess *Session) appendOutputs(ev *protocol.AppendEvent) *protocol.Error {
	l, perr := sess.ownSuspended(ev.ResponseID, ev.StreamID)
	if perr != nil {
		return perr
	}
	return l.ro.client.deliver(ev.Input)
}

// ownSuspended finds a suspended rollout reporting to this connection, on the
// lane the event names.
func (sess *Session) ownSuspended(id, laneID string) (*link, *protocol.Error) {
	l := sess.srv.lookupSuspended(id)
	if l == nil || !l.attachedTo(sess) {
		sess.mu.Lock()
		ro, running := sess.active[id]
		sess.mu.Unlock()
		// A suspended rollout that moved to another connection (resumed
		// there) can still be listed here until it ends: it is not this
		// connection's any more.
		if running && !ro.client.suspend {
			return nil, protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
				"Response '%s' is not a suspended rollout: it takes no tool outputs by response.append (send them with response.create and previous_response_id).", id)
		}
		return nil, protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
			"No suspended response '%s' on this connection.", id)
	}
	if l.lane != laneID {
		return nil, protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
			"Response '%s' belongs to stream '%s', not '%s'.", id, l.lane, laneID)
	}
	return l, nil
}

// cancelResponse handles response.cancel: it ends a running or suspended
// response of this connection; the response then ends with status cancelled.
func (sess *Session) cancelResponse(ev *protocol.CancelEvent) *protocol.Error {
	sess.mu.Lock()
	ro, ok := sess.active[ev.ResponseID]
	sess.mu.Unlock()
	if ok && ro.client.suspend {
		// A suspended rollout is this connection's only while it reports
		// here: once resumed on another connection, it is listed here
		// until it ends, but only its new connection may cancel it.
		ok = false
	}
	if !ok {
		// A suspended rollout reports here (and streams) before its lane
		// worker lists it as active.
		if l := sess.srv.lookupSuspended(ev.ResponseID); l != nil && l.attachedTo(sess) {
			ro, ok = l.ro, true
		}
	}
	if !ok {
		return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
			"No response '%s' in progress on this connection.", ev.ResponseID)
	}
	if ro.lane != ev.StreamID {
		return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
			"Response '%s' belongs to stream '%s', not '%s'.", ev.ResponseID, ro.lane, ev.StreamID)
	}
	ro.abort(errCancelled)
	return nil
}

// resume handles response.resume: a suspended rollout whose connection
// dropped reports here from now on, in its lane's turn.
func (sess *Session) resume(ev *protocol.ResumeEvent, received time.Time) {
	l := sess.srv.lookupSuspended(ev.ResponseID)
	if l == nil || l.creds != sess.creds || l.attachedTo(sess) {
		sess.sendError(protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
			"No suspended response '%s' to resume under these credentials.", ev.ResponseID), ev.StreamID)
		return
	}
	if l.lane != ev.StreamID {
		sess.sendError(protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
			"Response '%s' belongs to stream '%s': resume it with that stream_id.", ev.ResponseID, l.lane), ev.StreamID)
		return
	}
	sess.mu.Lock()
	ln, perr := sess.laneLocked(ev.StreamID)
	if perr == nil && sess.pending >= sess.srv.opts.MaxQueued {
		perr = protocol.Errorf(http.StatusTooManyRequests, protocol.CodeQueueFull, "",
			"This connection already has %d responses running or queued.", sess.srv.opts.MaxQueued)
	}
	if perr != nil {
		sess.mu.Unlock()
		sess.sendError(perr, ev.StreamID)
		return
	}
	sess.pending++
	sess.mu.Unlock()
	ln.queue <- &job{resume: l, after: ev.After, received: received}
}
