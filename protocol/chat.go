package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the wire vocabulary of Chat Completions (POST
// /v1/chat/completions): the fields tether reads from a request and sends in
// one, and the chat.completion and chat.completion.chunk objects. tether
// serves the API over its samplers and speaks it to upstream servers
// (llama.cpp's server, vLLM, Ollama, OpenAI), so every type here is both
// decoded and encoded. Fields tether has no use for are ignored on decode.

// Chat completion object types.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
)

// Chat finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Model               string             `json:"model"`
	Messages            []ChatMessage      `json:"messages"`
	Tools               []ChatTool         `json:"tools,omitempty"`
	ToolChoice          *ChatToolChoice    `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *ChatStreamOptions `json:"stream_options,omitempty"`
	MaxTokens           *int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int               `json:"max_completion_tokens,omitempty"`
	N                   *int               `json:"n,omitempty"`
	Logprobs            *bool              `json:"logprobs,omitempty"`     // an upstream's tokens' logprobs, in each choice's logprobs.content
	TopLogprobs         *int               `json:"top_logprobs,omitempty"` // alternatives a token, with Logprobs
	// PromptCacheKey asks the server to route the prompt to a cache by
	// this key, as on the Responses API.
	PromptCacheKey *string `json:"prompt_cache_key,omitempty"`
	// PromptCacheRetention is how long the server may keep the prompt's
	// cached prefix: "in_memory" or "24h", as on the Responses API.
	PromptCacheRetention *string `json:"prompt_cache_retention,omitempty"`
	// ServiceTier asks for a processing tier, as on the Responses API.
	ServiceTier string `json:"service_tier,omitempty"`
}

// ChatStreamOptions are a streaming request's options.
type ChatStreamOptions struct {
	// IncludeUsage asks for a last chunk, before [DONE], whose choices are
	// empty and whose usage counts the whole request.
	IncludeUsage bool `json:"include_usage"`
}

// Chat message roles beyond the Responses roles (system, developer, user,
// assistant).
const RoleTool Role = "tool"

// ChatMessage is one message of a request: system, developer, user,
// assistant (text and/or tool calls) or tool (one call's result).
type ChatMessage struct {
	Role    Role         `json:"role"`
	Content *ChatContent `json:"content,omitempty"` // nil: absent or null
	// Refusal is an assistant message's refusal.
	Refusal    string         `json:"refusal,omitempty"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// ChatContent is a message's content: a string, or an array of parts.
type ChatContent struct {
	Text  string
	Parts []ChatPart // non-nil when the content is an array
}

// ChatPart is one content part: text, image_url, file, input_audio or
// refusal.
type ChatPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *ChatImageURL `json:"image_url,omitempty"`
	File     *ChatFile     `json:"file,omitempty"`
	Refusal  string        `json:"refusal,omitempty"`
}

// ChatImageURL is an image_url part's image.
type ChatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ChatFile is a file part's file.
type ChatFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
}

// MarshalJSON writes the string, or the array when c has parts.
func (c ChatContent) MarshalJSONTo(enc *jsontext.Encoder) error {
	if c.Parts != nil {
		return marshalTo(enc, c.Parts)
	}
	return marshalTo(enc, c.Text)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c ChatContent) MarshalJSON() ([]byte, error) { return Marshal(c) }

// UnmarshalJSON accepts a string or an array of parts.
func (c *ChatContent) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ChatContent{}
		return unmarshal(b, &c.Text)
	}
	var parts []ChatPart
	if err := unmarshal(b, &parts); err != nil {
		return err
	}
	if parts == nil {
		parts = []ChatPart{}
	}
	*c = ChatContent{Parts: parts}
	return nil
}

// ChatTool is a tool offered to the model; only functions exist.
type ChatTool struct {
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction is a function tool's definition.
type ChatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ChatToolCall is a function call: in an assistant message, or, with Index,
// a piece of one in a streamed delta (id, type and name come in the call's
// first piece, the arguments in pieces after it).
type ChatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function ChatFunctionCall `json:"function"`
}

// ChatFunctionCall is the function a call calls, and its arguments (JSON).
type ChatFunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatToolChoice is tool_choice in its chat form: "none", "auto" or
// "required"; {"type":"function","function":{"name":...}}; or
// {"type":"allowed_tools","allowed_tools":{"mode":...,"tools":[{"type":
// "function","function":{"name":...}}]}}. It holds the same choice as a
// ToolChoice.
type ChatToolChoice ToolChoice

