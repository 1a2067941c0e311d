package runtime

import (
	"strings"

	"github.com/tether-run/tether/protocol"
)

// sink takes a rollout's events, in order, for one consumer: a WebSocket
// session, a suspended rollout (which relays to its connection), an SSE
// stream.
//
// put is called with the rollout's lock held: it encodes ev at once (the
// rollout keeps mutating what ev points to) and queues it without blocking.
// An error means nobody will read the stream: the rollout stops.
//
// behind, also called with the rollout's lock held, reports whether the
// consumer's client has not yet taken frames put on acct's account (or
// cannot take any now): the rollout then holds its deltas back and merges
// them. Nothing a sink does waits for the client.
type sink interface {
	put(ev protocol.Event, acct *delivery) error
	behind(acct *delivery) bool
}

// discard is the sink of a response whose events nobody streams (HTTP
// without stream: only the final object is sent).
type discard struct{}

func (discard) put(protocol.Event, *delivery) error { return nil }
func (discard) behind(*delivery) bool               { return true }

// eventOrder is the ordering state of a rollout's events, guarded by
// rollout.mu. Sequence numbers stay gapless across steps and pauses; hosted
// calls finish in any order, but output_item.done events go out in
// output_index order: an item's waits in held until every lower index's has
// gone out, and a pause (response.done) waits for the held events.
type eventOrder struct {
	sink     sink
	streamID string // stamped on every event ("" on the default lane and over HTTP)
	seq      int
	err      error // the sink's first error: the client is gone

	doneNext int                               // lowest output index whose output_item.done has not gone out
	held     map[int]*protocol.OutputItemEvent // done events waiting for a lower index's
	pause    []protocol.PendingCall            // a response.done waiting for the held events

	merging *mergedDelta // deltas held back while the client is behind
}

// mergedDelta is a run of text or argument deltas of one item that the
// rollout holds back while its client is behind: they go out as one delta
// event (the first's, with their text joined) when the client has caught up
// or any other event is due, so their concatenation, and the sequence
// numbers, are what the client would have read one by one.
type mergedDelta struct {
	ev    protocol.Event // the first delta held
	delta *string        // its Delta field, set to text when it goes out
	text  strings.Builder
}

// emit stamps ev and sends it.
func (r *rollout) emit(ev protocol.Event) {
	r.mu.Lock()
	r.emitLocked(ev)
	r.mu.Unlock()
}

// maxMergedDelta bounds the text of one merged delta: past it the delta
// goes out behind or not, so that what a slow or departed client has not
// read is held where its bounds apply (the outbox, the replay log).
const maxMergedDelta = 64 << 10

// emitDelta sends a text or argument delta (ev, whose Delta field is delta)
// unless the client is behind: then it holds it back, and the deltas of the
// same item that follow join it (moreDelta) until it goes out (see
// mergedDelta). Merging is what keeps a slow reader's queue short without
// the loop ever waiting for it.
func (r *rollout) emitDelta(ev protocol.Event, delta *string) {
	if r.everyDelta {
		r.emit(ev)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushDeltaLocked()      // another item's
	r.out.holding.Store(true) // before behind looks at queued: see delivery
	if len(*delta) >= maxMergedDelta || !r.order.sink.behind(&r.out) {
		r.out.holding.Store(false)
		r.putLocked(ev)
		return
	}
	m := &mergedDelta{ev: ev, delta: delta}
	m.text.WriteString(*delta)
	r.order.merging = m
}

// moreDelta adds text to the delta held back, if it is one of typ for
// itemID, and reports whether it did; the merged delta goes out once the
// client has caught up or it is maxMergedDelta long. The caller builds an
// event only when it did not: most deltas to a client that is behind cost
// no event and no encoding.
func (r *rollout) moreDelta(typ protocol.EventType, itemID, text string) bool {
	if r.everyDelta {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.order.merging
	if m == nil || protocol.Type(m.ev) != typ || deltaItem(m.ev) != itemID {
		return false
	}
	m.text.WriteString(text)
	if m.text.Len() >= maxMergedDelta || !r.order.sink.behind(&r.out) {
		r.flushDeltaLocked()
	}
	return true
}

// flushDelta sends the merged delta held back, if any: the writer calls it
// (delivery.flush) when the client has caught up.
func (r *rollout) flushDelta() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushDeltaLocked()
}

func (r *rollout) flushDeltaLocked() {
	m := r.order.merging
	if m == nil {
		return
	}
	r.order.merging = nil
	r.out.holding.Store(false)
	*m.delta = m.text.String()
	r.putLocked(m.ev)
}

// deltaItem is the item_id of a delta event.
func deltaItem(ev protocol.Event) string {
	switch ev := ev.(type) {
	case *protocol.TextDeltaEvent:
		return ev.ItemID
	case *protocol.FunctionArgsDeltaEvent:
		return ev.ItemID
	case *protocol.CustomToolInputDeltaEvent:
		return ev.ItemID
	case *protocol.MCPArgsDeltaEvent:
		return ev.ItemID
	}
	return ""
}

// emitLocked sends the merged delta held back, if any, then ev: it stamps
// the next sequence number and the lane on each and puts it on the sink.
func (r *rollout) emitLocked(ev protocol.Event) {
	r.flushDeltaLocked()
	r.putLocked(ev)
}

func (r *rollout) putLocked(ev protocol.Event) {
	o := &r.order
	if o.err != nil {
		return
	}
	h := protocol.Header(ev)
	h.SequenceNumber = o.seq
	h.StreamID = o.streamID
	o.seq++
	t0 := r.srv.now()
	err := o.sink.put(ev, &r.out)
	r.out.encode.Add(int64(r.srv.now().Sub(t0)))
	if err != nil {
		o.err = err
		r.stop.abort(err)
	}
}

func (r *rollout) emitResponse(t protocol.EventType) {
	r.emit(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: t}, Response: r.resp})
}

