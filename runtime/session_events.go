package runtime

import (
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a session's one dispatcher of client events (handle), and
// what it does with the events that name a response already running on
// the connection: appends and cancels.

// laneEvent is a client event as it arrived: handle takes it, at once or
// after it waited behind a resolving append on its lane.
type laneEvent struct {
	ev       protocol.ClientEvent // waiting: an *AppendEvent, *CancelEvent, *CreateEvent or *ForkEvent
	size     int                  // its frame's bytes, reserved while it waits
	received time.Time
	decodeUS int64
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
		case !waited && sess.waitResume(lane, e, ev.ResponseID):
			return
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
			perr = sess.appendOutputs(ev, e.size)
		}
		if ev.Inject && perr != nil {
			sess.injectFailed(ev, perr)
			return
		}
	case *protocol.CancelEvent:
		if !waited && (sess.waitResume(lane, e, ev.ResponseID) || sess.waitBehind(lane, e, false)) {
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
		sess.steer(ev, e.size) // out of band: it names a response running now
	case *protocol.ProcessedEvent:
		// Codex acknowledges every response it has read: a suspended
		// rollout's tail is no longer needed.
		sess.srv.suspended.processed(ev.ResponseID, sess.creds)
	}
	if perr != nil {
		sess.sendError(perr, lane)
	}
}

// running finds the lane of this connection that response id holds, and
// what holds it; a rollout that wakes on a lane is found as the place it
// keeps there.
func (sess *session) running(id string) (*lane, occupant) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	for _, ln := range sess.lanes {
		if ln.occ.id() == id {
			return ln, ln.occ
		}
	}
	if ln := sess.wakingLaneLocked(id); ln != nil {
		return ln, occupant{asleep: id}
	}
	return nil, occupant{}
}

// appendOutputs handles response.append: tool outputs (and steering
// messages) for a suspended response of this connection; size is its
// frame's bytes, which the rollout holds once it takes the items.
func (sess *session) appendOutputs(ev *protocol.AppendEvent, size int) *protocol.Error {
	if sess.srv.handingOver() {
		// Its rollout is handed over, or failed: the connection closes
		// with 1012 and the client, resuming elsewhere, gets the pause
		// again and appends again.
		return nil
	}
	switch ln, occ := sess.running(ev.ResponseID); {
	case ln != nil:
		if wake, perr := occ.append(sess, ln, ev, size); !wake {
			return perr
		}
	case sess.scope.elsewhere(sess, ev.ResponseID):
		return errOtherStream(ev.ResponseID)
	case sess.srv.suspended.heldAwake(ev.ResponseID):
		return errNoSuspended(ev.ResponseID) // another connection's: a resume moves it here
	}
	w := &wakeEvent{items: ev.Input, size: size}
	if ev.Inject {
		w.inject = ev
	}
	return sess.wake(ev.ResponseID, ev.StreamID, w)
}

// cancelResponse handles response.cancel: it ends a running or suspended
// response of this connection; the response then ends with status cancelled.
func (sess *session) cancelResponse(ev *protocol.CancelEvent) *protocol.Error {
	switch ln, occ := sess.running(ev.ResponseID); {
	case ln != nil:
		if wake, perr := occ.cancel(sess, ln, ev); !wake {
			return perr
		}
	case sess.scope.elsewhere(sess, ev.ResponseID):
		return errOtherStream(ev.ResponseID)
	case sess.srv.suspended.heldAwake(ev.ResponseID):
		return errNoResponse(ev.ResponseID) // another connection's
	}
	return sess.wake(ev.ResponseID, ev.StreamID, &wakeEvent{cancel: true})
}

// errNoResponse: a cancel of a response not in progress on this
// connection.
func errNoResponse(id string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
		"No response '%s' in progress on this connection.", id)
}

// errOtherStream refuses an event, on a WebTransport stream, that names a
// response running on another stream of the connection.
func errOtherStream(id string) *protocol.Error {
	return protocol.Invalid(protocol.CodeStreamMismatch, "stream_id",
		"Response '%s' runs on another stream of this connection: send its events on that stream.", id)
}

