package protocol

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ClientEventType names a client (inbound WebSocket) event.
type ClientEventType string

// Client event types. Create is OpenAI's; Append, Cancel and Resume are
// tether's suspended-rollout extension; Processed is Codex's acknowledgement,
// accepted and ignored.
const (
	ClientCreate    ClientEventType = "response.create"
	ClientAppend    ClientEventType = "response.append"
	ClientCancel    ClientEventType = "response.cancel"
	ClientResume    ClientEventType = "response.resume"
	ClientFork      ClientEventType = "response.fork"
	ClientProcessed ClientEventType = "response.processed"
)

// MaxForks bounds the forks one response.fork makes.
const MaxForks = 64

// ClientEvent is an inbound WebSocket event: a sealed union.
type ClientEvent interface {
	ClientEventType() ClientEventType
	// Lane is the stream_id the event names, "" for the default lane.
	Lane() string
}

// CreateEvent is response.create: a flat create body plus stream_id.
type CreateEvent struct {
	StreamID string
	Request  *CreateRequest
}

// AppendEvent is response.append: tool outputs (and steering messages) for a
// suspended response; or, Inject set, response.inject, which the server
// takes by the same rules and answers otherwise (inject.go).
type AppendEvent struct {
	StreamID   string
	ResponseID string
	Input      Items
	Inject     bool
	RawInput   json.RawMessage // an inject's input as sent, given back by response.inject.failed
}

// CancelEvent is response.cancel.
type CancelEvent struct {
	StreamID   string
	ResponseID string
}

// ResumeEvent is response.resume: reattach a suspended response to this
// connection. After is the sequence_number of the last event the client
// received; the server replays every event after it. Without it the server
// replays the pending response.done and what it made while detached.
type ResumeEvent struct {
	StreamID   string
	ResponseID string
	After      *int
}

// ErrForkLanes is a response.fork on a WebSocket without the forks' lanes.
func ErrForkLanes() *Error {
	return Invalid(CodeInvalidValue, "stream_ids",
		"Invalid 'stream_ids': give the lane of each fork, 1 to %d distinct stream ids (a fork runs on its own lane).", MaxForks)
}

// ForkEvent is response.fork: clone a suspended response parked on its
// client's calls into one new response per stream id, each parked at the
// same calls, to be answered (and go on) on its own.
type ForkEvent struct {
	StreamID   string // the lane of the response forked
	ResponseID string
	StreamIDs  []string // the forks' lanes, one fork each
}

// ProcessedEvent is Codex's response.processed acknowledgement.
type ProcessedEvent struct {
	ResponseID string
}

func (*CreateEvent) ClientEventType() ClientEventType { return ClientCreate }
func (e *AppendEvent) ClientEventType() ClientEventType {
	if e.Inject {
		return ClientInject
	}
	return ClientAppend
}
func (*CancelEvent) ClientEventType() ClientEventType    { return ClientCancel }
func (*ResumeEvent) ClientEventType() ClientEventType    { return ClientResume }
func (*ForkEvent) ClientEventType() ClientEventType      { return ClientFork }
func (*ProcessedEvent) ClientEventType() ClientEventType { return ClientProcessed }

func (e *CreateEvent) Lane() string  { return e.StreamID }
func (e *AppendEvent) Lane() string  { return e.StreamID }
func (e *CancelEvent) Lane() string  { return e.StreamID }
func (e *ResumeEvent) Lane() string  { return e.StreamID }
func (e *ForkEvent) Lane() string    { return e.StreamID }
func (*ProcessedEvent) Lane() string { return "" }