type chatNamed struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

func namedFunction(name string) chatNamed {
	n := chatNamed{Type: "function"}
	n.Function.Name = name
	return n
}

// MarshalJSON writes the string or object form.
func (c ChatToolChoice) MarshalJSONTo(enc *jsontext.Encoder) error {
	switch {
	case c.Function != "":
		return marshalTo(enc, namedFunction(c.Function))
	case c.Allowed != nil:
		refs := make([]chatNamed, 0, len(c.Allowed))
		for _, r := range c.Allowed {
			if r.Type == ToolFunction { // chat has functions only
				refs = append(refs, namedFunction(r.Name))
			}
		}
		var w struct {
			Type    string `json:"type"`
			Allowed struct {
				Mode  string      `json:"mode"`
				Tools []chatNamed `json:"tools"`
			} `json:"allowed_tools"`
		}
		w.Type, w.Allowed.Mode, w.Allowed.Tools = "allowed_tools", c.Mode, refs
		if w.Allowed.Mode == "" {
			w.Allowed.Mode = "auto"
		}
		return marshalTo(enc, w)
	case c.Mode == "":
		return enc.WriteToken(jsontext.String("auto"))
	}
	return marshalTo(enc, c.Mode)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c ChatToolChoice) MarshalJSON() ([]byte, error) { return Marshal(c) }

// UnmarshalJSON accepts every form MarshalJSON writes.
func (c *ChatToolChoice) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ChatToolChoice{}
		return unmarshal(b, &c.Mode)
	}
	var w struct {
		chatNamed
		Allowed *struct {
			Mode  string      `json:"mode"`
			Tools []chatNamed `json:"tools"`
		} `json:"allowed_tools"`
	}
	if err := unmarshal(b, &w); err != nil {
		return err
	}
	switch w.Type {
	case "function":
		if w.Function.Name == "" {
			return Invalid(CodeMissingRequired, "tool_choice.function.name", "Missing required parameter: 'tool_choice.function.name'.")
		}
		*c = ChatToolChoice{Mode: "required", Function: w.Function.Name}
	case "allowed_tools":
		if w.Allowed == nil {
			return Invalid(CodeMissingRequired, "tool_choice.allowed_tools", "Missing required parameter: 'tool_choice.allowed_tools'.")
		}
		refs := make([]ToolRef, 0, len(w.Allowed.Tools))
		for _, t := range w.Allowed.Tools {
			refs = append(refs, ToolRef{ToolFunction, t.Function.Name})
		}
		*c = ChatToolChoice{Mode: w.Allowed.Mode, Allowed: refs}
	default:
		return Invalid(CodeInvalidValue, "tool_choice.type", "Invalid value: '%s'. Supported tool_choice types are: 'function' and 'allowed_tools'.", w.Type)
	}
	return nil
}

// ChatCompletion is a chat.completion, or, with Object
// chat.completion.chunk, one streamed chunk of one.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	// Usage is set on a completion, and on the last chunk of a stream that
	// asked for it.
	Usage *ChatUsage `json:"usage,omitempty"`
}

// ChatChoice is a completion's one choice (Message set), or a chunk's
// (Delta set). Logprobs is null unless the request asked for logprobs:
// then {"content": [...], "refusal": null}, its text's tokens' (a chunk's
// own). FinishReason is null until the choice ends.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      *ChatReply      `json:"message,omitempty"`
	Delta        *ChatDelta      `json:"delta,omitempty"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// ChatReply is the assistant message of a completion. Content is null when
// the model only called tools.
type ChatReply struct {
	Role      Role           `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
}

// ChatDelta is what one chunk adds to the assistant message.
type ChatDelta struct {
	Role      Role           `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	Refusal   *string        `json:"refusal,omitempty"`
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
}

// ChatUsage counts a completion's tokens.
type ChatUsage struct {
	PromptTokens            int                         `json:"prompt_tokens"`
	CompletionTokens        int                         `json:"completion_tokens"`
	TotalTokens             int                         `json:"total_tokens"`
	PromptTokensDetails     ChatPromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails ChatCompletionTokensDetails `json:"completion_tokens_details"`
}

// ChatPromptTokensDetails breaks prompt tokens down.
type ChatPromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ChatCompletionTokensDetails breaks completion tokens down.
type ChatCompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}
