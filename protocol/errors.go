package protocol

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ErrorType is the family of an error, as OpenAI names it in error.type.
type ErrorType string

// Error types.
const (
	InvalidRequest ErrorType = "invalid_request_error"
	ServerError    ErrorType = "server_error"
)

// Error codes tether emits. The first group is OpenAI's own; the rest are
// tether's names for conditions OpenAI documents without a code.
const (
	CodePreviousResponseNotFound = "previous_response_not_found"
	CodeConnectionLimitReached   = "websocket_connection_limit_reached"
	CodeInvalidStreamID          = "invalid_stream_id"
	CodeStreamLimitReached       = "websocket_stream_limit_reached"
	CodeModelNotFound            = "model_not_found"
	CodeResponseNotFound         = "response_not_found"
	CodeConversationNotFound     = "conversation_not_found"
	CodeItemNotFound             = "item_not_found"
	CodeMutuallyExclusive        = "mutually_exclusive_parameters"
	CodeContextLengthExceeded    = "context_length_exceeded" // the prompt is past the model's context window (truncation disabled)
	CodeServerError              = "server_error"

	CodeInvalidJSON               = "invalid_json"
	CodeUnknownEventType          = "unknown_event_type"
	CodeMissingRequired           = "missing_required_parameter"
	CodeInvalidValue              = "invalid_value"
	CodeInvalidType               = "invalid_type"
	CodeArrayAboveMaxLength       = "array_above_max_length"
	CodeInvalidJSONSchema         = "invalid_json_schema"         // a strict text.format schema strict mode refuses
	CodeInvalidFunctionParameters = "invalid_function_parameters" // a strict function's parameters strict mode refuses
	CodeToolCallNotFound          = "tool_call_not_found"
	CodeToolNotAvailable          = "tool_not_available"        // a hosted tool type this server does not run
	CodeToolNotOffered            = "tool_not_offered"          // a model that calls its own tools (a replay) and a request that does not offer them
	CodeToolOutputMismatch        = "tool_output_type_mismatch" // an output item of the wrong type for its call
	CodeUnsupportedParameter      = "unsupported_parameter"
	CodeInvalidDirective          = "invalid_directive" // a scripted model directive it cannot follow: a json: answer that fails text.format
	CodeQueueFull                 = "websocket_queue_full"
	CodeConnectionBytes           = "websocket_bytes_in_flight" // a connection's requests in flight past ConnBytes
	CodeBinaryFrame               = "unsupported_frame_type"
	CodeRequestTooLarge           = "request_too_large"
	CodeTooManyReferences         = "too_many_item_references" // a request holding more item_reference items than a request may
	CodeRequestTimeout            = "request_timeout"
	CodeInvalidAPIKey             = "invalid_api_key"
	CodeInvalidEncrypted          = "invalid_encrypted_content"
	CodeMethodNotAllowed          = "method_not_allowed"
	CodeClientTooSlow             = "client_too_slow"        // the last event before a close 1008: the client fell behind past the slow-client timeout
	CodeUnsupportedEncoding       = "unsupported_encoding"   // a WebTransport stream's header names no encoding this server speaks
	CodeStoreUnavailable          = "store_unavailable"      // the response store (Redis) did not answer in time
	CodeMCPServerNotAllowed       = "mcp_server_not_allowed" // an mcp tool's server is outside this server's allow-list
	CodeMCPServerError            = "mcp_server_error"       // an MCP server could not list its tools

	// Suspended rollouts (tether's extension).
	CodeResponseOwnedElsewhere = "response_owned_elsewhere" // a durable rollout another server took over: the last event before a close 1012
	CodeClientToolTimeout      = "client_tool_timeout"
	CodeTooManyToolCalls       = "too_many_tool_calls"
	CodeDuplicateToolOutput    = "duplicate_tool_output"
	CodeNothingSuspended       = "response_not_suspended"
	CodeStreamMismatch         = "stream_id_mismatch"
	CodeStreamSuspended        = "stream_suspended"
	CodeTooManySuspended       = "too_many_suspended"
	CodeTenantSuspended        = "tenant_suspended_limit"
	CodeTooManyConnections     = "too_many_connections"
	CodeTooManyClientSecrets   = "too_many_client_secrets" // a server's set of used client secrets is full: retry once some expire
	CodeServerMemory           = "server_memory_full"      // the server's memory budget (Limits.MaxMemory) has no room for a request: retry shortly
	CodeTenantConnections      = "tenant_connection_limit"
	CodeRateLimited            = "rate_limit_exceeded"
	CodeTenantInFlight         = "tenant_inflight_limit"
	CodeTenantStore            = "tenant_store_limit" // a tenant's conversations hold all a store keeps of a tenant's: delete some, or wait for them to expire
	CodeShuttingDown           = "server_shutting_down"

	// Background responses (background: true).
	CodeBackgroundQueueFull = "background_queue_full"   // a tenant's background responses queued or running are at the server's bound (Background.Queue)
	CodeNotBackground       = "response_not_background" // a cancel of a response that did not run in the background, or a stream resume of one whose events were not kept
	CodeBackgroundLost      = "background_server_lost"  // the server running a background response died, and its model cannot run it again to the same events

	// Upstream models (a sampler that forwards to another server).
	CodeUpstreamError   = "upstream_error"
	CodeUpstreamTimeout = "upstream_timeout"
)

