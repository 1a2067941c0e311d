package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// response.steer (OpenAI's WebSocket mode): user input into a response
// running on the connection. The server answers response.steer.accepted
// (it owns the input), then, when the response stops for its client's tool
// outputs, response.steer.pending with the outputs still required; an input
// it cannot take is answered response.steer.failed, with the input given
// back. Every answer carries the steer's previous_response_id, and its id
// once it has one.

// ClientSteer is response.steer.
const ClientSteer ClientEventType = "response.steer"

// The server's answers to a response.steer.
const (
	EventSteerAccepted EventType = "response.steer.accepted"
	EventSteerPending  EventType = "response.steer.pending"
	EventSteerFailed   EventType = "response.steer.failed"
)

// Steering's error codes (response.steer.failed's error.code).
const (
	CodeSteerNotFound          = "response_not_found"
	CodeSteerInvalidInput      = "invalid_input"
	CodeSteeringNotSupported   = "steering_not_supported"
	CodeTooManyPendingSteers   = "too_many_pending_steers"
	CodeSteerAlreadyCompleted  = "response_already_completed"
	CodeSteerResponseNotActive = "response_not_active"
	CodeSuccessorFailed        = "successor_creation_failed"
)

// SteerReasonWaiting is response.steer.pending's reason when the response
// waits for its client's tool outputs.
const SteerReasonWaiting = "waiting_for_required_input"

// ReasonSteered is incomplete_details.reason of a response that steering
// ended at a step's end: a successor response goes on with the input.
const ReasonSteered = "steered"

// SteerEvent is response.steer. A steer that does not decode is still a
// SteerEvent, with Err set: it is answered response.steer.failed, not an
// error event.
type SteerEvent struct {
	PreviousResponseID string
	Input              Items
	RawInput           json.RawMessage // as sent, given back by response.steer.failed
	Err                *Error
}

func (*SteerEvent) ClientEventType() ClientEventType { return ClientSteer }

// Lane is "": a steer names no lane; its response's lane answers it.
func (*SteerEvent) Lane() string { return "" }

// MarshalJSONTo writes response.steer.
func (e *SteerEvent) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalTo(enc, struct {
		Type               ClientEventType `json:"type"`
		PreviousResponseID string          `json:"previous_response_id"`
		Input              Items           `json:"input"`
	}{ClientSteer, e.PreviousResponseID, e.Input})
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (e *SteerEvent) MarshalJSON() ([]byte, error) { return Marshal(e) }

func decodeSteer(_ clientHead, _ string, data []byte) (ClientEvent, *Error) {
	var w struct {
		PreviousResponseID string          `json:"previous_response_id"`
		Input              json.RawMessage `json:"input"`
		StreamID           *string         `json:"stream_id"`
	}
	ev := &SteerEvent{}
	if _, perr := unmarshalRequest(data, &w, ""); perr != nil {
		ev.Err = steerInvalid(perr.Param, perr.Message)
		return ev, nil
	}
	ev.PreviousResponseID, ev.RawInput = w.PreviousResponseID, w.Input
	switch {
	case w.PreviousResponseID == "":
		ev.Err = steerInvalid("previous_response_id", "Missing required parameter: 'previous_response_id'.")
	case w.StreamID != nil:
		ev.Err = steerInvalid("stream_id", "response.steer takes no stream_id: the response it steers answers on its own lane.")
	case isNull(w.Input):
		ev.Err = steerInvalid("input", "Missing required parameter: 'input'.")
	default:
		ev.Input, ev.Err = decodeSteerInput(w.Input)
	}
	return ev, nil
}

func steerInvalid(param, msg string) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Code: CodeSteerInvalidInput, Param: param, Message: msg}
}

// decodeSteerInput is a steer's input: a string (one user message) or a
// non-empty array of user messages, each of type, role and content only,
// its content a string or input_text, input_image and input_file parts.
func decodeSteerInput(raw json.RawMessage) (Items, *Error) {
	raw = trimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var elems []map[string]json.RawMessage
		if err := unmarshal(raw, &elems); err != nil {
			return nil, steerInvalid("input", "Invalid 'input': expected a string or an array of user messages.")
		}
		if len(elems) == 0 {
			return nil, steerInvalid("input", "Invalid 'input': an array of input items must not be empty.")
		}
		for i, el := range elems {
			for k := range el {
				if k != "type" && k != "role" && k != "content" {
					return nil, steerInvalid(IndexParam("input", i)+"."+k, "Steering takes user messages of type, role and content only.")
				}
			}
		}
	}
	items, perr := decodeInput(raw)
	if perr != nil {
		return nil, steerInvalid(perr.Param, perr.Message)
	}
	if perr := ValidateItems(items, "input"); perr != nil {
		return nil, steerInvalid(perr.Param, perr.Message)
	}
	for i, it := range items {
		m, ok := it.(*Message)
		if !ok || m.Role != RoleUser {
			return nil, steerInvalid(IndexParam("input", i), "Steering takes only messages with the 'user' role.")
		}
		for j, c := range m.Content {
			switch c.ContentType() {
			case ContentInputText, ContentInputImage, ContentInputFile:
			default:
				return nil, steerInvalid(IndexParam(IndexParam("input", i)+".content", j), "A steering message's content is input_text, input_image and input_file parts.")
			}
		}
	}
	return items, nil
}

// SteerRef names a steering submission in the server's answers.
type SteerRef struct {
	ID                 string `json:"id,omitempty"` // left out of a failure before one was given
	PreviousResponseID string `json:"previous_response_id"`
	// Input is given back by response.steer.failed only.
	Input json.RawMessage `json:"input,omitempty"`
}

// SteerAcceptedEvent is response.steer.accepted.
type SteerAcceptedEvent struct {
	EventHeader
	Steer SteerRef `json:"steer"`
}

// SteerPendingEvent is response.steer.pending: the steer's input stays
// queued while the response waits for the outputs RequiredInput names;
// it joins the context with them.
type SteerPendingEvent struct {
	EventHeader
	Reason        string          `json:"reason"`
	RequiredInput []RequiredInput `json:"required_input"`
	Steer         SteerRef        `json:"steer"`
}

// RequiredInput is a stub of an output the response waits for: the
// client fills in the output and sends it as it would.
type RequiredInput struct {
	Type   ItemType `json:"type"` // function_call_output, custom_tool_call_output, …
	CallID string   `json:"call_id"`
	Name   string   `json:"name,omitempty"` // a function's
}

// SteerFailedEvent is response.steer.failed.
type SteerFailedEvent struct {
	EventHeader
	Error SteerError `json:"error"`
	Steer SteerRef   `json:"steer"`
}

// SteerError is why a steer failed.
type SteerError struct {
	Type    string `json:"type"` // invalid_request_error
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SteerFailure is the response.steer.failed event of perr for ev.
func SteerFailure(ev *SteerEvent, id string, perr *Error) *SteerFailedEvent {
	input := ev.RawInput
	if input == nil {
		input = json.RawMessage("null")
	}
	return &SteerFailedEvent{EventHeader: EventHeader{Type: EventSteerFailed},
		Error: SteerError{Type: "invalid_request_error", Code: perr.Code, Message: perr.Message},
		Steer: SteerRef{ID: id, PreviousResponseID: ev.PreviousResponseID, Input: input}}
}
