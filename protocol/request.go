package protocol

import (
	"encoding/json"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// CreateRequest is the body of POST /v1/responses, and of a WebSocket
// response.create event without its envelope fields. Unknown fields are
// ignored, as real clients send extras (client_metadata, stream on WebSocket).
type CreateRequest struct {
	Model              string            `json:"model"`
	Input              Items             `json:"-"` // decoded by DecodeCreateRequest
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Conversation       *ConversationRef  `json:"conversation,omitempty"` // the Conversations API: its items are the context; excludes PreviousResponseID
	Instructions       *string           `json:"instructions,omitempty"`
	Include            []string          `json:"include,omitempty"`
	Tools              []Tool            `json:"tools,omitempty"`
	ToolChoice         *ToolChoice       `json:"tool_choice,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Text               *TextConfig       `json:"text,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	PresencePenalty    *float64          `json:"presence_penalty,omitempty"`
	FrequencyPenalty   *float64          `json:"frequency_penalty,omitempty"`
	TopLogprobs        *int              `json:"top_logprobs,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	Stream             *bool             `json:"stream,omitempty"`
	Background         *bool             `json:"background,omitempty"`
	// BackgroundOptions place a background response in the queue: a
	// completion window (OpenAI's discounted "2h" and "8h") and a
	// continuation id that groups related requests.
	BackgroundOptions *BackgroundOptions `json:"background_options,omitempty"`
	MaxOutputTokens   *int               `json:"max_output_tokens,omitempty"`
	MaxToolCalls      *int               `json:"max_tool_calls,omitempty"`
	Reasoning         *ReasoningConfig   `json:"reasoning,omitempty"`
	SafetyIdentifier  *string            `json:"safety_identifier,omitempty"`
	PromptCacheKey    *string            `json:"prompt_cache_key,omitempty"`
	// PromptCacheRetention is how long the prompt's cached prefix may be
	// kept: CacheInMemory or Cache24h; nil leaves it to the model.
	PromptCacheRetention *string `json:"prompt_cache_retention,omitempty"`
	// Truncation is TruncationAuto or TruncationDisabled ("" is disabled).
	Truncation string `json:"truncation,omitempty"`
	// ContextManagement asks for server-side compaction: when the context
	// passes compact_threshold tokens, the server compacts it.
	ContextManagement []ContextManagement `json:"context_management,omitempty"`
	Store             *bool               `json:"store,omitempty"`
	ServiceTier       string              `json:"service_tier,omitempty"`
	User              *string             `json:"user,omitempty"`

	// Generate false is WebSocket warm-up: prepare state, sample nothing.
	Generate *bool `json:"generate,omitempty"`
	// Suspend asks for a suspended rollout (tether extension).
	Suspend *bool `json:"suspend,omitempty"`
	// MultiAgent is OpenAI's Responses multi-agent beta (sent with
	// OpenAI-Beta: responses_multi_agent=v1).
	MultiAgent *MultiAgent `json:"multi_agent,omitempty"`
}

// BackgroundOptions are a request's background_options: CompletionWindow
// is "soonest" (the default), "2h" or "8h"; ContinuationID is the client's
// opaque name for a line of related requests.
type BackgroundOptions struct {
	CompletionWindow string `json:"completion_window,omitempty"`
	ContinuationID   string `json:"continuation_id,omitempty"`
}

// The completion windows of background_options, fastest first.
const (
	WindowSoonest = "soonest"
	Window2h      = "2h"
	Window8h      = "8h"
)

// The values of prompt_cache_retention.
const (
	CacheInMemory = "in_memory" // kept while the cache has room, and not long idle
	Cache24h      = "24h"       // kept up to 24 hours after its last use
)

// The values of truncation.
const (
	TruncationAuto     = "auto"     // drop the oldest items past the model's context window
	TruncationDisabled = "disabled" // fail past it
)

// The service tiers a response is echoed with: what the request asked
// for while it runs (auto when it asked for none), and the tier that
// served it once it has ended.
const (
	ServiceTierAuto    = "auto"
	ServiceTierDefault = "default"
)

// InBackground reports whether the request asked for a background
// response.
func (r *CreateRequest) InBackground() bool { return r.Background != nil && *r.Background }

// MultiAgent is a request's multi_agent: Enabled is required; the
// sub-agents live at once, the root not counted, are at least 1 (3 when
// left out).
type MultiAgent struct {
	Enabled                *bool `json:"enabled"`
	MaxConcurrentSubagents *int  `json:"max_concurrent_subagents,omitempty"`
}

// MultiAgentEnabled reports whether the request asked for the
// multi-agent beta.
func (r *CreateRequest) MultiAgentEnabled() bool {
	return r.MultiAgent != nil && r.MultiAgent.Enabled != nil && *r.MultiAgent.Enabled
}

// ContextManagement is one entry of context_management.
type ContextManagement struct {
	Type             string `json:"type"` // compaction
	CompactThreshold *int   `json:"compact_threshold,omitempty"`
}

// CompactThreshold is the rendered-token count past which the request's
// context is compacted (context_management), 0 for never.
func (r *CreateRequest) CompactThreshold() int {
	for _, c := range r.ContextManagement {
		if c.Type == "compaction" && c.CompactThreshold != nil {
			return *c.CompactThreshold
		}
	}
	return 0
}

// Includes reports whether the request asked for the include value v.
func (r *CreateRequest) Includes(v string) bool {
	for _, s := range r.Include {
		if s == v {
			return true
		}
	}
	return false
}

// Streaming reports whether an HTTP request asked for SSE.
func (r *CreateRequest) Streaming() bool { return r.Stream != nil && *r.Stream }

// Storing reports whether the response is to be stored (the default).
func (r *CreateRequest) Storing() bool { return r.Store == nil || *r.Store }

// Generating reports whether the request samples (false only for warm-up).
func (r *CreateRequest) Generating() bool { return r.Generate == nil || *r.Generate }

type wireCreate struct {
	CreateRequest
	Input json.RawMessage `json:"input"`
}

// DecodeCreateRequest decodes a create body. Input may be a string (one user
// message) or an array of items; each item is decoded with its index in the
// error param. It does not validate: call Validate.
func DecodeCreateRequest(data []byte) (*CreateRequest, *Error) {
	var w wireCreate
	if _, perr := unmarshalRequest(data, &w, ""); perr != nil {
		return nil, perr
	}
	req := w.CreateRequest
	items, perr := decodeInput(w.Input)
	if perr != nil {
		return nil, perr
	}
	req.Input = items
	return &req, nil
}

func decodeInput(raw json.RawMessage) (Items, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	raw = trimSpace(raw)
	if raw[0] == '"' {
		var s string
		if err := unmarshal(raw, &s); err != nil {
			return nil, Invalid(CodeInvalidType, "input", "Invalid input: %s.", jsonReason(err))
		}
		return Items{&Message{Role: RoleUser, Content: Contents{&InputText{Text: s}}}}, nil
	}
	return DecodeItems(raw, "input")
}

// MarshalJSONTo writes the request with its input, for clients.
func (r *CreateRequest) MarshalJSONTo(enc *jsontext.Encoder) error {
	return marshalTo(enc, r.wire())
}

// wireCreateRequest is a request as it is written: its input always an
// array.
type wireCreateRequest struct {
	*plainCreateRequest
	Input Items `json:"input"`
}

type plainCreateRequest CreateRequest

func (r *CreateRequest) wire() *wireCreateRequest {
	input := r.Input
	if input == nil {
		input = Items{}
	}
	return &wireCreateRequest{(*plainCreateRequest)(r), input}
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (r *CreateRequest) MarshalJSON() ([]byte, error) { return Marshal(r) }

// bodyError classifies a failure to decode a request body.
func bodyError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	var te *jsonv1.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field := wireField(te.Field)
		return Invalid(CodeInvalidType, field, "Invalid type for '%s': expected %s, but got %s.", field, article(te.Type.Kind().String()), te.Value)
	}
	return Invalid(CodeInvalidJSON, "", "We could not parse the JSON body of your request: %s.", jsonReason(err))
}