// emitStepView sends an event of type t with the response as a pause shows
// it (stepView).
func (r *rollout) emitStepView(t protocol.EventType) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitStepViewLocked(t)
}

func (r *rollout) emitStepViewLocked(t protocol.EventType) {
	r.emitLocked(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: t}, Response: r.stepView()})
}

// sinkErr is the sink's first error, if any.
func (r *rollout) sinkErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.order.err
}

// itemDoneLocked sends the output_item.done of the item at idx once every
// lower index's has gone out, then a pause that waited for it.
func (r *rollout) itemDoneLocked(idx int, item protocol.Item) {
	o := &r.order
	ev := &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: idx, Item: item}
	if idx != o.doneNext {
		if o.held == nil {
			o.held = make(map[int]*protocol.OutputItemEvent)
		}
		o.held[idx] = ev
		return
	}
	r.emitLocked(ev)
	o.doneNext++
	for ev, ok := o.held[o.doneNext]; ok; ev, ok = o.held[o.doneNext] {
		delete(o.held, o.doneNext)
		r.emitLocked(ev)
		o.doneNext++
	}
	if len(o.held) == 0 && o.pause != nil {
		calls := o.pause
		o.pause = nil
		r.pauseLocked(calls)
	}
}

// flushDoneLocked sends the output_item.done events still owed, in order,
// when no tool can finish an item any more: the step's tools have returned,
// or the response ends. A hosted call's item that its tool did not finish
// (cut off by a cancel, a timeout or a sampler error) ends incomplete. A
// pause still waiting is dropped: its step is over.
func (r *rollout) flushDoneLocked() {
	o := &r.order
	for ; o.doneNext < len(r.resp.Output); o.doneNext++ {
		ev, ok := o.held[o.doneNext]
		if !ok {
			it := r.resp.Output[o.doneNext]
			markStatus(it, protocol.StatusIncomplete)
			ev = &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: o.doneNext, Item: it}
		}
		r.emitLocked(ev)
	}
	clear(o.held)
	o.pause = nil
}

// requireAction pauses the response on the client: once the output_item.done
// events before it are out, the response's status is requires_action and
// response.done lists calls. Tools call it from their Call goroutine; the
// loop announces the end of the pause (response.in_progress) when the step's
// tools have returned.
func (r *rollout) requireAction(calls []protocol.PendingCall) {
	r.mu.Lock()
	if len(r.order.held) > 0 {
		r.order.pause = calls
	} else {
		r.pauseLocked(calls)
	}
	r.mu.Unlock()
}

func (r *rollout) pauseLocked(calls []protocol.PendingCall) {
	defer r.srv.notify() // a draining Shutdown waits for busy rollouts only
	r.resp.Status = protocol.ResponseRequiresAction
	r.resp.RequiredAction = &protocol.RequiredAction{Type: "submit_tool_outputs",
		SubmitToolOutputs: protocol.SubmitToolOutputs{ToolCalls: calls}}
	r.emitStepViewLocked(protocol.EventDone)
}

// stepView is the response as a pause shows it: the paused step's items
// only, with their offset (see protocol.Response.OutputOffset), and the
// usage (and timings, when asked for) so far, so that a client can tell
// what each step cost. It shares the response's fields; put encodes it
// before mu is released. The loop wrote usage and timings before the
// step's tools started, and waits for them.
func (r *rollout) stepView() *protocol.Response {
	view := *r.resp
	view.Output = r.resp.Output[r.stepAt:]
	at, usage := r.stepAt, r.usage
	view.OutputOffset, view.Usage = &at, &usage
	if r.req.Includes(protocol.IncludeTimings) {
		tm := r.timings()
		view.Timings = &tm
	}
	return &view
}

// resumeLocked ends a pause whose step is over: the response runs again.
// It reports whether there was one (and its response.in_progress went out).
func (r *rollout) resumeLocked() bool {
	if r.resp.Status != protocol.ResponseRequiresAction {
		return false
	}
	r.resp.Status = protocol.ResponseInProgress
	r.resp.RequiredAction = nil
	if ev := r.restart; ev != nil {
		r.restart = nil
		r.emitLocked(ev)
	}
	r.emitStepViewLocked(protocol.EventInProgress)
	return true
}
