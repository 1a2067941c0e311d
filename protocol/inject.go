package protocol

import (
	"bytes"
	"encoding/json"
)

// response.inject (OpenAI's Responses multi-agent beta, over WebSocket):
// tool outputs for a response that waits on its client's calls. The
// server commits them all or none, and answers response.inject.created,
// in the response's sequence, or response.inject.failed, with the input
// given back and why (response_not_found, response_already_completed, or
// what else refused it). An inject that does not decode, or holds more
// than MaxInjectItems items, is a plain error event. tether takes it for
// its suspended rollouts too, with response.append's rules: an inject is
// an AppendEvent whose Inject is set, answered otherwise.

// ClientInject is response.inject.
const ClientInject ClientEventType = "response.inject"

// The server's answers to a response.inject.
const (
	EventInjectCreated EventType = "response.inject.created"
	EventInjectFailed  EventType = "response.inject.failed"
)

// EventWaiting is tether's own, in the multi-agent beta's dialect, where
// no event marks a wait: a response whose request includes IncludeWaits
// sends response.waiting as its agent begins to wait on client calls,
// once their output_item.done events are out. It lists the calls and
// carries the usage so far (and the timings, with IncludeTimings), as a
// pause's response.done does in tether's own dialect: a client learns
// where each step ends, and what it cost, without a requires_action.
const EventWaiting EventType = "response.waiting"

// IncludeWaits is the include value that has a multi-agent response tell
// each wait (EventWaiting).
const IncludeWaits = "tether.waits"

// WaitingEvent is response.waiting (EventWaiting).
type WaitingEvent struct {
	EventHeader
	ResponseID string   `json:"response_id"`
	CallIDs    []string `json:"call_ids"` // the calls waited on, in output order
	Usage      Usage    `json:"usage"`    // the response's so far
	Timings    *Timings `json:"timings,omitempty"`
}

// CodeResponseAlreadyCompleted is response.inject.failed's code for a
// response that ended: its input goes in a response.create that continues
// it.
const CodeResponseAlreadyCompleted = "response_already_completed"

// MaxInjectItems bounds the items of one response.inject.
const MaxInjectItems = 16384

// InjectCreatedEvent is response.inject.created: the inject's items are
// the response's.
type InjectCreatedEvent struct {
	EventHeader
	ResponseID string `json:"response_id"`
}

// InjectFailedEvent is response.inject.failed: nothing of the inject was
// taken. Input is its input as sent.
type InjectFailedEvent struct {
	EventHeader
	ResponseID string          `json:"response_id"`
	Input      json.RawMessage `json:"input"`
	Error      InjectError     `json:"error"`
}

// InjectError is why an inject failed.
type InjectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// InjectFailure is the response.inject.failed event of perr for ev.
func InjectFailure(ev *AppendEvent, perr *Error) *InjectFailedEvent {
	input := ev.RawInput
	if input == nil {
		input = json.RawMessage("[]")
	}
	return &InjectFailedEvent{EventHeader: EventHeader{Type: EventInjectFailed, StreamID: ev.StreamID},
		ResponseID: ev.ResponseID, Input: input, Error: InjectError{Code: perr.Code, Message: perr.Message}}
}

func decodeInject(head clientHead, lane string, data []byte) (ClientEvent, *Error) {
	if head.ResponseID == "" {
		return nil, errMissingResponseID()
	}
	raw := head.input
	if raw == nil {
		var in struct {
			Input json.RawMessage `json:"input"`
		}
		if _, perr := unmarshalRequest(data, &in, ""); perr != nil {
			return nil, perr
		}
		raw = in.Input
	}
	if isNull(raw) {
		return nil, Invalid(CodeMissingRequired, "input", "Missing required parameter: 'input'.")
	}
	if perr := checkNumbers(raw, "input"); perr != nil {
		return nil, perr
	}
	items, perr := decodeInput(raw)
	if perr != nil {
		return nil, perr
	}
	if len(items) > MaxInjectItems {
		return nil, Invalid(CodeArrayAboveMaxLength, "input",
			"Invalid 'input': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", MaxInjectItems, len(items))
	}
	return &AppendEvent{StreamID: lane, ResponseID: head.ResponseID, Input: items, Inject: true, RawInput: bytes.Clone(raw)}, nil
}
