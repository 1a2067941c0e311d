package runtime

import (
	"encoding/json"
	"slices"
	"unsafe"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// onDelta turns the sampler's deltas into output items and their events.
// It runs on the loop goroutine while no tool goroutine is running.
func (r *rollout) onDelta(d sampler.Delta) {
	if !r.first {
		r.first, r.firstAt = true, r.srv.now()
	}
	if d.Kind == sampler.TextDelta || d.Kind == sampler.ArgsDelta {
		r.stepOut += len(d.Text)
		r.outBytes += int64(len(d.Text))
		// Tokens released together go out together: one event, not one
		// a token (unless every delta is to be its own event).
		if d.More && !r.everyDelta {
			r.together = append(r.together, d.Text...)
			return
		}
		if len(r.together) > 0 {
			r.together = append(r.together, d.Text...)
			d.Text = r.togetherText()
		}
	}
	idx := r.openIdx
	switch d.Kind {
	case sampler.TextStart:
		var msg *protocol.Message
		idx = r.place(func(idx int) protocol.Item {
			msg = &protocol.Message{ID: ids.Output(r.resp.ID, "msg", idx), Status: protocol.StatusInProgress, Role: protocol.RoleAssistant, Content: protocol.Contents{},
				Agent: r.agent}
			return msg
		})
		r.open, r.openIdx = msg, idx
		r.openText.Reset()
		r.openProbs = nil
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: msg})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartAdded},
			ItemID: msg.ID, OutputIndex: idx, Part: &protocol.OutputText{Annotations: []protocol.Annotation{}}})
	case sampler.TextDelta:
		if _, ok := r.open.(*protocol.Message); !ok {
			return
		}
		if r.logprobs {
			r.emitWithLogprobs(idx, d)
			return
		}
		r.openText.WriteString(d.Text)
		r.emitDelta(protocol.EventOutputTextDelta, r.open.ItemID(), idx, d.Text)
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
		if len(r.calls) >= r.srv.opts.Limits.MaxCallsPerStep {
			// Each call of a step is a goroutine and an item kept until
			// its output comes: a bound against a runaway (or scripted
			// hostile) model.
			r.abort(errTooManyCalls)
			return
		}
		typ := d.CallType
		if typ == "" {
			typ = protocol.ItemFunctionCall
		}
		c := protocol.Call{Type: typ, CallID: d.CallID, Name: d.Name, Namespace: d.Namespace}
		call := r.route(&c)
		call.call = c
		r.openCall = call
		r.openText.Reset()
		var item protocol.Item
		idx = r.place(func(idx int) protocol.Item {
			item = r.startItem(call, idx)
			attribute(item, r.agent)
			return item
		})
		r.open, r.openIdx = item, idx
		r.emitCallStart(idx, item)
	case sampler.ArgsDelta:
		if r.openCall == nil {
			return
		}
		r.openText.WriteString(d.Text)
		typ := argsDeltaType(r.open) // typed calls, web searches: none
		if typ == "" {
			return
		}
		r.emitDelta(typ, r.open.ItemID(), idx, d.Text)
	case sampler.PartEnd:
		if d.Incomplete {
			r.endPart(protocol.StatusIncomplete)
		} else {
			r.endPart(protocol.StatusCompleted)
		}
	}
}

// togetherText is the text of the tokens released together, which it
// empties: a view of r.together's bytes, valid until the next delta's
// text is added to it. Nothing keeps a delta's text past onDelta (the
// open item's text, a merged delta's and the sinks' frames are copies), so
// a run of tokens released together costs no string of its own.
func (r *rollout) togetherText() string {
	s := unsafe.String(unsafe.SliceData(r.together), len(r.together))
	r.together = r.together[:0]
	return s
}

// argsDeltaType is the delta event of a call item's arguments (or input),
// "" for a call that streams none.
func argsDeltaType(it protocol.Item) protocol.EventType {
	switch it.(type) {
	case *protocol.FunctionCall:
		return protocol.EventFunctionArgsDelta
	case *protocol.CustomToolCall:
		return protocol.EventCustomToolInputDelta
	case *protocol.MCPCall:
		return protocol.EventMCPArgsDelta
	}
	return ""
}

// emitCallStart announces a call's item: output_item.added, and an MCP
// call's in_progress.
func (r *rollout) emitCallStart(idx int, item protocol.Item) {
	r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: item})
	if it, ok := item.(*protocol.MCPCall); ok {
		r.emit(&protocol.MCPEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPCallInProgress}, OutputIndex: idx, ItemID: it.ID})
	}
}

// emitCommands streams a shell call's commands, each added, its text and
// done, once its action is whole.
func (r *rollout) emitCommands(sh *protocol.ShellCall, idx int) {
	var action struct {
		Commands []string `json:"commands"`
	}
	if json.Unmarshal(sh.Action, &action) != nil {
		return
	}
	for i, cmd := range action.Commands {
		empty := ""
		for _, ev := range []struct {
			typ            protocol.EventType
			command, delta *string
		}{{protocol.EventShellCommandAdded, &empty, nil}, {protocol.EventShellCommandDelta, nil, &cmd}, {protocol.EventShellCommandDone, &cmd, nil}} {
			r.emit(&protocol.ShellCommandEvent{EventHeader: protocol.EventHeader{Type: ev.typ}, OutputIndex: idx, CommandIndex: i, Command: ev.command, Delta: ev.delta})
		}
	}
}

