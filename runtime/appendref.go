package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
)

// A response.append may name items by reference (item_reference), as a
// create's input may: earlier in the append, or stored by a response of
// the tenant. Finding a stored item may ask the store, which the read loop
// never waits on, and the append's lane may be busy following the very
// rollout it answers; so such an append is resolved by a goroutine of the
// lane's own, and the events on that lane that arrive meanwhile (appends,
// cancels, creates, forks) wait behind it and are taken after it, in
// arrival order, as if they had just arrived. Each waiting event holds its
// frame's bytes and a queue place of the connection's (reserve), so that
// what waits is bounded as what is queued; there is one goroutine per lane
// at most, and it stops with the session.

// laneEvent is a client event as it arrived: handle takes it, at once or
// after it waited behind a resolving append on its lane.
type laneEvent struct {
	ev       protocol.ClientEvent // waiting: an *AppendEvent, *CancelEvent, *CreateEvent or *ForkEvent
	size     int                  // its frame's bytes, reserved while it waits
	received time.Time
	decodeUS int64
}

// hasReferences reports whether items hold an item_reference.
func hasReferences(items protocol.Items) bool {
	for _, it := range items {
		if _, ok := it.(*protocol.ItemReferenceItem); ok {
			return true
		}
	}
	return false
}

// resolvesHere reports whether an append naming response id is worth
// resolving: the response runs, sleeps or wakes on this connection, or
// may be woken from a checkpoint. Any other append is answered at once by
// appendOutputs, without asking the store.
func (sess *session) resolvesHere(id string) bool {
	if sess.srv.opts.Checkpoints != nil {
		return true
	}
	ln, _ := sess.running(id)
	return ln != nil
}

// waitBehind takes e, an event on lane, when it must wait: an append to
// resolve (resolve set), or any event while others wait on its lane. It
// reports whether it took e (an event it could not reserve room for is
// refused, and taken too).
func (sess *session) waitBehind(lane string, e laneEvent, resolve bool) bool {
	if sess.srv.closing() {
		return false // the read loop answers it as shutdown allows
	}
	sess.mu.Lock()
	waiting, busy := sess.behind[lane]
	sess.mu.Unlock()
	if !busy && !resolve {
		return false
	}
	if perr := sess.scope.reserve(e.size, &sess.srv.opts); perr != nil {
		sess.sendError(perr, lane)
		return true
	}
	sess.mu.Lock()
	waiting, busy = sess.behind[lane]
	if sess.behind == nil {
		sess.behind = make(map[string][]laneEvent)
	}
	sess.behind[lane] = append(waiting, e)
	sess.mu.Unlock()
	if !busy {
		sess.wg.Add(1)
		go sess.drainBehind(lane)
	}
	return true
}

// drainBehind takes the events waiting on lane in order, resolving each
// append's references, until none is left or the session ends (what is
// left then is dropped, with the connection).
func (sess *session) drainBehind(lane string) {
	defer sess.wg.Done()
	for {
		sess.mu.Lock()
		q := sess.behind[lane]
		if len(q) == 0 || sess.ctx.Err() != nil {
			delete(sess.behind, lane)
			sess.mu.Unlock()
			for _, e := range q {
				sess.scope.release(e.size)
			}
			return
		}
		e := q[0]
		q[0] = laneEvent{}
		sess.behind[lane] = q[1:]
		sess.mu.Unlock()
		sess.scope.release(e.size)
		sess.handle(e, true)
	}
}

// handle takes one client event: from the read loop as it arrives, or
// (waited) from its lane's resolver once the events before it are taken.
// It is the one place client events are dispatched. An event on a lane
// where others wait behind a resolving append waits too (waitBehind), and
// so does an append whose references need resolving; creates queue on
// their lane; the rest are answered at once.
func (sess *session) handle(e laneEvent, waited bool) {
	lane := e.ev.Lane()
	var perr *protocol.Error
	switch ev := e.ev.(type) {
	case *protocol.CreateEvent:
		if waited || !sess.waitBehind(lane, e, false) {
			sess.enqueue(ev, e.size, e.received, e.decodeUS)
		}
	case *protocol.AppendEvent:
		switch {
		case !waited && sess.waitBehind(lane, e, hasReferences(ev.Input) && sess.resolvesHere(ev.ResponseID)):
			return
		case waited && hasReferences(ev.Input):
			var resolved protocol.AppendEvent
			if resolved, perr = sess.resolveAppend(ev); perr != nil {
				break
			}
			ev = &resolved
			fallthrough
		default:
			perr = sess.appendOutputs(ev)
		}
	case *protocol.CancelEvent:
		if !waited && sess.waitBehind(lane, e, false) {
			return
		}
		perr = sess.cancelResponse(ev)
	case *protocol.ForkEvent:
		if !waited && sess.waitBehind(lane, e, false) {
			return
		}
		perr = sess.fork(ev, e.received)
	case *protocol.ResumeEvent:
		sess.resume(ev, e.received)
	case *protocol.SteerEvent:
		sess.steer(ev) // out of band: it names a response running now
	case *protocol.ProcessedEvent:
		// Codex acknowledges every response it has read: a suspended
		// rollout's tail is no longer needed.
		sess.srv.suspended.processed(ev.ResponseID, sess.creds)
	}
	if perr != nil {
		sess.sendError(perr, lane)
	}
}

// resolveAppend is ev with each item_reference replaced by the item it
// names: earlier in the append, or stored by a response of the tenant.
// Only references are replaced, one item each, so that the append's
// indexes stay the request's.
func (sess *session) resolveAppend(ev *protocol.AppendEvent) (protocol.AppendEvent, *protocol.Error) {
	find := sess.srv.storedItems(sess.ctx)
	out := make(protocol.Items, 0, len(ev.Input))
	for _, it := range ev.Input {
		ref, isRef := it.(*protocol.ItemReferenceItem)
		if !isRef {
			out = append(out, it)
			continue
		}
		found := findItem(out, ref.ID)
		if found == nil && find != nil {
			var perr *protocol.Error
			if found, perr = find(ref.ID); perr != nil {
				return protocol.AppendEvent{}, perr
			}
		}
		if found == nil {
			return protocol.AppendEvent{}, errItemNotFound(ref.ID, "input")
		}
		out = append(out, found)
	}
	resolved := *ev
	resolved.Input = out
	return resolved, nil
}
