package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// EventType names a server event.
type EventType string

// Server event types: every streaming event of the Open Responses spec, plus
// tether's suspended-rollout extension (response.done, response.cancelled).
const (
	EventCreated    EventType = "response.created"
	EventQueued     EventType = "response.queued"
	EventInProgress EventType = "response.in_progress"
	EventCompleted  EventType = "response.completed"
	EventFailed     EventType = "response.failed"
	EventIncomplete EventType = "response.incomplete"
	EventCancelled  EventType = "response.cancelled"
	EventDone       EventType = "response.done"

	EventOutputItemAdded  EventType = "response.output_item.added"
	EventOutputItemDone   EventType = "response.output_item.done"
	EventContentPartAdded EventType = "response.content_part.added"
	EventContentPartDone  EventType = "response.content_part.done"

	EventOutputTextDelta   EventType = "response.output_text.delta"
	EventOutputTextDone    EventType = "response.output_text.done"
	EventAnnotationAdded   EventType = "response.output_text.annotation.added"
	EventRefusalDelta      EventType = "response.refusal.delta"
	EventRefusalDone       EventType = "response.refusal.done"
	EventReasoningDelta    EventType = "response.reasoning.delta"
	EventReasoningDone     EventType = "response.reasoning.done"
	EventSummaryPartAdded  EventType = "response.reasoning_summary_part.added"
	EventSummaryPartDone   EventType = "response.reasoning_summary_part.done"
	EventSummaryTextDelta  EventType = "response.reasoning_summary_text.delta"
	EventSummaryTextDone   EventType = "response.reasoning_summary_text.done"
	EventFunctionArgsDelta EventType = "response.function_call_arguments.delta"
	EventFunctionArgsDone  EventType = "response.function_call_arguments.done"
	EventError             EventType = "error"

	// EventStepRestarted is tether's own, for durable suspended rollouts:
	// a rollout taken over from its checkpoint in the middle of a step
	// runs the step again from its start, and its model (an upstream one)
	// may not say the same the second time. The events after
	// discard_after, up to this one, were the first run's: the client
	// drops what it built from them (the items from output_index on), and
	// the step's events follow.
	EventStepRestarted EventType = "response.step_restarted"

	// EventCompactionCompacting: the server compacts the context
	// (context_management) into the compaction output item it names.
	EventCompactionCompacting EventType = "response.compaction.compacting"
)

// CompactionCompactingEvent is response.compaction.compacting.
type CompactionCompactingEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
}

// EventHeader is the part every server event shares. The runtime stamps
// SequenceNumber and StreamID as it sends the event.
type EventHeader struct {
	Type           EventType `json:"type"`
	SequenceNumber int       `json:"sequence_number"`
	StreamID       string    `json:"stream_id,omitempty"`
	// Agent is the agent of a multi-agent response that the event is
	// about (its items' streaming, its calls); nil on the response's own
	// events (created, completed) and outside the multi-agent beta.
	Agent *AgentRef `json:"agent,omitempty"`
}

func (h *EventHeader) header() *EventHeader { return h }

// Terminal reports whether ev ends its response: completed, failed,
// incomplete or cancelled (response.done, a suspended rollout's pause,
// does not).
func Terminal(ev Event) bool {
	switch Type(ev) {
	case EventCompleted, EventFailed, EventIncomplete, EventCancelled:
		return true
	}
	return false
}

// Header returns the event's shared header, for stamping.
func Header(e Event) *EventHeader { return e.header() }

// Event is a server event: a sealed union of the *Event types in this file.
type Event interface {
	header() *EventHeader
}

// ResponseEvent carries a response snapshot: created, queued, in_progress,
// completed, failed, incomplete, cancelled, and done (suspended).
type ResponseEvent struct {
	EventHeader
	Response *Response `json:"response"`
}

// StepRestartedEvent is response.step_restarted (EventStepRestarted).
type StepRestartedEvent struct {
	EventHeader
	DiscardAfter int `json:"discard_after"` // the last sequence_number of the events kept
	OutputIndex  int `json:"output_index"`  // the first output item of the step run again
}

