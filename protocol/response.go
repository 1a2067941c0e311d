package protocol

import (
	"cmp"
	"reflect"
)

// ResponseStatus is the lifecycle state of a response.
type ResponseStatus string

// Response statuses. RequiresAction is tether's suspended-rollout extension.
const (
	ResponseQueued         ResponseStatus = "queued"
	ResponseInProgress     ResponseStatus = "in_progress"
	ResponseCompleted      ResponseStatus = "completed"
	ResponseFailed         ResponseStatus = "failed"
	ResponseIncomplete     ResponseStatus = "incomplete"
	ResponseCancelled      ResponseStatus = "cancelled"
	ResponseRequiresAction ResponseStatus = "requires_action"
)

// Terminal reports whether no more events follow a response in this status.
func (s ResponseStatus) Terminal() bool {
	switch s {
	case ResponseCompleted, ResponseFailed, ResponseIncomplete, ResponseCancelled:
		return true
	}
	return false
}

// Response is the response object. Every field the Open Responses schema
// requires is always present; nullable ones are pointers without omitempty.
type Response struct {
	ID                   string             `json:"id"`
	Object               string             `json:"object"`
	CreatedAt            int64              `json:"created_at"`
	CompletedAt          *int64             `json:"completed_at"`
	Status               ResponseStatus     `json:"status"`
	IncompleteDetails    *IncompleteDetails `json:"incomplete_details"`
	Model                string             `json:"model"`
	PreviousResponseID   *string            `json:"previous_response_id"`
	Conversation         *ConversationRef   `json:"conversation,omitempty"` // the conversation the response reads and adds to
	Instructions         *string            `json:"instructions"`
	Output               Items              `json:"output"`
	Error                *ResponseError     `json:"error"`
	Tools                []Tool             `json:"tools"`
	ToolChoice           ToolChoice         `json:"tool_choice"`
	Truncation           string             `json:"truncation"`
	ParallelToolCalls    bool               `json:"parallel_tool_calls"`
	Text                 TextConfig         `json:"text"`
	TopP                 float64            `json:"top_p"`
	PresencePenalty      float64            `json:"presence_penalty"`
	FrequencyPenalty     float64            `json:"frequency_penalty"`
	TopLogprobs          int                `json:"top_logprobs"`
	Temperature          float64            `json:"temperature"`
	Reasoning            ReasoningConfig    `json:"reasoning"`
	Usage                *Usage             `json:"usage"`
	MaxOutputTokens      *int               `json:"max_output_tokens"`
	MaxToolCalls         *int               `json:"max_tool_calls"`
	Store                bool               `json:"store"`
	Background           bool               `json:"background"`
	ServiceTier          string             `json:"service_tier"`
	Metadata             map[string]string  `json:"metadata"`
	SafetyIdentifier     *string            `json:"safety_identifier"`
	PromptCacheKey       *string            `json:"prompt_cache_key"`
	PromptCacheRetention *string            `json:"prompt_cache_retention"`
	User                 *string            `json:"user"`

	// OutputOffset is set on a suspended rollout's pause (response.done) and
	// on the response.in_progress that ends it: Output then holds only the
	// paused step's items, the first of them at this output index, so that a
	// pause costs the same at step 40 as at step 1. The client has the
	// earlier items from their output_item.done events; the terminal event
	// carries the whole output.
	OutputOffset *int `json:"output_offset,omitempty"`
	// ForkedFrom is the suspended response this one was forked from
	// (response.fork): its output begins with that response's output up to
	// the fork, and its first pause waits on the same calls. Its Usage
	// counts that response's up to the fork; its Timings are its own work,
	// from the fork on.
	ForkedFrom *string `json:"forked_from,omitempty"`
	// RequiredAction lists the client tool calls a suspended response waits on.
	RequiredAction *RequiredAction `json:"required_action,omitempty"`
	// Timings is tether's per-phase timing, present when the request's
	// include has IncludeTimings.
	Timings *Timings `json:"timings,omitempty"`

	echo *echo // see KeepEcho
}