// Error is a protocol error: a request the server refuses, or a failure it
// reports. It is turned into wire form only by WebSocketError, StreamError,
// HTTPErrorBody and ResponseError, so every transport says the same thing.
type Error struct {
	Status  int       // HTTP status, also sent as "status" on WebSocket errors
	Type    ErrorType // invalid_request_error unless Status is 5xx
	Code    string    // machine-readable code, never empty
	Param   string    // request parameter at fault, "" when none
	Message string    // what went wrong and what to do about it
}

// Errorf returns an *Error with the type implied by status.
func Errorf(status int, code, param, format string, args ...any) *Error {
	// OpenAI types every 4xx, 404s included, as invalid_request_error.
	typ := InvalidRequest
	if status >= 500 {
		typ = ServerError
	}
	return &Error{Status: status, Type: typ, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// Invalid is shorthand for a 400 invalid_request_error.
func Invalid(code, param, format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, code, param, format, args...)
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Param, e.Message)
	}
	return e.Code + ": " + e.Message
}

// AsError turns any error into a protocol error; unknown errors become a 500.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*Error); ok {
		return pe
	}
	return Errorf(http.StatusInternalServerError, CodeServerError, "", "The server had an error while processing the request: %v", err)
}

// ErrorPayload is the nested error object of SSE and WebSocket error events
// and of HTTP error bodies. code and param are nullable on the wire.
type ErrorPayload struct {
	Type    ErrorType `json:"type"`
	Code    *string   `json:"code"`
	Message string    `json:"message"`
	Param   *string   `json:"param"`
}

func (e *Error) payload() ErrorPayload {
	p := ErrorPayload{Type: e.Type, Message: e.Message}
	if e.Code != "" {
		code := e.Code
		p.Code = &code
	}
	if e.Param != "" {
		param := e.Param
		p.Param = &param
	}
	return p
}

// WebSocketErrorEvent is the WebSocket error frame: a nested error object with
// a top-level HTTP-like status, and the stream_id of the lane it belongs to.
type WebSocketErrorEvent struct {
	Type           string       `json:"type"`
	Status         int          `json:"status"`
	SequenceNumber *int         `json:"sequence_number,omitempty"`
	StreamID       string       `json:"stream_id,omitempty"`
	Error          ErrorPayload `json:"error"`
}

// WebSocketError is the wire form of e on a WebSocket.
func (e *Error) WebSocketError(streamID string) *WebSocketErrorEvent {
	return &WebSocketErrorEvent{Type: "error", Status: e.Status, StreamID: streamID, Error: e.payload()}
}

// StreamError is the SSE error event for e (the Open Responses nested shape).
func (e *Error) StreamError() *ErrorEvent {
	return &ErrorEvent{EventHeader: EventHeader{Type: EventError}, Error: e.payload()}
}

// HTTPErrorBody is the JSON body of a failed HTTP request: {"error": {...}}.
func (e *Error) HTTPErrorBody() []byte {
	b, _ := json.Marshal(struct {
		Error ErrorPayload `json:"error"`
	}{e.payload()})
	return b
}

// ResponseError is the error object of a failed response.
func (e *Error) ResponseError() *ResponseError {
	return &ResponseError{Code: e.Code, Message: e.Message}
}