// OutputItemEvent is output_item.added and output_item.done.
type OutputItemEvent struct {
	EventHeader
	OutputIndex int  `json:"output_index"`
	Item        Item `json:"item"`
}

// ContentPartEvent is content_part.added and content_part.done.
type ContentPartEvent struct {
	EventHeader
	ItemID       string  `json:"item_id"`
	OutputIndex  int     `json:"output_index"`
	ContentIndex int     `json:"content_index"`
	Part         Content `json:"part"`
}

// TextDeltaEvent is output_text.delta (with logprobs), and refusal.delta and
// reasoning.delta (without).
type TextDeltaEvent struct {
	EventHeader
	ItemID       string     `json:"item_id"`
	OutputIndex  int        `json:"output_index"`
	ContentIndex int        `json:"content_index"`
	Delta        string     `json:"delta"`
	Logprobs     *[]LogProb `json:"logprobs,omitempty"`
}

// TextDoneEvent is output_text.done and reasoning.done (text), and
// refusal.done (refusal).
type TextDoneEvent struct {
	EventHeader
	ItemID       string     `json:"item_id"`
	OutputIndex  int        `json:"output_index"`
	ContentIndex int        `json:"content_index"`
	Text         *string    `json:"text,omitempty"`
	Refusal      *string    `json:"refusal,omitempty"`
	Logprobs     *[]LogProb `json:"logprobs,omitempty"`
}

// AnnotationAddedEvent is output_text.annotation.added.
type AnnotationAddedEvent struct {
	EventHeader
	ItemID          string     `json:"item_id"`
	OutputIndex     int        `json:"output_index"`
	ContentIndex    int        `json:"content_index"`
	AnnotationIndex int        `json:"annotation_index"`
	Annotation      Annotation `json:"annotation"`
}

// SummaryPartEvent is reasoning_summary_part.added and .done.
type SummaryPartEvent struct {
	EventHeader
	ItemID       string  `json:"item_id"`
	OutputIndex  int     `json:"output_index"`
	SummaryIndex int     `json:"summary_index"`
	Part         Content `json:"part"`
}

// SummaryTextEvent is reasoning_summary_text.delta (Delta) and .done (Text).
type SummaryTextEvent struct {
	EventHeader
	ItemID       string  `json:"item_id"`
	OutputIndex  int     `json:"output_index"`
	SummaryIndex int     `json:"summary_index"`
	Delta        *string `json:"delta,omitempty"`
	Text         *string `json:"text,omitempty"`
}

// FunctionArgsDeltaEvent is function_call_arguments.delta.
type FunctionArgsDeltaEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

// FunctionArgsDoneEvent is function_call_arguments.done.
type FunctionArgsDoneEvent struct {
	EventHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name,omitempty"`
	Arguments   string `json:"arguments"`
}

// ErrorEvent is the SSE error event (Open Responses' nested shape).
type ErrorEvent struct {
	EventHeader
	Error ErrorPayload `json:"error"`
}

// Type returns the event's type.
func Type(e Event) EventType { return e.header().Type }

// DecodeEvent decodes a server event, for clients and tests. Unknown types
// are an error.
func DecodeEvent(data []byte) (Event, *Error) { return decodeEvent(data, readWhole) }

// DecodeEventLean is DecodeEvent for a client that reads what a response
// did, not what it was offered: the Response of a response event leaves
// out the tools it echoes (Tools is nil), which are about half of a
// suspended rollout's pause and take half the time it decodes in.
func DecodeEventLean(data []byte) (Event, *Error) { return decodeEvent(data, readLean) }

// SkippedEvent is an event its client chose not to read
// (DecodeEventSkipping): its header only, which orders and routes it.
type SkippedEvent struct {
	EventHeader
}

