package runtime

import (
	"unsafe"

	"github.com/tether-run/tether/runtime/internal/outbox"

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
	put(ev protocol.Event, acct *outbox.Delivery) error
	behind(acct *outbox.Delivery) bool
}

// discard is the sink of a response whose events nobody streams (HTTP
// without stream: only the final object is sent).
type discard struct{}

func (discard) put(protocol.Event, *outbox.Delivery) error { return nil }
func (discard) behind(*outbox.Delivery) bool               { return true }

// eventOrder is the ordering state of a rollout's events, guarded by
// rollout.mu. Sequence numbers stay gapless across steps and pauses; hosted
// calls finish in any order, but the loop's output_item.done events go out
// in the order of its items (rollout.own): an item's waits in held until
// every earlier one's has gone out, and a pause (response.done) waits for
// the held events.
type eventOrder struct {
	*eventStream // the response's, which its loops share

	doneNext int                               // the first of rollout.own whose output_item.done has not gone out
	held     map[int]*protocol.OutputItemEvent // done events waiting for a lower index's
	pause    []protocol.PendingCall            // a response.done waiting for the held events

	merging mergedDelta // deltas held back while the client is behind
}

// eventStream is where a response's events go, in one sequence, whichever
// of its loops sends them.
type eventStream struct {
	sink     sink
	streamID string // stamped on every event ("" on the default lane and over HTTP)
	seq      int
	err      error // the sink's first error: the client is gone
}

// mergedDelta is a run of text or argument deltas of one item that the
// rollout holds back while its client is behind: they go out as one delta
// event (the first's place in the stream, with their text joined) when the
// client has caught up or any other event is due, so their concatenation,
// and the sequence numbers, are what the client would have read one by one.
type mergedDelta struct {
	on     bool // a run is held
	typ    protocol.EventType
	itemID string
	index  int    // output_index
	text   []byte // the run's text; its array is kept from one run to the next
}

// deltaEvents are a rollout's delta events, one of each type, each reused
// for the next delta of its type: a sink encodes an event as it takes it,
// so a streamed token costs no event of its own. Guarded by rollout.mu.
type deltaEvents struct {
	text   protocol.TextDeltaEvent
	args   protocol.FunctionArgsDeltaEvent
	custom protocol.CustomToolInputDeltaEvent
	mcp    protocol.MCPArgsDeltaEvent
}

// event is the delta of type typ for item itemID at output index idx.
func (d *deltaEvents) event(typ protocol.EventType, itemID string, idx int, text string) protocol.Event {
	h := protocol.EventHeader{Type: typ}
	switch typ {
	case protocol.EventOutputTextDelta:
		d.text = protocol.TextDeltaEvent{EventHeader: h, ItemID: itemID, OutputIndex: idx, Delta: text, Logprobs: noLogprobs}
		return &d.text
	case protocol.EventCustomToolInputDelta:
		d.custom = protocol.CustomToolInputDeltaEvent{EventHeader: h, ItemID: itemID, OutputIndex: idx, Delta: text}
		return &d.custom
	case protocol.EventMCPArgsDelta:
		d.mcp = protocol.MCPArgsDeltaEvent{EventHeader: h, ItemID: itemID, OutputIndex: idx, Delta: text}
		return &d.mcp
	}
	d.args = protocol.FunctionArgsDeltaEvent{EventHeader: h, ItemID: itemID, OutputIndex: idx, Delta: text}
	return &d.args
}

// deltaEvent is r's delta event of type typ (deltaEvents.event).
func (r *rollout) deltaEvent(typ protocol.EventType, itemID string, idx int, text string) protocol.Event {
	if r.deltas == nil {
		r.deltas = new(deltaEvents)
	}
	return r.deltas.event(typ, itemID, idx, text)
}

// noLogprobs is the empty logprobs of every text delta ("logprobs":[]):
// one, never changed.
var noLogprobs = &[]protocol.LogProb{}

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

// emitDelta sends a text or argument delta of type typ for item itemID (at
// output index idx) unless the client is behind: then it holds it back, and
// the deltas of the same item that follow join it until it goes out (see
// mergedDelta): when the client has caught up, when any other event is due,
// or once it is maxMergedDelta long. Merging is what keeps a slow reader's
// queue short without the loop ever waiting for it; a delta that joins a
// run costs no event and no encoding.
func (r *rollout) emitDelta(typ protocol.EventType, itemID string, idx int, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.everyDelta {
		r.putLocked(r.deltaEvent(typ, itemID, idx, text))
		return
	}
	m := &r.order.merging
	if m.on && m.typ == typ && m.itemID == itemID {
		m.text = append(m.text, text...)
		if len(m.text) >= maxMergedDelta || !r.order.sink.behind(&r.out) {
			r.flushDeltaLocked()
		}
		return
	}
	r.flushDeltaLocked()      // another item's
	r.out.Holding.Store(true) // before behind looks at Queued: see outbox.Delivery
	if len(text) >= maxMergedDelta || !r.order.sink.behind(&r.out) {
		r.out.Holding.Store(false)
		r.putLocked(r.deltaEvent(typ, itemID, idx, text))
		return
	}
	m.on, m.typ, m.itemID, m.index = true, typ, itemID, idx
	m.text = append(m.text[:0], text...)
}

