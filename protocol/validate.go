package protocol

import (
	"encoding/json"
	"regexp"
	"slices"
)

// Limits the validator enforces, from the OpenAI and Open Responses schemas.
const (
	MaxStreamIDLen      = 256
	MaxCallIDLen        = 64
	MaxToolNameLen      = 64
	MaxMetadataPairs    = 16
	MaxMetadataKeyLen   = 64
	MaxMetadataValueLen = 512
	MaxTools            = 128
)

var (
	streamIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	namePattern     = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// ValidateStreamID checks a WebSocket stream_id.
func ValidateStreamID(id string) *Error {
	if id == "" || len(id) > MaxStreamIDLen || !streamIDPattern.MatchString(id) {
		return Invalid(CodeInvalidStreamID, "stream_id", "The 'stream_id' field must be a non-empty string with at most 256 characters and may only contain letters, numbers, underscores, hyphens, and periods.")
	}
	return nil
}

// Validate checks every field of the request except its input items, which
// ValidateItems checks (so that a continuation validates only new input).
// It does not resolve the model or previous_response_id: that needs state.
func (r *CreateRequest) Validate() *Error {
	if r.Model == "" {
		return Invalid(CodeMissingRequired, "model", "Missing required parameter: 'model'.")
	}
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 2) {
		return Invalid(CodeInvalidValue, "temperature", "Invalid 'temperature': %g. Expected a value between 0 and 2.", *r.Temperature)
	}
	if r.TopP != nil && (*r.TopP < 0 || *r.TopP > 1) {
		return Invalid(CodeInvalidValue, "top_p", "Invalid 'top_p': %g. Expected a value between 0 and 1.", *r.TopP)
	}
	for _, pen := range [...]struct {
		name string
		p    *float64
	}{{"presence_penalty", r.PresencePenalty}, {"frequency_penalty", r.FrequencyPenalty}} {
		if pen.p != nil && (*pen.p < -2 || *pen.p > 2) {
			return Invalid(CodeInvalidValue, pen.name, "Invalid '%s': %g. Expected a value between -2 and 2.", pen.name, *pen.p)
		}
	}
	if r.TopLogprobs != nil && (*r.TopLogprobs < 0 || *r.TopLogprobs > 20) {
		return Invalid(CodeInvalidValue, "top_logprobs", "Invalid 'top_logprobs': %d. Expected a value between 0 and 20.", *r.TopLogprobs)
	}
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return Invalid(CodeInvalidValue, "max_output_tokens", "Invalid 'max_output_tokens': %d. Expected a positive integer.", *r.MaxOutputTokens)
	}
	if m := r.MultiAgent; m != nil {
		switch {
		case m.Enabled == nil:
			return Invalid(CodeMissingRequired, "multi_agent.enabled", "Missing required parameter: 'multi_agent.enabled'.")
		case m.MaxConcurrentSubagents != nil && *m.MaxConcurrentSubagents < 1:
			return Invalid(CodeInvalidValue, "multi_agent.max_concurrent_subagents", "Invalid 'multi_agent.max_concurrent_subagents': %d. Expected a value of at least 1.", *m.MaxConcurrentSubagents)
		}
	}
	if r.MultiAgentEnabled() { // what the beta does not take with it
		switch {
		case r.Reasoning != nil && r.Reasoning.Summary != nil:
			return Invalid(CodeUnsupportedParameter, "reasoning.summary", "Unsupported parameter: 'reasoning.summary' is not supported with 'multi_agent'.")
		case r.MaxToolCalls != nil:
			return Invalid(CodeUnsupportedParameter, "max_tool_calls", "Unsupported parameter: 'max_tool_calls' is not supported with 'multi_agent'.")
		}
	}
	if r.MaxToolCalls != nil && *r.MaxToolCalls < 0 {
		return Invalid(CodeInvalidValue, "max_tool_calls", "Invalid 'max_tool_calls': %d. Expected a non-negative integer.", *r.MaxToolCalls)
	}
	switch r.Truncation {
	case "", TruncationAuto, TruncationDisabled:
	default:
		return Invalid(CodeInvalidValue, "truncation", "Invalid 'truncation': '%s'. Supported values are: 'auto' and 'disabled'.", r.Truncation)
	}
	if v := r.PromptCacheRetention; v != nil && *v != CacheInMemory && *v != Cache24h {
		return Invalid(CodeInvalidValue, "prompt_cache_retention", "Invalid 'prompt_cache_retention': '%s'. Supported values are: 'in_memory' and '24h'.", *v)
	}
	switch r.ServiceTier {
	case "", ServiceTierAuto, ServiceTierDefault, "flex", "scale", "priority", "fast", "ultrafast":
	default:
		return Invalid(CodeInvalidValue, "service_tier", "Invalid 'service_tier': '%s'. Supported values are: 'auto', 'default', 'flex', 'scale', 'priority', 'fast' and 'ultrafast'.", r.ServiceTier)
	}
	if perr := ValidateMetadata(r.Metadata); perr != nil {
		return perr
	}
	if perr := r.ValidateContext(); perr != nil {
		return perr
	}
	for i, c := range r.ContextManagement {
		param := IndexParam("context_management", i)
		switch {
		case c.Type != "compaction":
			return Invalid(CodeInvalidValue, param+".type", "Invalid '%s.type': '%s'. Supported values are: 'compaction'.", param, c.Type)
		case c.CompactThreshold == nil:
			return Invalid(CodeMissingRequired, param+".compact_threshold", "Missing required parameter: '%s.compact_threshold'.", param)
		case *c.CompactThreshold < MinCompactThreshold:
			return Invalid(CodeInvalidValue, param+".compact_threshold", "Invalid '%s.compact_threshold': %d. Expected at least %d tokens.", param, *c.CompactThreshold, MinCompactThreshold)
		}
	}
	if perr := validateTools(r.Tools); perr != nil {
		return perr
	}
	if perr := r.validateToolChoice(); perr != nil {
		return perr
	}
	if r.Text != nil && r.Text.Format.Type != "" { // no type: the default, text
		return validateTextFormat(r.Text.Format, "text.format", "text", "json_object", "json_schema")
	}
	return nil
}