// DecodeEventSkipping is DecodeEventLean for a client that uses a few of
// the event types: an event whose type keep refuses is read no further than
// its header and is a *SkippedEvent; the rest of it is read past, its
// strings and brackets followed, nothing else checked. A response's resumes
// (their response objects), items added, content parts and done texts are
// most of a client's decoding when it only watches the deltas and the
// calls. A pause (response.done) that keep refuses is still decoded, as
// every client of a suspended rollout answers it, but its Response leaves
// out its output too (Output is nil): the step's items came in their
// output_item.done events, and they are most of a pause's decoding. A frame
// whose type is not its first member is decoded whole.
func DecodeEventSkipping(data []byte, keep func(EventType) bool) (Event, *Error) {
	if t, ok := leadingType(data); ok && !keep(EventType(t)) {
		if EventType(t) == EventDone {
			if e, perr := decodeEventAs(EventDone, data, readPause); perr == nil && Type(e) == EventDone {
				return e, nil
			}
		} else if h, ok := scanHeader(data); ok && h.Type == EventType(t) {
			return &SkippedEvent{EventHeader: h}, nil
		}
	}
	return decodeEvent(data, readLean)
}

// reading is how much of a response object an event's decoding reads.
type reading int

const (
	readWhole reading = iota
	readLean          // without the tools it echoes
	readPause         // without its tools and its output
)

func decodeEvent(data []byte, read reading) (Event, *Error) {
	if e, ok := decodeDelta(data); ok {
		return e, nil
	}
	// Servers write the type first, as tether and OpenAI do: then it is
	// read off the frame's head instead of decoding the frame twice. The
	// event decoded must agree (a repeated "type" takes its last value), or
	// the frame is read the long way.
	if t, ok := leadingType(data); ok {
		if e, perr := decodeEventAs(EventType(t), data, read); perr == nil && Type(e) == EventType(t) {
			return e, nil
		}
	}
	var head struct {
		Type EventType `json:"type"`
	}
	if err := unmarshal(data, &head); err != nil {
		return nil, Invalid(CodeInvalidJSON, "", "Event is not a JSON object: %s.", jsonReason(err))
	}
	return decodeEventAs(head.Type, data, read)
}

// leanResponse decodes a response without its tools: the field named
// tools here, less deep than the Response's own, takes their value and
// skips it.
type leanResponse struct {
	*Response
	Tools skipped `json:"tools"`
}

// pauseResponse decodes a response without its tools and its output, as
// leanResponse leaves out the tools.
type pauseResponse struct {
	*Response
	Tools  skipped `json:"tools"`
	Output skipped `json:"output"`
}

// skipped is a JSON value read past, not kept.
type skipped struct{}

func (skipped) UnmarshalJSONFrom(dec *jsontext.Decoder) error { return dec.SkipValue() }

// decodeResponseEvent decodes data as a response event of type t whose
// response object is read into a W (leanResponse, pauseResponse), which
// embeds the Response that resp returns.
func decodeResponseEvent[W any](t EventType, data []byte, resp func(*W) *Response) (Event, *Error) {
	var w struct {
		EventHeader
		Response *W `json:"response"`
	}
	if err := unmarshal(data, &w); err != nil {
		return nil, Invalid(CodeInvalidType, "", "Invalid %s event: %s.", t, jsonReason(err))
	}
	ev := &ResponseEvent{EventHeader: w.EventHeader}
	if w.Response != nil {
		// An object that set none of the Response's own fields left the
		// embedded pointer nil.
		if ev.Response = resp(w.Response); ev.Response == nil {
			ev.Response = new(Response)
		}
	}
	return ev, nil
}

