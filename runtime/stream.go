package runtime

import (
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// emit stamps the next sequence number and the lane on ev and sends it. Tool
// goroutines emit too, so it holds mu; sequence numbers stay gapless across
// steps and pauses.
func (r *Rollout) emit(ev protocol.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitLocked(ev)
}

func (r *Rollout) emitLocked(ev protocol.Event) {
	if r.emitErr != nil {
		return
	}
	h := protocol.Header(ev)
	h.SequenceNumber = r.seq
	h.StreamID = r.streamID
	r.seq++
	if err := r.sink(ev); err != nil {
		r.emitErr = err
		r.cancel(err)
	}
}

func (r *Rollout) emitResponse(t protocol.EventType) {
	r.emit(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: t}, Response: r.resp})
}

// onDelta turns the sampler's deltas into output items and their events.
// It runs on the loop goroutine while no tool goroutine is running.
func (r *Rollout) onDelta(d sampler.Delta) {
	idx := len(r.resp.Output)
	switch d.Kind {
	case sampler.TextStart:
		msg := &protocol.Message{ID: newID("msg"), Status: protocol.StatusInProgress, Role: protocol.RoleAssistant, Content: protocol.Contents{}}
		r.open = msg
		r.openText.Reset()
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: msg})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartAdded},
			ItemID: msg.ID, OutputIndex: idx, Part: &protocol.OutputText{Annotations: []protocol.Annotation{}}})
	case sampler.TextDelta:
		if _, ok := r.open.(*protocol.Message); !ok {
			return
		}
		r.openText.WriteString(d.Text)
		r.emit(&protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta},
			ItemID: r.open.ItemID(), OutputIndex: idx, Delta: d.Text, Logprobs: &[]protocol.LogProb{}})
	case sampler.Citation:
		msg, ok := r.open.(*protocol.Message)
		if !ok || d.Annotation == nil {
			return
		}
		part := r.openPart(msg)
		part.Annotations = append(part.Annotations, *d.Annotation)
		r.emit(&protocol.AnnotationAddedEvent{EventHeader: protocol.EventHeader{Type: protocol.EventAnnotationAdded},
			ItemID: msg.ID, OutputIndex: idx, AnnotationIndex: len(part.Annotations) - 1, Annotation: *d.Annotation})
	case sampler.CallStart:
		call := &stepCall{call: protocol.FunctionCall{CallID: d.CallID, Name: d.Name}, tool: r.toolFor(d.Name)}
		r.openCall = call
		r.openText.Reset()
		item := startItem(call)
		r.open = item
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: item})
	case sampler.ArgsDelta:
		if r.openCall == nil {
			return
		}
		r.openText.WriteString(d.Text)
		if fc, ok := r.open.(*protocol.FunctionCall); ok { // hosted calls do not stream arguments
			r.emit(&protocol.FunctionArgsDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDelta},
				ItemID: fc.ID, OutputIndex: idx, Delta: d.Text})
		}
	case sampler.PartEnd:
		if d.Incomplete {
			r.endPart(protocol.StatusIncomplete)
		} else {
			r.endPart(protocol.StatusCompleted)
		}
	}
}

// openPart is the output_text part of the open message, kept on the message
// so that annotations accumulate on it.
func (r *Rollout) openPart(msg *protocol.Message) *protocol.OutputText {
	if len(msg.Content) == 0 {
		msg.Content = protocol.Contents{&protocol.OutputText{Annotations: []protocol.Annotation{}}}
	}
	return msg.Content[0].(*protocol.OutputText)
}

// endPart closes the open output item with status and appends it to the
// output. A hosted call's item stays open: its tool finishes it.
func (r *Rollout) endPart(status protocol.ItemStatus) {
	idx := len(r.resp.Output)
	text := r.openText.String()
	switch it := r.open.(type) {
	case *protocol.Message:
		part := r.openPart(it)
		part.Text = text
		r.emit(&protocol.TextDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDone},
			ItemID: it.ID, OutputIndex: idx, Text: &text, Logprobs: &[]protocol.LogProb{}})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartDone},
			ItemID: it.ID, OutputIndex: idx, Part: part})
		it.Status = status
	case *protocol.FunctionCall:
		it.Arguments = text
		it.Status = status
		r.emit(&protocol.FunctionArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDone},
			ItemID: it.ID, OutputIndex: idx, Name: it.Name, Arguments: text})
	case nil:
		return
	}
	_, isFunc := r.open.(*protocol.FunctionCall)
	hosted := r.openCall != nil && !isFunc
	if c := r.openCall; c != nil && status == protocol.StatusCompleted {
		c.call.Arguments = text
		c.index, c.pos = idx, len(r.items)
		r.calls = append(r.calls, c)
	}
	switch {
	case hosted && status != protocol.StatusCompleted:
		// Cut off mid-arguments, a hosted call never runs: it ends incomplete.
		markStatus(r.open, protocol.StatusIncomplete)
		fallthrough
	case !hosted:
		r.mu.Lock()
		r.itemDoneLocked(idx, r.open)
		r.mu.Unlock()
	}
	// A running hosted call's output_item.done comes from dispatch, when its tool returns.
	r.resp.Output = append(r.resp.Output, r.open)
	r.items = append(r.items, r.open)
	r.open, r.openCall = nil, nil
}

// itemDoneLocked sends the output_item.done of the item at idx once every
// lower index's has gone out, then a pause that waited for it.
func (r *Rollout) itemDoneLocked(idx int, item protocol.Item) {
	ev := &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: idx, Item: item}
	if idx != r.doneNext {
		if r.held == nil {
			r.held = make(map[int]*protocol.OutputItemEvent)
		}
		r.held[idx] = ev
		return
	}
	r.emitLocked(ev)
	r.doneNext++
	for ev, ok := r.held[r.doneNext]; ok; ev, ok = r.held[r.doneNext] {
		delete(r.held, r.doneNext)
		r.emitLocked(ev)
		r.doneNext++
	}
	if len(r.held) == 0 && r.heldPause != nil {
		calls := r.heldPause
		r.heldPause = nil
		r.pauseLocked(calls)
	}
}

// flushDoneLocked sends the output_item.done events still owed, in order,
// when no tool can finish an item any more: the step's tools have returned,
// or the response ends. A hosted call's item that its tool did not finish
// (cut off by a cancel, a timeout or a sampler error) ends incomplete. A
// pause still waiting is dropped: its step is over.
func (r *Rollout) flushDoneLocked() {
	for ; r.doneNext < len(r.resp.Output); r.doneNext++ {
		ev, ok := r.held[r.doneNext]
		if !ok {
			it := r.resp.Output[r.doneNext]
			markStatus(it, protocol.StatusIncomplete)
			ev = &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: r.doneNext, Item: it}
		}
		r.emitLocked(ev)
	}
	clear(r.held)
	r.heldPause = nil
}
