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
}

// lane is one stream_id's FIFO of creates.
type lane struct {
	id    string
	queue chan *job // buffered to MaxQueued; received only by the lane worker
}

// job is one response.create waiting in a lane, or the refusal of one, which
// is answered in lane order so it cannot be mistaken for an earlier turn's.
type job struct {
	req      *protocol.CreateRequest
	refusal  *protocol.Error
	parent   string // previous_response_id of a refused create: the refusal evicts it
	received time.Time
	decodeUS int64 // microseconds spent decoding the frame
}

func newSession(s *Server, conn *websocket.Conn) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{
		srv: s, conn: conn, started: s.now(),
		ctx: ctx, cancel: cancel,
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
	go func() { writerDone <- sess.writeLoop(sess.ctx) }()
	err := sess.readLoop(reqCtx)
	if err != nil && !isNormalClose(err) && websocket.CloseStatus(err) == -1 {
		sess.srv.log.Debug("websocket read ended", "err", err)
	}
	sess.cancel()
	sess.wg.Wait()
	<-writerDone
	sess.conn.CloseNow()
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
