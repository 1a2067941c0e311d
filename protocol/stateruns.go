package protocol

import "strconv"

// The fields of a running response that change between its events (the
// echo's state runs: its status, its step's output, its usage, a pause's
// required action, its timings) and the events of a step's function
// calls and messages (their items added and done, a call's arguments
// done) are written
// here by hand, as the codec writes them, byte for byte; anything else
// (a string only the codec escapes, an item without a fast path, a field
// these do not write) takes the codec's path. A suspended rollout writes
// them at every pause and every resume: the codec's reflection was most
// of a round trip's encoding (TestStateRunsSameBytes, FuzzStateRuns).

// appendStateRun1 appends completed_at, status and incomplete_details.
func appendStateRun1(b []byte, r *Response) ([]byte, bool) {
	if r.IncompleteDetails != nil {
		return b, false
	}
	b = append(b, `,"completed_at":`...)
	b = appendIntPtr(b, r.CompletedAt)
	b = append(b, `,"status":`...)
	b, ok := appendPlain(b, string(r.Status), true)
	return append(b, `,"incomplete_details":null`...), ok
}

// appendStateRun2 appends output and error.
func appendStateRun2(b []byte, r *Response) ([]byte, bool) {
	if r.Output == nil || r.Error != nil {
		return b, false
	}
	b = append(b, `,"output":[`...)
	for i, it := range r.Output {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendItem(b, it); !ok {
			return b, false
		}
	}
	return append(b, `],"error":null`...), true
}

// appendStateRun3 appends usage.
func appendStateRun3(b []byte, r *Response) ([]byte, bool) {
	u := r.Usage
	if u == nil {
		return append(b, `,"usage":null`...), true
	}
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokensDetails.CachedTokens), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokensDetails.ReasoningTokens), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}'), true
}

// appendStateRun4 appends output_offset, forked_from, required_action and
// timings, each when it is set.
func appendStateRun4(b []byte, r *Response) ([]byte, bool) {
	ok := true
	if r.OutputOffset != nil {
		b = append(b, `,"output_offset":`...)
		b = strconv.AppendInt(b, int64(*r.OutputOffset), 10)
	}
	if r.ForkedFrom != nil {
		b = append(b, `,"forked_from":`...)
		b, ok = appendPlain(b, *r.ForkedFrom, ok)
	}
	if a := r.RequiredAction; a != nil {
		b = append(b, `,"required_action":{"type":`...)
		b, ok = appendPlain(b, a.Type, ok)
		b = append(b, `,"submit_tool_outputs":{"tool_calls":`...)
		if a.SubmitToolOutputs.ToolCalls == nil {
			b = append(b, `null`...)
		} else {
			b = append(b, '[')
			for i := range a.SubmitToolOutputs.ToolCalls {
				if i > 0 {
					b = append(b, ',')
				}
				b, ok = appendPendingCall(b, &a.SubmitToolOutputs.ToolCalls[i], ok)
			}
			b = append(b, ']')
		}
		b = append(b, `}}`...)
	}
	if t := r.Timings; t != nil {
		if len(t.AgentSampleMicros) > 0 || t.Engine != nil {
			return b, false
		}
		b = appendTimings(append(b, `,"timings":`...), t)
	}
	return b, ok
}

// appendPendingCall appends one of a required action's calls.
func appendPendingCall(b []byte, c *PendingCall, ok bool) ([]byte, bool) {
	b = append(b, '{')
	if c.Type != "" {
		b = append(b, `"type":`...)
		b, ok = appendPlain(b, string(c.Type), ok)
		b = append(b, ',')
	}
	b = append(b, `"call_id":`...)
	b, ok = appendPlain(b, c.CallID, ok)
	b, ok = appendMember(b, `,"name":`, c.Name, false, ok)
	b, ok = appendMember(b, `,"namespace":`, c.Namespace, true, ok)
	b, ok = appendMember(b, `,"arguments":`, c.Arguments, false, ok)
	b, ok = appendMember(b, `,"input":`, c.Input, true, ok)
	return append(b, '}'), ok
}

// appendTimings appends t, whose AgentSampleMicros and Engine are empty.
func appendTimings(b []byte, t *Timings) []byte {
	for _, f := range [...]struct {
		name string
		v    int64
	}{
		{`{"decode_us":`, t.DecodeMicros}, {`,"queue_us":`, t.QueueMicros}, {`,"load_us":`, t.LoadMicros},
		{`,"validate_us":`, t.ValidateMicros}, {`,"safety_us":`, t.SafetyMicros}, {`,"render_us":`, t.RenderMicros},
		{`,"first_token_us":`, t.FirstTokenMicros}, {`,"sample_us":`, t.SampleMicros}, {`,"pacer_late_us":`, t.PacerLateMicros},
		{`,"tools_us":`, t.ToolsMicros}, {`,"store_us":`, t.StoreMicros}, {`,"hop_us":`, t.HopMicros},
		{`,"journal_us":`, t.JournalMicros}, {`,"encode_us":`, t.EncodeMicros}, {`,"outbox_us":`, t.OutboxMicros},
		{`,"write_us":`, t.WriteMicros}, {`,"total_us":`, t.TotalMicros}, {`,"frames":`, int64(t.Frames)},
		{`,"rendered_tokens":`, int64(t.RenderedTokens)}, {`,"cached_tokens":`, int64(t.CachedTokens)},
		{`,"safety_bytes":`, int64(t.SafetyBytes)}, {`,"safety_flags":`, int64(t.SafetyFlags)},
	} {
		b = strconv.AppendInt(append(b, f.name...), f.v, 10)
	}
	return append(b, '}')
}

func appendIntPtr(b []byte, p *int64) []byte {
	if p == nil {
		return append(b, `null`...)
	}
	return strconv.AppendInt(b, *p, 10)
}

// appendStepEvent appends an output_item.added or .done whose item is a
// function item or a message with a fast path (appendItem), or a function
// call's arguments.done; ok
// is false (and what it appended is to be dropped) for any other value.
func appendStepEvent(b []byte, v any) (_ []byte, ok bool) {
	switch e := v.(type) {
	case *OutputItemEvent:
		if e.Item == nil {
			return b, false
		}
		b, ok = appendHeader(b, &e.EventHeader)
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(e.OutputIndex), 10)
		b = append(b, `,"item":`...)
		if !ok {
			return b, false
		}
		b, ok = appendItem(b, e.Item)
		return append(b, '}'), ok
	case *FunctionArgsDoneEvent:
		b, ok = appendHeader(b, &e.EventHeader)
		b, ok = appendMember(b, `,"item_id":`, e.ItemID, false, ok)
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(e.OutputIndex), 10)
		b, ok = appendMember(b, `,"name":`, e.Name, true, ok)
		b, ok = appendMember(b, `,"arguments":`, e.Arguments, false, ok)
		return append(b, '}'), ok
	}
	return b, false
}