// Resolving an append. A response.append may name items by reference
// (item_reference), as a create's input may: earlier in the append, or
// stored by a response of the tenant. Finding a stored item may ask the
// store, which the read loop never waits on, and the append's lane may be
// busy following the very rollout it answers; so such an append is
// resolved by a goroutine of the lane's own (its resolver), and the events
// on that lane that arrive meanwhile (appends, cancels, creates, forks)
// wait behind it (forResolve) and are taken after it, in arrival order, as
// if they had just arrived. Each waiting event holds its frame's bytes and
// a queue place of the connection's (reserve), so that what waits is
// bounded as what is queued; there is one resolver per lane at most, and
// it stops with the session.

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

// waitBehind takes e, an event on the lane named laneID, when it must
// wait: an append to resolve (resolve set), or any event while others wait
// forResolve on its lane. It reports whether it took e (an event it could
// not reserve room for is refused, and taken too).
func (sess *session) waitBehind(laneID string, e laneEvent, resolve bool) bool {
	if sess.srv.closing() {
		return false // the read loop answers it as shutdown allows
	}
	sess.mu.Lock()
	ln := sess.lanes[laneID]
	busy := ln != nil && ln.resolving
	sess.mu.Unlock()
	if !busy && !resolve {
		return false
	}
	if perr := sess.scope.reserve(e.size, &sess.srv.opts); perr != nil {
		sess.sendError(perr, laneID)
		return true
	}
	sess.mu.Lock()
	ln, perr := sess.laneLocked(laneID)
	if perr == nil && ln.hold(held{why: forResolve, ev: e}) {
		sess.wg.Add(1)
		go sess.resolver(ln)
	}
	sess.mu.Unlock()
	if perr != nil {
		sess.scope.release(e.size)
		sess.sendError(perr, laneID)
	}
	return true
}

// resolver takes the events waiting forResolve on ln in order, resolving
// each append's references, until none is left or the session ends (what
// is left then is dropped, with the connection).
func (sess *session) resolver(ln *lane) {
	defer sess.wg.Done()
	for {
		sess.mu.Lock()
		h, ok := ln.dequeue(forResolve)
		if !ok || sess.ctx.Err() != nil {
			ln.resolving = false
			left := ln.dequeueAll(forResolve)
			sess.mu.Unlock()
			if ok {
				left = append(left, h)
			}
			for _, h := range left {
				sess.scope.release(h.ev.size)
			}
			return
		}
		sess.mu.Unlock()
		sess.scope.release(h.ev.size)
		sess.handle(h.ev, true)
	}
}

// resolveAppend is ev with each item_reference replaced by the item it
// names: earlier in the append, or stored by a response of the tenant.
// Only references are replaced, one item each, so that the append's
// indexes stay the request's.
func (sess *session) resolveAppend(ev *protocol.AppendEvent) (protocol.AppendEvent, *protocol.Error) {
	find := sess.srv.storedItems(sess.ctx)
	out := make(protocol.Items, 0, len(ev.Input))
	refs := newReferences("input", sess.srv.opts.Limits.MaxFrame)
	for i, it := range ev.Input {
		ref, isRef := it.(*protocol.ItemReferenceItem)
		if !isRef {
			out = append(out, it)
			refs.index(out[len(out)-1:])
			continue
		}
		found := refs.earlier[ref.ID]
		if found == nil && find != nil {
			var perr *protocol.Error
			if found, perr = find(ref.ID); perr != nil {
				return protocol.AppendEvent{}, perr
			}
		}
		if found == nil {
			return protocol.AppendEvent{}, errItemNotFound(ref.ID, "input")
		}
		if perr := refs.count(i, found); perr != nil {
			return protocol.AppendEvent{}, perr
		}
		out = append(out, found)
		refs.index(out[len(out)-1:])
	}
	resolved := *ev
	resolved.Input = out
	return resolved, nil
}