// MarshalJSONTo writes the flat response.create frame.
func (e *CreateEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	req := e.Request
	if req == nil {
		req = new(CreateRequest)
	}
	return marshalTo(enc, struct {
		Type     ClientEventType `json:"type"`
		StreamID string          `json:"stream_id,omitempty"`
		*wireCreateRequest
	}{ClientCreate, e.StreamID, req.wire()})
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *CreateEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

// MarshalJSON writes response.append, or response.inject.
func (e *AppendEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalTo(enc, struct {
		Type       ClientEventType `json:"type"`
		StreamID   string          `json:"stream_id,omitempty"`
		ResponseID string          `json:"response_id"`
		Input      Items           `json:"input"`
	}{e.ClientEventType(), e.StreamID, e.ResponseID, e.Input})
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *AppendEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

// MarshalJSON writes response.cancel.
func (e *CancelEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalRef(enc, ClientCancel, e.StreamID, e.ResponseID)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *CancelEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

// MarshalJSON writes response.resume.
func (e *ResumeEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalTo(enc, struct {
		Type       ClientEventType `json:"type"`
		StreamID   string          `json:"stream_id,omitempty"`
		ResponseID string          `json:"response_id"`
		After      *int            `json:"sequence_number,omitempty"`
	}{ClientResume, e.StreamID, e.ResponseID, e.After})
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *ResumeEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

// MarshalJSONTo writes response.fork.
func (e *ForkEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalTo(enc, struct {
		Type       ClientEventType `json:"type"`
		StreamID   string          `json:"stream_id,omitempty"`
		ResponseID string          `json:"response_id"`
		StreamIDs  []string        `json:"stream_ids"`
	}{ClientFork, e.StreamID, e.ResponseID, e.StreamIDs})
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *ForkEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

// MarshalJSON writes response.processed.
func (e *ProcessedEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalRef(enc, ClientProcessed, "", e.ResponseID)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *ProcessedEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

func marshalRef(enc *jsontext.Encoder, t ClientEventType, streamID, responseID string) error {
	return marshalTo(enc, struct {
		Type       ClientEventType `json:"type"`
		StreamID   string          `json:"stream_id,omitempty"`
		ResponseID string          `json:"response_id"`
	}{t, streamID, responseID})
}

type clientHead struct {
	Type       *ClientEventType `json:"type"`
	StreamID   *string          `json:"stream_id"`
	ResponseID string           `json:"response_id"`
	After      *int             `json:"sequence_number"`
	StreamIDs  *[]string        `json:"stream_ids"`
	// No input: a create's is decoded once, by DecodeCreateRequest, and an
	// append's by decodeAppendInput, rather than copied here first; but an
	// append that scanAppend read has its input here (a slice of the frame).
	input json.RawMessage
}

// PeekClientEvent reads only the type and lane of a client frame, without
// decoding (or copying) its body: for a server that may refuse a large
// frame before it decodes it. ok is false when the head does not decode.
func PeekClientEvent(data []byte) (typ ClientEventType, lane string, ok bool) {
	var head clientHead
	if unmarshal(data, &head) != nil || head.Type == nil {
		return "", "", false
	}
	if head.StreamID != nil {
		lane = *head.StreamID
	}
	return *head.Type, lane, true
}

// decodeAppendInput is the input of a response.append frame.
func decodeAppendInput(data []byte) (Items, *Error) {
	var in struct {
		Input jsontext.Value `json:"input"`
	}
	if _, perr := unmarshalRequest(data, &in, ""); perr != nil {
		return nil, perr
	}
	return decodeInput(json.RawMessage(in.Input))
}

// DecodeClientEvent decodes one inbound WebSocket frame. On error it still
// returns what it could read of the event's lane, so that the error can carry
// the right stream_id; the returned event is then nil. The event keeps no
// reference to data: the caller may read its next frame into it
// (FuzzDecodeClientEvent checks that).
func DecodeClientEvent(data []byte) (ClientEvent, string, *Error) {
	if head, items, ok := scanPlainAppend(data); ok && head.ResponseID != "" &&
		(head.StreamID == nil || ValidateStreamID(*head.StreamID) == nil) {
		lane := ""
		if head.StreamID != nil {
			lane = *head.StreamID
		}
		return &AppendEvent{StreamID: lane, ResponseID: head.ResponseID, Input: items}, lane, nil
	}
	// Anything else, a bad append among it, as the general path reads
	// (and refuses) it.
	return decodeClientEvent(data)
}

// decodeClientEvent is DecodeClientEvent's path for all but a plain append
// (scanPlainAppend).
func decodeClientEvent(data []byte) (ClientEvent, string, *Error) {
	head, _, ok := scanAppend(data)
	if !ok {
		if err := unmarshal(data, &head); err != nil {
			return nil, "", Invalid(CodeInvalidJSON, "", "Invalid frame: every client event must be a JSON object (%s).", jsonReason(err))
		}
	}
	lane := ""
	if head.StreamID != nil {
		lane = *head.StreamID
		if perr := ValidateStreamID(lane); perr != nil {
			return nil, "", perr
		}
	}
	if head.Type == nil || *head.Type == "" {
		return nil, lane, Invalid(CodeMissingRequired, "type", "Missing required parameter: 'type'. Client events are %s.", clientEventTypesText())
	}
	for _, d := range clientDecoders {
		if d.typ == *head.Type {
			ev, perr := d.decode(head, lane, data)
			if perr != nil {
				return nil, lane, perr
			}
			return ev, lane, nil
		}
	}
	return nil, lane, Invalid(CodeUnknownEventType, "type", "Unknown client event type '%s'. Supported types are %s.", *head.Type, clientEventTypesText())
}

// clientDecoders decodes each client event type, in the order errors list
// them: it is the one list of the types DecodeClientEvent accepts. Read
// only.
var clientDecoders = [...]struct {
	typ    ClientEventType
	decode func(head clientHead, lane string, data []byte) (ClientEvent, *Error)
}{
	{ClientCreate, decodeCreate},
	{ClientAppend, decodeAppend},
	{ClientCancel, decodeCancel},
	{ClientResume, decodeResume},
	{ClientFork, decodeFork},
	{ClientProcessed, decodeProcessed},
	{ClientSteer, decodeSteer},
	{ClientInject, decodeInject},
}

// clientEventTypesText lists the types of clientDecoders for an error:
// "a, b and c".
func clientEventTypesText() string {
	var b strings.Builder
	for i, d := range clientDecoders {
		switch {
		case i == len(clientDecoders)-1:
			b.WriteString(" and ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(string(d.typ))
	}
	return b.String()
}

func decodeCreate(_ clientHead, lane string, data []byte) (ClientEvent, *Error) {
	req, perr := DecodeCreateRequest(data)
	if perr != nil {
		return nil, perr
	}
	return &CreateEvent{StreamID: lane, Request: req}, nil
}

func decodeAppend(head clientHead, lane string, data []byte) (ClientEvent, *Error) {
	if head.ResponseID == "" {
		return nil, errMissingResponseID()
	}
	var items Items
	var perr *Error
	if head.input != nil {
		if perr = checkNumbers(head.input, "input"); perr == nil {
			items, perr = decodeInput(head.input)
		}
	} else {
		items, perr = decodeAppendInput(data)
	}
	if perr != nil {
		return nil, perr
	}
	return &AppendEvent{StreamID: lane, ResponseID: head.ResponseID, Input: items}, nil
}

func decodeCancel(head clientHead, lane string, _ []byte) (ClientEvent, *Error) {
	if head.ResponseID == "" {
		return nil, errMissingResponseID()
	}
	return &CancelEvent{StreamID: lane, ResponseID: head.ResponseID}, nil
}

func decodeResume(head clientHead, lane string, _ []byte) (ClientEvent, *Error) {
	if head.ResponseID == "" {
		return nil, errMissingResponseID()
	}
	if head.After != nil && *head.After < -1 {
		return nil, Invalid(CodeInvalidValue, "sequence_number", "Invalid 'sequence_number': %d. Send the sequence_number of the last event received, or -1 for none.", *head.After)
	}
	return &ResumeEvent{StreamID: lane, ResponseID: head.ResponseID, After: head.After}, nil
}

// decodeProcessed accepts a response.processed with or without its
// response_id: it only acknowledges.
func decodeProcessed(head clientHead, _ string, _ []byte) (ClientEvent, *Error) {
	return &ProcessedEvent{ResponseID: head.ResponseID}, nil
}

func errMissingResponseID() *Error {
	return Invalid(CodeMissingRequired, "response_id", "Missing required parameter: 'response_id'.")
}

// decodeFork checks a response.fork: a response, and up to MaxForks
// distinct, valid stream ids. Without stream_ids (on WebTransport, where
// a stream is a lane) the fork runs on the lane the event came on; a
// WebSocket session requires them (ErrForkLanes).
func decodeFork(head clientHead, lane string, _ []byte) (ClientEvent, *Error) {
	if head.ResponseID == "" {
		return nil, errMissingResponseID()
	}
	if head.StreamIDs == nil {
		return &ForkEvent{StreamID: lane, ResponseID: head.ResponseID}, nil
	}
	if len(*head.StreamIDs) == 0 || len(*head.StreamIDs) > MaxForks {
		return nil, ErrForkLanes()
	}
	seen := make(map[string]bool, len(*head.StreamIDs))
	for i, id := range *head.StreamIDs {
		if perr := ValidateStreamID(id); perr != nil {
			perr.Param = fmt.Sprintf("stream_ids[%d]", i)
			return nil, perr
		}
		if seen[id] || id == lane {
			return nil, Invalid(CodeInvalidValue, fmt.Sprintf("stream_ids[%d]", i),
				"Invalid 'stream_ids[%d]': '%s' is named twice, or is the lane of the response forked; every fork needs a lane of its own.", i, id)
		}
		seen[id] = true
	}
	return &ForkEvent{StreamID: lane, ResponseID: head.ResponseID, StreamIDs: *head.StreamIDs}, nil
}