// IncludeTimings is the include value that adds per-phase timings
// (Response.Timings) to the terminal response.
const IncludeTimings = "tether.timings"

// IncludeLogprobs is the include value that adds the log probabilities of
// the output text's tokens.
const IncludeLogprobs = "message.output_text.logprobs"

// WantsLogprobs reports whether the request asked for logprobs: by include,
// or by a top_logprobs above 0.
func (r *CreateRequest) WantsLogprobs() bool {
	return r.Includes(IncludeLogprobs) || r.TopLogprobs != nil && *r.TopLogprobs > 0
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseError is the error of a failed response.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TextConfig is the text output configuration.
type TextConfig struct {
	Format    TextFormat `json:"format"`
	Verbosity string     `json:"verbosity,omitempty"`
}

// TextFormat is the output format: text, json_object or json_schema.
type TextFormat struct {
	Type        string         `json:"type"`
	Name        string         `json:"name,omitempty"`
	Description *string        `json:"description,omitempty"`
	Schema      map[string]any `json:"schema,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// ReasoningConfig is the reasoning configuration; both fields are nullable.
type ReasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails breaks input tokens down.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails breaks output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.InputTokens += u2.InputTokens
	u.InputTokensDetails.CachedTokens += u2.InputTokensDetails.CachedTokens
	u.OutputTokens += u2.OutputTokens
	u.OutputTokensDetails.ReasoningTokens += u2.OutputTokensDetails.ReasoningTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
}

// Minus is u less an earlier reading of the same response's usage: what
// was spent in between.
func (u Usage) Minus(earlier Usage) Usage {
	return Usage{
		InputTokens:         u.InputTokens - earlier.InputTokens,
		InputTokensDetails:  InputTokensDetails{CachedTokens: u.InputTokensDetails.CachedTokens - earlier.InputTokensDetails.CachedTokens},
		OutputTokens:        u.OutputTokens - earlier.OutputTokens,
		OutputTokensDetails: OutputTokensDetails{ReasoningTokens: u.OutputTokensDetails.ReasoningTokens - earlier.OutputTokensDetails.ReasoningTokens},
		TotalTokens:         u.TotalTokens - earlier.TotalTokens,
	}
}

// RequiredAction is what a suspended response waits for.
type RequiredAction struct {
	Type              string            `json:"type"` // submit_tool_outputs
	SubmitToolOutputs SubmitToolOutputs `json:"submit_tool_outputs"`
}

// SubmitToolOutputs lists pending client tool calls.
type SubmitToolOutputs struct {
	ToolCalls []PendingCall `json:"tool_calls"`
}

// PendingCall is one client tool call awaiting its output.
type PendingCall struct {
	Type      ItemType `json:"type,omitempty"` // the call's item type; "" is function_call
	CallID    string   `json:"call_id"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Arguments string   `json:"arguments"`       // a function's
	Input     string   `json:"input,omitempty"` // a custom tool's
}

// Timings are server-side phase durations in microseconds, for one
// response (or, in a pause's response, the rollout so far: a client takes
// one turn's as the difference of two readings, Minus).
//
// The pre-inference phases run once per request: decode, queue (waiting in
// the lane and for an in-flight slot), load (state not in the connection
// cache), validate, safety (the lexical classifier over new text), render.
// Per step: first_token (the model's time to its first delta), sample (all
// of the model's time), tools (dispatching the step's calls: hosted tools
// run, client calls wait for their outputs). Post-inference: store. hop is
// the simulated service calls (named in the server's cost model): a
// deliberate wait, not work. encode is turning events into frames; outbox
// the time frames waited in the connection's queue for the writer, summed
// over frames; write the writer's time putting them on the socket. A
// response's timings are taken when its terminal event is encoded, so
// encode, outbox and write cover every frame before that one; the metrics
// (/metrics) count the terminal frame too.
type Timings struct {
	DecodeMicros int64 `json:"decode_us"`
	QueueMicros  int64 `json:"queue_us"`
	// LoadMicros is the cost of state not found in the connection cache:
	// reading the chain from the store and rendering all of it.
	LoadMicros       int64 `json:"load_us"`
	ValidateMicros   int64 `json:"validate_us"`
	SafetyMicros     int64 `json:"safety_us"`
	RenderMicros     int64 `json:"render_us"`
	FirstTokenMicros int64 `json:"first_token_us"`
	SampleMicros     int64 `json:"sample_us"`
	// PacerLateMicros is how much of SampleMicros the simulated model's
	// pacing ran late of its timing model (timer resolution): model time
	// beyond the nominal, not API overhead.
	PacerLateMicros int64 `json:"pacer_late_us"`
	ToolsMicros     int64 `json:"tools_us"`
	StoreMicros     int64 `json:"store_us"`
	HopMicros       int64 `json:"hop_us"` // simulated service calls
	// JournalMicros is how long a durable rollout's pauses waited for their
	// journal writes before their response.done went out.
	JournalMicros int64 `json:"journal_us"`
	EncodeMicros  int64 `json:"encode_us"`
	OutboxMicros  int64 `json:"outbox_us"`
	WriteMicros   int64 `json:"write_us"`
	TotalMicros   int64 `json:"total_us"`
	// Frames is how many frames the writer had put on the wire (those
	// outbox and write count).
	Frames int `json:"frames"`
	// RenderedTokens is how many tokens this turn tokenized; CachedTokens how
	// many came from the connection cache or store without re-rendering.
	RenderedTokens int `json:"rendered_tokens"`
	CachedTokens   int `json:"cached_tokens"`
	// SafetyBytes is how much text the safety classifier read; SafetyFlags
	// how many of its patterns it found there.
	SafetyBytes int `json:"safety_bytes"`
	SafetyFlags int `json:"safety_flags"`
	// AgentSampleMicros is a multi-agent response's sampling time of each
	// agent that sampled in it while none of its own sub-agents ran, by
	// path, the root's (/root) too: with each agent's tool time, a client
	// finds the tree's critical path, which an agent's sampling beside its
	// sub-agents is off.
	AgentSampleMicros map[string]int64 `json:"agent_sample_us,omitempty"`
	// Engine is set when a simulated inference engine paced the model
	// (tether serve --engine-model): what it did with the response's steps.
	Engine *EngineTimings `json:"engine,omitempty"`
}

// EngineTimings are what a simulated inference engine did with a
// response's steps, summed over them, in the engine's own clock (which may
// run faster than the real one). Every figure is simulated.
type EngineTimings struct {
	// Simulated names the engine model: its profile and cache policy.
	Simulated string `json:"simulated"`
	// QueueMicros is the steps' time waiting for room in the KV cache;
	// FirstTokenMicros their time from arrival to first token, the
	// prefill of what the cache did not hold included.
	QueueMicros      int64 `json:"queue_us"`
	FirstTokenMicros int64 `json:"first_token_us"`
	// The prompts' tokens found in the cache, brought back from host
	// memory, and prefilled.
	HitTokens       int `json:"hit_tokens"`
	SwappedTokens   int `json:"swapped_tokens"`
	PrefilledTokens int `json:"prefilled_tokens"`
}

// IsZero reports whether t holds nothing.
func (t Timings) IsZero() bool {
	if len(t.AgentSampleMicros) > 0 || t.Engine != nil {
		return false
	}
	t.AgentSampleMicros = nil
	return reflect.ValueOf(t).IsZero()
}

// Add accumulates u into t.
func (t *Timings) Add(u Timings) { *t = t.combine(u, 1) }

// Minus is t less an earlier reading of the same response's timings.
func (t Timings) Minus(earlier Timings) Timings { return t.combine(earlier, -1) }

// combine is t + sign*u, field by field.
func (t Timings) combine(u Timings, sign int64) Timings {
	n := int(sign)
	return Timings{
		DecodeMicros:      t.DecodeMicros + sign*u.DecodeMicros,
		QueueMicros:       t.QueueMicros + sign*u.QueueMicros,
		LoadMicros:        t.LoadMicros + sign*u.LoadMicros,
		ValidateMicros:    t.ValidateMicros + sign*u.ValidateMicros,
		SafetyMicros:      t.SafetyMicros + sign*u.SafetyMicros,
		RenderMicros:      t.RenderMicros + sign*u.RenderMicros,
		FirstTokenMicros:  t.FirstTokenMicros + sign*u.FirstTokenMicros,
		SampleMicros:      t.SampleMicros + sign*u.SampleMicros,
		PacerLateMicros:   t.PacerLateMicros + sign*u.PacerLateMicros,
		ToolsMicros:       t.ToolsMicros + sign*u.ToolsMicros,
		StoreMicros:       t.StoreMicros + sign*u.StoreMicros,
		HopMicros:         t.HopMicros + sign*u.HopMicros,
		JournalMicros:     t.JournalMicros + sign*u.JournalMicros,
		EncodeMicros:      t.EncodeMicros + sign*u.EncodeMicros,
		OutboxMicros:      t.OutboxMicros + sign*u.OutboxMicros,
		WriteMicros:       t.WriteMicros + sign*u.WriteMicros,
		TotalMicros:       t.TotalMicros + sign*u.TotalMicros,
		Frames:            t.Frames + n*u.Frames,
		RenderedTokens:    t.RenderedTokens + n*u.RenderedTokens,
		CachedTokens:      t.CachedTokens + n*u.CachedTokens,
		SafetyBytes:       t.SafetyBytes + n*u.SafetyBytes,
		SafetyFlags:       t.SafetyFlags + n*u.SafetyFlags,
		AgentSampleMicros: combineAgents(t.AgentSampleMicros, u.AgentSampleMicros, sign),
		Engine:            combineEngine(t.Engine, u.Engine, sign),
	}
}

// combineEngine is a + sign*b; nil when both are.
func combineEngine(a, b *EngineTimings, sign int64) *EngineTimings {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		a = &EngineTimings{}
	case b == nil:
		b = &EngineTimings{}
	}
	n := int(sign)
	return &EngineTimings{Simulated: cmp.Or(a.Simulated, b.Simulated),
		QueueMicros: a.QueueMicros + sign*b.QueueMicros, FirstTokenMicros: a.FirstTokenMicros + sign*b.FirstTokenMicros,
		HitTokens: a.HitTokens + n*b.HitTokens, SwappedTokens: a.SwappedTokens + n*b.SwappedTokens,
		PrefilledTokens: a.PrefilledTokens + n*b.PrefilledTokens}
}

// combineAgents is a + sign*b, agent by agent; nil when it holds nothing.
func combineAgents(a, b map[string]int64, sign int64) map[string]int64 {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]int64, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if out[k] += sign * v; out[k] == 0 {
			delete(out, k)
		}
	}
	return out
}

// CompactResponse is the body returned by POST /v1/responses/compact.
type CompactResponse struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // response.compaction
	CreatedAt int64  `json:"created_at"`
	Output    Items  `json:"output"`
	Usage     Usage  `json:"usage"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // model
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// SimulatedEngine is tether's: set when a simulated inference engine
	// paces the model (tether serve --engine-model), naming it.
	SimulatedEngine string `json:"simulated_engine,omitempty"`
}

// InputTokens is the body of POST /v1/responses/input_tokens.
type InputTokens struct {
	Object      string `json:"object"` // response.input_tokens
	InputTokens int    `json:"input_tokens"`
}

// List is a list body ({"object":"list","data":[...]}).
type List[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	FirstID string `json:"first_id,omitempty"`
	LastID  string `json:"last_id,omitempty"`
	HasMore bool   `json:"has_more"`
}

// Deleted is the body of DELETE /v1/responses/{id}.
type Deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}
