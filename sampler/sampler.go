package sampler

import (
	"strconv"
	"time"

	"github.com/tether-run/tether/protocol"
)

// DeltaKind says what a Delta carries.
type DeltaKind uint8

// Delta kinds. A sample is a sequence of parts; each part is a Start delta
// (TextStart or CallStart), zero or more token deltas of the matching kind,
// and one PartEnd. Parts never nest or interleave.
const (
	TextStart DeltaKind = iota // a new assistant message begins
	TextDelta                  // Text holds one token's text
	CallStart                  // a new function call begins; CallID and Name set
	ArgsDelta                  // Text holds one token of the arguments JSON
	PartEnd                    // the open message/call is complete
	Citation                   // Annotation cites a span of the open message's text emitted so far
)

var deltaKindNames = [...]string{"TextStart", "TextDelta", "CallStart", "ArgsDelta", "PartEnd", "Citation"}

// String returns the constant's name.
func (k DeltaKind) String() string {
	if int(k) < len(deltaKindNames) {
		return deltaKindNames[k]
	}
	return "DeltaKind(" + strconv.Itoa(int(k)) + ")"
}

// Delta is one step of a streamed sample. Within a function call, ArgsDelta
// and PartEnd repeat the call's CallID, Name and Namespace, so a consumer may route
// deltas without remembering the open part.
type Delta struct {
	Kind   DeltaKind
	Text   string
	CallID string
	Name   string
	// Namespace is the namespace tool a call's Name belongs to, "" for a
	// top-level function.
	Namespace string
	// CallType is a call's item type: protocol.ItemCustomToolCall for a
	// custom tool, whose deltas are its input text; "" is a function call.
	CallType protocol.ItemType
	// Incomplete marks a PartEnd that cut the part off at MaxOutputTokens.
	Incomplete bool
	// More marks a token delta (TextDelta, ArgsDelta) that another token
	// of the same part follows at once: both came due by the same step of
	// the engine (see Engine), which was late for the first. A consumer may
	// hold its text back and send it with the next delta's, in one event;
	// the next delta always comes, unless the sample's context ends.
	More bool
	// Annotation is the citation of a Citation delta; its indices count
	// characters (runes) of the message text.
	Annotation *protocol.Annotation
	// Logprobs are a TextDelta's tokens' log probabilities, one entry a
	// token, when the request asked for them (Request.Logprobs) and the
	// backend has them: the simulated models make them (SyntheticLogprob),
	// an upstream passes on what its server sends.
	Logprobs []protocol.LogProb
}

// Request is what a backend samples from. Backends must not modify it or
// anything it points to.
type Request struct {
	Model        string
	Instructions string
	Items        protocol.Items // the whole context, oldest first (previous input+output + new input)
	Tools        []protocol.Tool
	ToolChoice   protocol.ToolChoice
	// Serial is parallel_tool_calls: false: a step calls at most one tool.
	Serial          bool
	MaxOutputTokens int // 0 = no limit
	// Format is text.format: a text answer's form (json_schema,
	// json_object), nil or "text" for free text.
	Format *protocol.TextFormat
	// Prompt is Items rendered, without the system block of Instructions
	// and Tools. It may be nil; backends that need it render Items
	// themselves. A PrefixCache matches it by the hashes its segments keep.
	Prompt *Prompt
	// CacheKey is the request's prompt_cache_key. Requests with different
	// keys never share a cached prefix (OpenAI routes prompts to caches by
	// it); requests without one share by content alone, as on one
	// inference server.
	CacheKey string
	// Session names the rollout or conversation the request is a step of,
	// when the server knows it: a suspended rollout's response, the first
	// response of a chain. An upstream gets it as the prompt_cache_key of
	// a request that has none, so that every step of the rollout reaches
	// the cache that holds its prefix (OpenAI routes by the key; an engine
	// that pins a session's cache can key it so). The local models ignore
	// it: their prefix cache shares by content, and by CacheKey alone.
	Session string
	// CacheRetention is the request's prompt_cache_retention: how long
	// its prompt's prefix may be kept cached, protocol.CacheInMemory or
	// protocol.Cache24h ("" asks for none). The local models' PrefixCache
	// keeps it so; an upstream is sent it.
	CacheRetention string
	// ServiceTier is the request's service_tier, "" for none. An upstream
	// is sent it, and says which tier served it (Result.ServiceTier); the
	// simulated models serve every request at standard processing.
	ServiceTier string
	// Response is the id of the response the request is a step of (a
	// Chat Completions request's: its completion's id), "" for none. The
	// local models draw their call ids from it and the call's place in
	// the response: unique across responses even when a client keeps its
	// context the same length every turn (a memory window of its last
	// messages), and the same for a step run again (a durable rollout
	// taken over), which then lines up with its first run.
	Response string
	// MultiAgent is set for a step of a multi-agent response's agent
	// (OpenAI's multi-agent beta), which may act on its agent tree: the
	// scripted model then reads the spawn, wait, send, list and interrupt
	// directives. Agent is a sub-agent's path ("" for the root): the local
	// models draw their call ids from it too, so that two agents of one
	// response never make the same one.
	MultiAgent bool
	Agent      string
	// Logprobs asks for the text's log probabilities (Delta.Logprobs),
	// with TopLogprobs alternatives a token.
	Logprobs    bool
	TopLogprobs int
	// Suspended is set for a step of a suspended rollout, whose loop the
	// server runs to its end: a step that makes no tool call ends it, and a served engine (EngineModel)
	// releases its cache at once rather than keep it for a next turn.
	Suspended bool
	// Start is when the prompt was ready for the model, zero for when
	// Sample is called. The local backends' pacing starts there: the
	// events a server sends while its model starts (response.in_progress)
	// are encoded while a real engine is already reading the prompt, not
	// before it may begin. Upstream models ignore it.
	Start time.Time
}

// Result is the outcome of a sample.
type Result struct {
	// OutputTokens counts every TextDelta and ArgsDelta emitted.
	OutputTokens int
	// ReasoningTokens counts the tokens the model was paced for but did not
	// emit (a replayed step's hidden reasoning). They are output tokens to
	// the client (usage.output_tokens includes them, as OpenAI's does) and
	// model time to the timing model.
	ReasoningTokens int
	// PacerLate is how much later than the timing model's time the sample's
	// last token came (see Pacer.Late): model time, not API overhead.
	PacerLate time.Duration
	// Engine is what a served engine did with the sample (EngineModel),
	// nil without one.
	Engine *EngineResult
	// Incomplete reports that the sample stopped at MaxOutputTokens; the open
	// part was ended with PartEnd and the rest of the step was dropped.
	Incomplete bool
	// PromptTokens is the length of the prompt the backend read: the system
	// block, then the items.
	PromptTokens int
	// CachedPromptTokens is how many of them, from the start, the backend's
	// prefix cache held; the sample paid prefill for the others. It is the
	// same for a request whatever transport or design delivered it.
	CachedPromptTokens int
	// ServiceTier is the processing tier that served the sample, when the
	// backend says (an upstream's service_tier), else "".
	ServiceTier string
}