// flushDelta sends the merged delta held back, if any: the writer calls it
// (outbox.Delivery.Flush) when the client has caught up.
func (r *rollout) flushDelta() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushDeltaLocked()
}

// maxKeptMerge is the merged text's array a rollout keeps for its next
// run; a larger one (a slow client's) is let go.
const maxKeptMerge = 4 << 10

func (r *rollout) flushDeltaLocked() {
	m := &r.order.merging
	if !m.on {
		return
	}
	m.on = false
	r.out.Holding.Store(false)
	// The sink encodes the event before putLocked returns: the text may be
	// a view of the run's array, which the next run writes again.
	r.putLocked(r.deltaEvent(m.typ, m.itemID, m.index, unsafe.String(unsafe.SliceData(m.text), len(m.text))))
	if cap(m.text) > maxKeptMerge {
		m.text = nil
	}
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
	h.Agent = r.agent // a sub-agent's events name it
	o.seq++
	if rec := r.srv.opts.Recorder; rec != nil {
		rec.Event(r.srv.now(), r.resp.ID, ev)
	}
	t0 := r.srv.tick()
	err := o.sink.put(ev, &r.out)
	r.out.Encode.Add(int64(r.srv.tick().Sub(t0)))
	if err != nil {
		o.err = err
		r.abort(err)
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

// itemDoneLocked sends the output_item.done of the loop's item at idx
// once every earlier one's has gone out, then a pause that waited for it.
func (r *rollout) itemDoneLocked(idx int, item protocol.Item) {
	o := &r.order
	ev := &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: idx, Item: item}
	if o.doneNext >= len(r.own) || idx != r.own[o.doneNext] {
		if o.held == nil {
			o.held = make(map[int]*protocol.OutputItemEvent)
		}
		o.held[idx] = ev
		return
	}
	r.emitDoneLocked(ev)
	o.doneNext++
	for o.doneNext < len(r.own) {
		ev, ok := o.held[r.own[o.doneNext]]
		if !ok {
			break
		}
		delete(o.held, r.own[o.doneNext])
		r.emitDoneLocked(ev)
		o.doneNext++
	}
	if len(o.held) == 0 && o.pause != nil {
		calls := o.pause
		o.pause = nil
		r.pauseLocked(calls)
	}
}

// emitDoneLocked sends an item's output_item.done; a multi-agent
// response's items join its tree's log as they are done (agents.log).
func (r *rollout) emitDoneLocked(ev *protocol.OutputItemEvent) {
	r.emitLocked(ev)
	if t := r.tree; t != nil {
		t.log = append(t.log, ev.Item)
		t.loggedLocked(ev.Item)
	}
}

// flushDoneLocked sends the output_item.done events still owed, in order,
// when no tool can finish an item any more: the step's tools have returned,
// or the response ends. A hosted call's item that its tool did not finish
// (cut off by a cancel, a timeout or a sampler error) ends incomplete. A
// pause still waiting is dropped: its step is over.
func (r *rollout) flushDoneLocked() {
	o := &r.order
	for ; o.doneNext < len(r.own); o.doneNext++ {
		idx := r.own[o.doneNext]
		ev, ok := o.held[idx]
		if !ok {
			it := r.resp.Output[idx]
			markStatus(it, protocol.StatusIncomplete)
			ev = &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: idx, Item: it}
		}
		r.emitDoneLocked(ev)
	}
	clear(o.held)
	o.pause = nil
}

// requireAction pauses the response on the client: once the output_item.done
// events before it are out, the response's status is requires_action and
// response.done lists calls (in the multi-agent beta's dialect, the
// response waits in_progress, and nothing is sent: pauseLocked). The suspension calls it on the loop's
// goroutine as it announces a pause; resumeLocked, and nothing else, ends
// the pause with response.in_progress.
func (r *rollout) requireAction(calls []protocol.PendingCall) {
	r.mu.Lock()
	if len(r.order.held) > 0 {
		r.order.pause = calls
	} else {
		r.pauseLocked(calls)
	}
	r.mu.Unlock()
}

// requireActionSilentlyLocked pauses the response on the client without
// announcing it: a rollout taken over at a pause whose response.done the
// server that wrote its checkpoint sent. The caller holds mu.
func (r *rollout) requireActionSilentlyLocked(calls []protocol.PendingCall) {
	r.requiresActionLocked(calls)
	r.keepEchoParkedLocked() // parked, as at an announced pause (pauseLocked)
}

// requiresActionLocked sets the response's status to requires_action on
// calls. The caller holds mu.
func (r *rollout) requiresActionLocked(calls []protocol.PendingCall) {
	r.resp.Status = protocol.ResponseRequiresAction
	r.resp.RequiredAction = &protocol.RequiredAction{Type: "submit_tool_outputs",
		SubmitToolOutputs: protocol.SubmitToolOutputs{ToolCalls: calls}}
}