// openPart is the output_text part of the open message, kept on the message
// so that annotations accumulate on it.
func (r *rollout) openPart(msg *protocol.Message) *protocol.OutputText {
	if len(msg.Content) == 0 {
		msg.Content = protocol.Contents{&protocol.OutputText{Annotations: []protocol.Annotation{}}}
	}
	return msg.Content[0].(*protocol.OutputText)
}

// place puts the item make makes for its output index at the end of the
// response's output, as it begins (an item streams there), and counts it
// among the loop's own: it returns the index.
func (r *rollout) place(make func(idx int) protocol.Item) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.placeLocked(make)
}

func (r *rollout) placeLocked(make func(idx int) protocol.Item) int {
	idx := len(r.resp.Output)
	r.resp.Output = append(r.resp.Output, make(idx))
	r.own = append(r.own, idx)
	return idx
}

// endPart closes the open output item with status, in its place in the
// output. A hosted call's item stays open: its tool finishes it.
func (r *rollout) endPart(status protocol.ItemStatus) {
	idx := r.openIdx
	text := r.openText.String()
	if c := r.openCall; c != nil && c.kind != clientCall && status == protocol.StatusCompleted && !r.takeToolCall() {
		// Past max_tool_calls, a hosted call never runs: it ends
		// incomplete, as one cut off mid-arguments does.
		status = protocol.StatusIncomplete
	}
	switch it := r.open.(type) {
	case *protocol.Message:
		part := r.openPart(it)
		part.Text = text
		probs := noLogprobs
		if r.logprobs {
			part.Logprobs = slices.Clip(r.openProbs)
			if part.Logprobs == nil {
				part.Logprobs = []protocol.LogProb{}
			}
			probs = &part.Logprobs
		}
		r.emit(&protocol.TextDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDone},
			ItemID: it.ID, OutputIndex: idx, Text: &text, Logprobs: probs})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartDone},
			ItemID: it.ID, OutputIndex: idx, Part: part})
		it.Status = status
	case *protocol.FunctionCall:
		it.Arguments = text
		it.Status = status
		r.emit(&protocol.FunctionArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDone},
			ItemID: it.ID, OutputIndex: idx, Name: it.Name, Arguments: text})
	case *protocol.CustomToolCall:
		it.Input = text
		it.Status = status
		r.emit(&protocol.CustomToolInputDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCustomToolInputDone},
			ItemID: it.ID, OutputIndex: idx, Input: text})
	case *protocol.MultiAgentCall:
		it.Arguments = text
	case *protocol.MCPCall:
		it.Arguments = text
		r.emit(&protocol.MCPArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPArgsDone},
			ItemID: it.ID, OutputIndex: idx, Arguments: text})
	case nil:
		return
	default:
		// A typed call (shell, apply_patch, …): its payload streams no
		// events of its own; the item is done with it.
		if c, ok := protocol.CallOf(it); ok {
			c.Input = text
			r.open = protocol.ItemOf(c, status)
			attribute(r.open, r.agent)
			if sh, ok := r.open.(*protocol.ShellCall); ok {
				r.emitCommands(sh, idx)
			}
		}
	}
	r.mu.Lock()
	r.resp.Output[idx] = r.open // a typed call's item is made anew with its payload
	r.mu.Unlock()
	// A client's call item is done when its input is; a hosted tool's own
	// item (web_search_call) is done when its tool returns.
	_, isClientCall := protocol.CallOf(r.open)
	toolFinishes := r.openCall != nil && !isClientCall
	if c := r.openCall; c != nil && status == protocol.StatusCompleted {
		c.call.Input = text
		c.index, c.pos, c.toolFinishes = idx, len(r.items), toolFinishes
		r.calls = append(r.calls, c)
	}
	switch {
	case toolFinishes && status != protocol.StatusCompleted:
		// Cut off mid-arguments, a hosted call never runs: it ends incomplete.
		markStatus(r.open, protocol.StatusIncomplete)
		fallthrough
	case !toolFinishes:
		r.mu.Lock()
		r.itemDoneLocked(idx, r.open)
		r.mu.Unlock()
	}
	// Otherwise the item's output_item.done comes from dispatch, when its tool returns.
	r.items = append(r.items, r.open)
	r.open, r.openCall = nil, nil
}

// emitWithLogprobs sends a text delta with its tokens' logprobs, as the
// model gave them (none: an empty list), and keeps them for the message's
// output_text.
func (r *rollout) emitWithLogprobs(idx int, d sampler.Delta) {
	r.openText.WriteString(d.Text)
	probs := slices.Clip(d.Logprobs)
	if probs == nil {
		probs = []protocol.LogProb{}
	}
	r.openProbs = append(r.openProbs, probs...)
	r.emit(&protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta},
		ItemID: r.open.ItemID(), OutputIndex: idx, Delta: d.Text, Logprobs: &probs})
}