// validateTextFormat checks a text format, at p, whose type must be one of
// types: a request's text.format, or a configuration_update's.
func validateTextFormat(f TextFormat, p string, types ...string) *Error {
	if !slices.Contains(types, f.Type) {
		return Invalid(CodeInvalidValue, p+".type", "Invalid '%s.type': '%s'. Supported values are: %s.", p, f.Type, quotedList(types))
	}
	if f.Type != "json_schema" {
		return nil
	}
	if f.Name == "" {
		return Invalid(CodeMissingRequired, p+".name", "Missing required parameter: '%s.name'.", p)
	}
	if f.Schema == nil {
		return Invalid(CodeMissingRequired, p+".schema", "Missing required parameter: '%s.schema'.", p)
	}
	if f.Strict != nil && *f.Strict {
		if msg := StrictSchemaProblem(f.Schema); msg != "" {
			return Invalid(CodeInvalidJSONSchema, p+".schema", "Invalid schema for response_format '%s': %s", f.Name, msg)
		}
	}
	return nil
}

// validateFunction checks a function tool's name, unique among seen (which
// it adds to), and parameters, found at fields+".name" and
// fields+".parameters".
func validateFunction(t Tool, fields string, seen map[string]bool) *Error {
	if perr := claimName(t.Name, fields+".name", seen); perr != nil {
		return perr
	}
	if !isNull(t.Parameters) && trimSpace(t.Parameters)[0] != '{' {
		return Invalid(CodeInvalidType, fields+".parameters", "Invalid '%s.parameters': expected a JSON Schema object.", fields)
	}
	if t.Strict != nil && *t.Strict {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil && !isNull(t.Parameters) {
			return Invalid(CodeInvalidType, fields+".parameters", "Invalid '%s.parameters': expected a JSON Schema object.", fields)
		}
		if msg := StrictSchemaProblem(schema); msg != "" {
			return Invalid(CodeInvalidFunctionParameters, fields+".parameters", "Invalid schema for function '%s': %s", t.Name, msg)
		}
	}
	return nil
}