// restartStep has a rollout taken over in the middle of a step, from a
// model that may not say the same twice, announce the step's run again as
// it begins (resumeLocked): its client, which has every frame up to after,
// drops what it has of the step after discardAfter (the pause's), and the
// run again is numbered from after. outputIndex is the step's first
// output index. It is called before the rollout starts.
func (r *rollout) restartStep(after, discardAfter, outputIndex int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restart = &protocol.StepRestartedEvent{EventHeader: protocol.EventHeader{Type: protocol.EventStepRestarted},
		DiscardAfter: discardAfter, OutputIndex: outputIndex}
	r.order.seq = after + 1
}

func (r *rollout) pauseLocked(calls []protocol.PendingCall) {
	defer r.srv.notify() // a draining Shutdown waits for busy rollouts only
	if r.agent != nil {
		// A sub-agent's wait: told (response.waiting, naming it) when
		// asked for, and nothing else: the response is not paused.
		r.flushDeltaLocked()
		if r.req.Includes(protocol.IncludeWaits) {
			r.emitWaitingLocked(calls)
		}
		return
	}
	r.requiresActionLocked(calls)
	if r.inbox.steerCount() > 0 {
		// Steered while the step ran: the input waits for these outputs.
		// Told before the response.done, whose checkpoint (a durable
		// rollout's) then counts it among the events sent.
		required := make([]protocol.RequiredInput, len(calls))
		for i, c := range calls {
			required[i] = requiredInput(c.Type, c.CallID, c.Name)
		}
		r.emitSteerPendingLocked(required)
	}
	if r.req.MultiAgentEnabled() {
		// The multi-agent beta's waiting response: it stays in_progress,
		// its calls told by their output_item.done events, and no event
		// marks the pause (nor its end, resumeLocked) unless the request
		// asked for response.waiting.
		r.flushDeltaLocked()
		if r.req.Includes(protocol.IncludeWaits) {
			r.emitWaitingLocked(calls)
		}
		if w, ok := r.order.sink.(waiter); ok && r.order.err == nil {
			w.wait(r.order.seq)
		}
	} else {
		r.emitStepViewLocked(protocol.EventDone)
	}
	// Parked, it streams nothing until answered: its delta buffers go.
	r.order.merging.text, r.together, r.deltas = nil, nil, nil
	r.keepEchoParkedLocked()
}

// keepEchoParkedLocked keeps the response's echo of its request
// (Response.KeepEcho) while the rollout is parked, charged to the memory
// budget as its context is (a parked rollout is held by the thousand):
// the response.in_progress that ends the pause, the frame its client
// waits for, is then encoded from it, rather than from the request's
// fields again while the append waits. Its bytes are about those of the
// instructions and tools, whose tokens the rollout holds already. With no
// room for it in the budget, it goes, and resumeLocked encodes it again.
// The caller holds mu.
func (r *rollout) keepEchoParkedLocked() {
	n := int64(r.resp.EchoSize())
	if n <= r.echoHeld {
		return
	}
	if r.held.take(r.srv.mem, n-r.echoHeld) != nil {
		r.resp.DropEcho()
		return
	}
	r.echoHeld = n
}

// emitWaitingLocked tells the client that the response waits on calls
// (protocol.EventWaiting), with the usage and timings so far, as stepView
// has them. The caller holds mu.
func (r *rollout) emitWaitingLocked(calls []protocol.PendingCall) {
	ev := &protocol.WaitingEvent{EventHeader: protocol.EventHeader{Type: protocol.EventWaiting}, ResponseID: r.resp.ID,
		CallIDs: make([]string, len(calls)), Usage: r.usage}
	for i, c := range calls {
		ev.CallIDs[i] = c.CallID
	}
	if r.req.Includes(protocol.IncludeTimings) {
		tm := r.timings()
		ev.Timings = &tm
	}
	r.emitLocked(ev)
}

// stepView is the response as a pause shows it: the paused step's items
// only, with their offset (see protocol.Response.OutputOffset), and the
// usage (and timings, when asked for) so far, so that a client can tell
// what each step cost. It shares the response's fields; put encodes it
// before mu is released. The loop wrote usage and timings before the
// step's tools started, and waits for them.
func (r *rollout) stepView() *protocol.Response {
	view := *r.resp
	if r.req.MultiAgentEnabled() && view.Status == protocol.ResponseRequiresAction {
		view.Status, view.RequiredAction = protocol.ResponseInProgress, nil // it waits in_progress
	}
	view.Output = r.resp.Output[r.stepAt:]
	at, usage := r.stepAt, r.usage
	view.OutputOffset, view.Usage = &at, &usage
	if r.req.Includes(protocol.IncludeTimings) {
		tm := r.timings()
		view.Timings = &tm
	}
	return &view
}
