package runtime

import "github.com/tether-run/tether/protocol"

// A response.append may name items by reference (item_reference), as a
// create's input may: earlier in the append, or stored by a response of
// the tenant. Finding a stored item may ask the store, which the read loop
// never waits on, and the append's lane may be busy following the very
// rollout it answers; so such an append is resolved by a goroutine of its
// own, and the appends and cancels naming the same response that arrive
// meanwhile wait behind it and are taken after it, in arrival order. Once
// its references are replaced by their items, an append is taken as if it
// had just arrived.

// outOfBandEvent is a response.append or a response.cancel.
type outOfBandEvent interface{ Lane() string }

// hasReferences reports whether items hold an item_reference.
func hasReferences(items protocol.Items) bool {
	for _, it := range items {
		if _, ok := it.(*protocol.ItemReferenceItem); ok {
			return true
		}
	}
	return false
}

// queueBehindResolve takes ev, an event naming response id, when it must
// wait: an append to resolve (resolve set), or any event while another
// naming id waits. It reports whether it took ev.
func (sess *session) queueBehindResolve(id string, ev outOfBandEvent, resolve bool) bool {
	sess.mu.Lock()
	waiting, busy := sess.resolving[id]
	if !busy && !resolve {
		sess.mu.Unlock()
		return false
	}
	if sess.resolving == nil {
		sess.resolving = make(map[string][]outOfBandEvent)
	}
	sess.resolving[id] = append(waiting, ev)
	sess.mu.Unlock()
	if !busy {
		sess.wg.Add(1)
		go sess.drainResolving(id)
	}
	return true
}

// drainResolving takes the events waiting for response id in order,
// resolving each append's references, until none is left.
func (sess *session) drainResolving(id string) {
	defer sess.wg.Done()
	for {
		sess.mu.Lock()
		q := sess.resolving[id]
		if len(q) == 0 {
			delete(sess.resolving, id)
			sess.mu.Unlock()
			return
		}
		ev := q[0]
		q[0] = nil
		sess.resolving[id] = q[1:]
		sess.mu.Unlock()
		if perr := sess.takeOutOfBand(ev); perr != nil {
			sess.sendError(perr, ev.Lane())
		}
	}
}

// takeOutOfBand takes one waiting event.
func (sess *session) takeOutOfBand(ev outOfBandEvent) *protocol.Error {
	switch ev := ev.(type) {
	case *protocol.AppendEvent:
		if !hasReferences(ev.Input) {
			return sess.appendOutputs(ev)
		}
		items, _, perr := sess.srv.expand(ev.Input, nil, "input", sess.srv.storedItems(sess.ctx))
		if perr != nil {
			return perr
		}
		resolved := *ev
		resolved.Input = items
		return sess.appendOutputs(&resolved)
	case *protocol.CancelEvent:
		return sess.cancelResponse(ev)
	}
	return nil
}