// decodeEventAs decodes data as an event of type t, a response object in
// it as read says.
func decodeEventAs(t EventType, data []byte, read reading) (Event, *Error) {
	var e Event
	switch t {
	case EventCreated, EventQueued, EventInProgress, EventCompleted, EventFailed,
		EventIncomplete, EventCancelled, EventDone:
		switch read {
		case readLean:
			return decodeResponseEvent[leanResponse](t, data, func(r *leanResponse) *Response { return r.Response })
		case readPause:
			return decodeResponseEvent[pauseResponse](t, data, func(r *pauseResponse) *Response { return r.Response })
		}
		e = new(ResponseEvent)
	case EventOutputItemAdded, EventOutputItemDone:
		var w struct {
			EventHeader
			OutputIndex int             `json:"output_index"`
			Item        json.RawMessage `json:"item"`
		}
		if err := unmarshal(data, &w); err != nil {
			return nil, Invalid(CodeInvalidType, "", "Invalid %s event: %s.", t, jsonReason(err))
		}
		it, perr := DecodeItem(w.Item, "item")
		if perr != nil {
			return nil, perr
		}
		return &OutputItemEvent{EventHeader: w.EventHeader, OutputIndex: w.OutputIndex, Item: it}, nil
	case EventContentPartAdded, EventContentPartDone, EventSummaryPartAdded, EventSummaryPartDone:
		var w struct {
			EventHeader
			ItemID       string          `json:"item_id"`
			OutputIndex  int             `json:"output_index"`
			ContentIndex int             `json:"content_index"`
			SummaryIndex int             `json:"summary_index"`
			Part         json.RawMessage `json:"part"`
		}
		if err := unmarshal(data, &w); err != nil {
			return nil, Invalid(CodeInvalidType, "", "Invalid %s event: %s.", t, jsonReason(err))
		}
		part, perr := DecodeContent(w.Part, "part")
		if perr != nil {
			return nil, perr
		}
		if t == EventSummaryPartAdded || t == EventSummaryPartDone {
			return &SummaryPartEvent{EventHeader: w.EventHeader, ItemID: w.ItemID, OutputIndex: w.OutputIndex, SummaryIndex: w.SummaryIndex, Part: part}, nil
		}
		return &ContentPartEvent{EventHeader: w.EventHeader, ItemID: w.ItemID, OutputIndex: w.OutputIndex, ContentIndex: w.ContentIndex, Part: part}, nil
	case EventOutputTextDelta, EventRefusalDelta, EventReasoningDelta:
		e = new(TextDeltaEvent)
	case EventOutputTextDone, EventRefusalDone, EventReasoningDone:
		e = new(TextDoneEvent)
	case EventAnnotationAdded:
		e = new(AnnotationAddedEvent)
	case EventSummaryTextDelta, EventSummaryTextDone:
		e = new(SummaryTextEvent)
	case EventFunctionArgsDelta:
		e = new(FunctionArgsDeltaEvent)
	case EventFunctionArgsDone:
		e = new(FunctionArgsDoneEvent)
	case EventCustomToolInputDelta:
		e = new(CustomToolInputDeltaEvent)
	case EventCustomToolInputDone:
		e = new(CustomToolInputDoneEvent)
	case EventShellCommandAdded, EventShellCommandDelta, EventShellCommandDone:
		e = new(ShellCommandEvent)
	case EventWebSearchInProgress, EventWebSearchSearching, EventWebSearchCompleted:
		e = new(WebSearchCallEvent)
	case EventMCPListToolsInProgress, EventMCPListToolsCompleted, EventMCPListToolsFailed,
		EventMCPCallInProgress, EventMCPCallCompleted, EventMCPCallFailed:
		e = new(MCPEvent)
	case EventMCPArgsDelta:
		e = new(MCPArgsDeltaEvent)
	case EventMCPArgsDone:
		e = new(MCPArgsDoneEvent)
	case EventError:
		e = new(ErrorEvent)
	case EventStepRestarted:
		e = new(StepRestartedEvent)
	case EventCompactionCompacting:
		e = new(CompactionCompactingEvent)
	case EventSteerAccepted:
		e = new(SteerAcceptedEvent)
	case EventSteerPending:
		e = new(SteerPendingEvent)
	case EventSteerFailed:
		e = new(SteerFailedEvent)
	case EventInjectCreated:
		e = new(InjectCreatedEvent)
	case EventInjectFailed:
		e = new(InjectFailedEvent)
	case EventWaiting:
		e = new(WaitingEvent)
	case "":
		return nil, Invalid(CodeMissingRequired, "type", "Missing required parameter: 'type'.")
	default:
		return nil, Invalid(CodeUnknownEventType, "type", "Unknown event type '%s'.", t)
	}
	if err := unmarshal(data, e); err != nil {
		return nil, Invalid(CodeInvalidType, "", "Invalid %s event: %s.", t, jsonReason(err))
	}
	return e, nil
}
