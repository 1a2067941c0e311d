package runtime

import (
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a session's lanes at work: admitting a job to its lane's
// queue, the lane's worker that runs its jobs in order, and the jobs that run
// a response there.

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
		refusal = sess.srv.admission.Request(sess.tenant)
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
// connection's every lane) holds no goroutine. A job that follows a
// suspended rollout lets it go too, until the rollout ends or leaves
// (runJob): the job then ends, and the worker goes on, in a goroutine of
// its own. The worker counts in sess.wg all along.
func (sess *session) laneWorker(ln *lane) {
	for {
		j := sess.pop(ln)
		if j == nil {
			sess.wg.Done()
			return // the queue is empty: pop let the worker go
		}
		select {
		case <-sess.quit: // a job taken as shutdown began is refused with the rest
			sess.refuseQueued(ln, j)
			sess.wg.Done()
			return
		default:
			if sess.runJob(ln, j) {
				return // it goes on once the rollout it follows ends or leaves
			}
		}
	}
}

// push puts j at the end of what waits on ln, for its turn, and starts the
// lane's worker if none runs. What waits is a slice rather than a channel
// of MaxQueued places: a connection with many lanes (a rollout forked 64
// ways) pays for the jobs it has.
//
// Once the session is ending no worker starts (teardown and goAway wait for
// the workers; quit is closed under mu, so no Add follows their Wait): a
// job pushed then is answered at once, as shutdown answers queued ones, or
// let go with the session.
func (sess *session) push(ln *lane, j job) {
	sess.mu.Lock()
	quitting := sess.ctx.Err() != nil || isClosed(sess.quit)
	if !quitting && ln.hold(held{why: forTurn, job: j}) {
		sess.wg.Add(1)
		go sess.laneWorker(ln)
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

// pop takes the first job waiting on ln for its turn, or nil when none
// does: the worker is then gone, and the next push starts one.
func (sess *session) pop(ln *lane) job {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	h, ok := ln.dequeue(forTurn)
	if !ok {
		ln.working = false
		return nil
	}
	return h.job
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
//
// A job that follows a suspended rollout (session.follow) ends once the
// rollout ends or leaves: runJob then reports that it goes on, and the
// lane's worker goes, to go on with the lane once the job has ended.
func (sess *session) runJob(ln *lane, j job) (goesOn bool) {
	slot := false
	if j.inFlight() {
		select {
		case sess.scope.slots <- struct{}{}:
			slot = true
		case <-sess.ctx.Done():
			sess.endJob(ln, j, nil, false)
			return false
		}
	}
	last := sess.guarded(ln, func() []byte { return j.run(sess, ln) })
	f := ln.following
	if f == nil {
		sess.endJob(ln, j, last, slot)
		return false
	}
	ln.following = nil
	f.then(sess, func() {
		sess.endJob(ln, j, sess.guarded(ln, func() []byte { return sess.followed(ln, f) }), slot)
		sess.laneWorker(ln)
	})
	return true
}

// guarded is run's last frame, or the error a panic in it ends its job
// with.
func (sess *session) guarded(ln *lane, run func() []byte) (last []byte) {
	defer func() {
		if p := recover(); p != nil {
			sess.srv.log.Error("rollout panicked", "panic", p)
			ln.following = nil
			last = errorFrame(protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "",
				"The server had an error while processing the request."), ln.id)
		}
	}()
	return run()
}

// endJob sends j's last frame, if any, and what follows it, then lets go
// of what the job held: its bytes on the connection's account and its
// in-flight slot.
func (sess *session) endJob(ln *lane, j job, last []byte, slot bool) {
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
}

// create runs a response.create on ln and returns its last frame.
func (sess *session) create(ln *lane, j *createJob) (last []byte) {
	ro, parent, perr := sess.startTurn(ln, j)
	if perr != nil {
		return errorFrame(perr, ln.id)
	}
	if ro.path.Design == designSuspend {
		return sess.runSuspended(ln, ro, parent)
	}
	return sess.runTurn(ln, ro, parent)
}

// startTurn prepares the rollout of a response.create on ln: its parent
// resolved (the cache, or the store), admitted among its tenant's
// responses; or says why it cannot run.
func (sess *session) startTurn(ln *lane, j *createJob) (*rollout, *conversation, *protocol.Error) {
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
		return nil, nil, perr
	}
	if parent != nil {
		tm.LoadMicros = sess.srv.now().Sub(t0).Microseconds()
	}
	if parent != nil {
		req.Input = parent.steeredInput(req.Input) // what response.steer queued in the response continued
	}
	tenant := Tenant(sess.ctx)
	if perr := sess.srv.admission.Response(tenant); perr != nil {
		return nil, nil, perr
	}
	ro, perr := sess.srv.prepare(sess.ctx, req, parent, j.received, tm)
	if perr != nil {
		sess.srv.admission.ResponseDone(tenant)
		sess.scope.evictAfterFailure(ln, parent)
		return nil, nil, perr
	}
	sess.served.Add(1)
	ro.tenant, ro.inFlightHeld = tenant, true
	ro.lane, ro.path, ro.routed = ln.id, path, sess.scope.route(req.Model)
	ro.onConnection(&sess.scope.mcp)
	// A cached-state turn steered ends at its step's end, and a successor
	// takes the steering on (OpenAI's shape); a suspended rollout, one
	// response by design, takes it in.
	ro.succeeds = path.Design == designTurns && !req.MultiAgentEnabled()
	return ro, parent, nil
}

// runTurn runs a cached-state turn's rollout ro on ln and returns its last
// frame; a turn that ended holding steering is followed by its successor,
// on ln, before the lane takes its next job.
func (sess *session) runTurn(ln *lane, ro *rollout, parent *conversation) (last []byte) {
	sink := &jobSink{sess: sess}
	conv, err := func() (*conversation, error) {
		sess.setRunning(ln, ro, nil)
		defer sess.setRunning(ln, nil, nil)
		return ro.run(sess.ctx, sink)
	}()
	switch {
	case conv != nil:
		sess.scope.publish(ln, conv, sess.srv.opts.Limits.CacheResponses, sess.srv.opts.Limits.CacheBytes)
	case err == nil: // the response failed
		sess.scope.evictAfterFailure(ln, parent)
	}
	if next := ro.successor; next != nil && sink.last != nil {
		sess.send(sink.last, nil) // the steered response's end, then its successor's beginning
		for _, b := range sink.after {
			sess.send(b, nil)
		}
		return sess.succeed(ln, ro, next)
	}
	ln.after = sink.after
	return sink.last
}

// succeed starts the successor of ro, which ended holding steering, on ln:
// a response.create of ro's request, continuing ro (previous_response_id)
// with the steering as its input. Its response.created commits the input.
// A successor that cannot start fails the steering it held
// (successor_creation_failed).
func (sess *session) succeed(ln *lane, ro *rollout, next *successor) []byte {
	req := *ro.req
	req.Input, req.PreviousResponseID, req.Conversation = next.input, ro.resp.ID, nil
	succ, parent, perr := sess.startTurn(ln, &createJob{req: &req, received: sess.srv.now()})
	if perr != nil {
		perr = protocol.Errorf(perr.Status, protocol.CodeSuccessorFailed, "previous_response_id",
			"The response that goes on from '%s' with this steering could not start: %s", ro.resp.ID, perr.Message)
		var last []byte
		for _, st := range next.steers {
			fe := protocol.SteerFailure(st.ev, st.id, perr)
			fe.StreamID = ln.id
			if b, err := protocol.Marshal(fe); err == nil {
				if last != nil {
					sess.send(last, nil)
				}
				last = b
			}
		}
		return last
	}
	return sess.runTurn(ln, succ, parent)
}

// runSuspended starts ro as a suspended rollout reporting here on ln, and
// follows it (see follow); parent is the response it continued from.
func (sess *session) runSuspended(ln *lane, ro *rollout, parent *conversation) (last []byte) {
	sp, gone, perr := sess.srv.suspend(ro, sess, ln.id)
	if perr != nil {
		if ro.inFlightHeld { // a create's place; a fork takes one when it begins
			sess.srv.admission.ResponseDone(ro.tenant) // ro never runs
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
	ln.occupy(occupant{ro: ro, sp: sp})
}