func (r *CreateRequest) validateToolChoice() *Error {
	c := r.ToolChoice
	if c == nil {
		return nil
	}
	switch c.Mode {
	case "", "none", "auto", "required":
	default:
		return Invalid(CodeInvalidValue, "tool_choice", "Invalid 'tool_choice': '%s'. Supported values are: 'none', 'auto' and 'required'.", c.Mode)
	}
	refs := c.Allowed
	switch {
	case c.Function != "":
		refs = []ToolRef{{ToolFunction, c.Function}}
	case c.Custom != "":
		refs = []ToolRef{{ToolCustom, c.Custom}}
	case c.Builtin != "":
		refs = []ToolRef{{Type: c.Builtin}}
	}
	for _, ref := range refs {
		if !offered(r.Tools, ref) {
			name := ref.Name
			if name == "" {
				name = string(ref.Type)
			}
			return Invalid(CodeInvalidValue, "tool_choice", "Tool choice '%s' not found in 'tools' parameter.", name)
		}
	}
	return nil
}

// offered reports whether tools (or a namespace among them) hold the tool
// ref names.
func offered(tools []Tool, ref ToolRef) bool {
	for _, t := range tools {
		if ref.Refers(t) || t.Type == ToolNamespace && offered(t.Tools, ref) {
			return true
		}
	}
	return false
}

func validateName(name, param string) *Error {
	if name == "" {
		return Invalid(CodeMissingRequired, param, "Missing required parameter: '%s'.", param)
	}
	if len(name) > MaxToolNameLen || !namePattern.MatchString(name) {
		return Invalid(CodeInvalidValue, param, "Invalid '%s': '%s'. Names must be 1-64 letters, digits, underscores or hyphens.", param, name)
	}
	return nil
}

func validateCallID(id, param string) *Error {
	if id == "" {
		return Invalid(CodeMissingRequired, param, "Missing required parameter: '%s'.", param)
	}
	if len(id) > MaxCallIDLen {
		return Invalid(CodeInvalidValue, param, "Invalid '%s': expected at most %d characters, got %d.", param, MaxCallIDLen, len(id))
	}
	return nil
}

// ValidateItems checks decoded input items; param names the list in errors
// ("input").
func ValidateItems(items Items, param string) *Error {
	for i, it := range items {
		p := IndexParam(param, i)
		if perr := validateItem(it, p); perr != nil {
			return perr
		}
	}
	return nil
}

func validateItem(it Item, p string) *Error {
	if perr := validateCaller(callerOf(it), p); perr != nil {
		return perr
	}
	switch it := it.(type) {
	case *Message:
		return validateMessage(it, p)
	case *FunctionCall:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		if perr := validateName(it.Name, p+".name"); perr != nil {
			return perr
		}
		if it.Arguments != "" && !json.Valid([]byte(it.Arguments)) {
			return Invalid(CodeInvalidValue, p+".arguments", "Invalid '%s.arguments': expected a JSON string.", p)
		}
		return validateStatus(it.Status, p)
	case *FunctionCallOutput:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		if perr := validateToolOutputParts(it.Output.Parts, p, ItemFunctionCallOutput); perr != nil {
			return perr
		}
		return validateStatus(it.Status, p)
	case *CustomToolCall:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		if perr := validateName(it.Name, p+".name"); perr != nil {
			return perr
		}
		return validateStatus(it.Status, p)
	case *CustomToolCallOutput:
		if perr := validateCallID(it.CallID, p+".call_id"); perr != nil {
			return perr
		}
		return validateToolOutputParts(it.Output.Parts, p, ItemCustomToolCallOutput)
	case *Reasoning:
		for j, c := range it.Summary {
			if c.ContentType() != ContentSummaryText {
				return Invalid(CodeInvalidValue, IndexParam(p+".summary", j)+".type", "Invalid reasoning summary part '%s': expected summary_text.", c.ContentType())
			}
		}
	case *Compaction:
		if it.EncryptedContent == "" {
			return Invalid(CodeMissingRequired, p+".encrypted_content", "Missing required parameter: '%s.encrypted_content'.", p)
		}
	case *ItemReferenceItem:
		if it.ID == "" {
			return Invalid(CodeMissingRequired, p+".id", "Missing required parameter: '%s.id'.", p)
		}
	case *MultiAgentCall, *MultiAgentCallOutput, *AgentMessage:
		return validateMultiAgent(it, p)
	case *Program, *ProgramOutput:
		return validateProgram(it, p)
	case *ConfigurationUpdate:
		return validateConfigurationUpdate(it, p)
	default:
		return validateTyped(it, p)
	}
	return nil
}

func validateStatus(s ItemStatus, p string) *Error {
	switch s {
	case "", StatusInProgress, StatusCompleted, StatusIncomplete:
		return nil
	}
	return Invalid(CodeInvalidValue, p+".status", "Invalid '%s.status': '%s'. Supported values are: 'in_progress', 'completed' and 'incomplete'.", p, s)
}

func validateMessage(m *Message, p string) *Error {
	var allowed []ContentType
	switch m.Role {
	case RoleUser:
		allowed = []ContentType{ContentInputText, ContentInputImage, ContentInputFile, ContentInputVideo}
	case RoleSystem, RoleDeveloper:
		allowed = []ContentType{ContentInputText}
	case RoleAssistant:
		allowed = []ContentType{ContentOutputText, ContentRefusal}
	case "":
		return Invalid(CodeMissingRequired, p+".role", "Missing required parameter: '%s.role'.", p)
	default:
		return Invalid(CodeInvalidValue, p+".role", "Invalid '%s.role': '%s'. Supported values are: 'user', 'assistant', 'system' and 'developer'.", p, m.Role)
	}
	switch m.Phase {
	case "", "commentary", "final_answer":
	default:
		return Invalid(CodeInvalidValue, p+".phase", "Invalid '%s.phase': '%s'. Supported values are: 'commentary' and 'final_answer'.", p, m.Phase)
	}
	for j, c := range m.Content {
		ok := false
		for _, a := range allowed {
			ok = ok || c.ContentType() == a
		}
		if !ok {
			return Invalid(CodeInvalidValue, IndexParam(p+".content", j)+".type", "Invalid content type '%s' for a %s message.", c.ContentType(), m.Role)
		}
		if img, isImg := c.(*InputImage); isImg {
			if img.ImageURL == nil || *img.ImageURL == "" {
				return Invalid(CodeMissingRequired, IndexParam(p+".content", j)+".image_url", "Missing required parameter: 'image_url'. tether accepts images as URLs or data URLs.")
			}
			switch img.Detail {
			case "", "low", "high", "auto":
			default:
				return Invalid(CodeInvalidValue, IndexParam(p+".content", j)+".detail", "Invalid 'detail': '%s'. Supported values are: 'low', 'high' and 'auto'.", img.Detail)
			}
		}
	}
	return validateStatus(m.Status, p)
}

// ValidateContext checks what the request continues from: a
// previous_response_id or a conversation, not both. A server calls it
// before it loads either.
func (r *CreateRequest) ValidateContext() *Error {
	if r.Conversation == nil {
		return nil
	}
	if r.PreviousResponseID != "" {
		return Invalid(CodeMutuallyExclusive, "conversation", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
	}
	if r.Conversation.ID == "" {
		return Invalid(CodeMissingRequired, "conversation.id", "Missing required parameter: 'conversation.id'.")
	}
	return nil
}

// MinCompactThreshold is the least compact_threshold taken: a context
// smaller than a compaction item's own rendering would compact at every
// step.
const MinCompactThreshold = 64
