package protocol

import (
	"encoding/json"
	"slices"
	"strings"
)

// DecodeChatRequest decodes a chat completions body. It does not validate:
// Context does, as it converts.
func DecodeChatRequest(data []byte) (*ChatRequest, *Error) {
	var r ChatRequest
	if _, perr := unmarshalRequest(data, &r, ""); perr != nil {
		return nil, perr
	}
	return &r, nil
}

// ChatContext is a chat request as a Responses model sees it: the request's
// leading system and developer messages become the instructions, the other
// messages items (an assistant message becomes its text, if any, then one
// function_call per tool call; a tool message a function_call_output).
type ChatContext struct {
	Instructions    string
	Items           Items
	Tools           []Tool
	ToolChoice      ToolChoice
	MaxOutputTokens int // 0 = no limit
}

// Context validates the request and converts it. Errors name the chat
// request's own parameters ("messages[2].tool_call_id").
func (r *ChatRequest) Context() (*ChatContext, *Error) {
	if strings.TrimSpace(r.Model) == "" {
		return nil, Invalid(CodeMissingRequired, "model", "Missing required parameter: 'model'.")
	}
	if len(r.Messages) == 0 {
		return nil, Invalid(CodeInvalidValue, "messages", "Invalid 'messages': expected a non-empty array of messages.")
	}
	if r.N != nil && *r.N != 1 {
		return nil, Invalid(CodeUnsupportedParameter, "n", "Unsupported parameter: 'n': tether samples one choice per request.")
	}
	c := &ChatContext{}
	switch {
	case r.MaxCompletionTokens != nil:
		if *r.MaxCompletionTokens < 1 {
			return nil, Invalid(CodeInvalidValue, "max_completion_tokens", "Invalid 'max_completion_tokens': %d. Expected a positive integer.", *r.MaxCompletionTokens)
		}
		c.MaxOutputTokens = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		if *r.MaxTokens < 1 {
			return nil, Invalid(CodeInvalidValue, "max_tokens", "Invalid 'max_tokens': %d. Expected a positive integer.", *r.MaxTokens)
		}
		c.MaxOutputTokens = *r.MaxTokens
	}
	if perr := c.convertTools(r.Tools); perr != nil {
		return nil, perr
	}
	if r.ToolChoice != nil {
		c.ToolChoice = ToolChoice(*r.ToolChoice)
		cr := CreateRequest{Tools: c.Tools, ToolChoice: &c.ToolChoice}
		if perr := cr.validateToolChoice(); perr != nil {
			return nil, perr
		}
	}
	if perr := c.convertMessages(r.Messages); perr != nil {
		return nil, perr
	}
	return c, nil
}

func (c *ChatContext) convertTools(tools []ChatTool) *Error {
	if len(tools) > MaxTools {
		return Invalid(CodeInvalidValue, "tools", "Invalid 'tools': at most %d tools are allowed, got %d.", MaxTools, len(tools))
	}
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		param := IndexParam("tools", i)
		switch t.Type {
		case "function":
		case "":
			return Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
		default:
			return Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported tool types are: 'function'.", t.Type)
		}
		f := t.Function
		tool := Tool{Type: ToolFunction, Name: f.Name, Parameters: f.Parameters, Strict: f.Strict}
		if f.Description != "" {
			tool.Description = &f.Description
		}
		if perr := validateFunction(tool, param+".function", seen); perr != nil {
			return perr
		}
		c.Tools = append(c.Tools, tool)
	}
	return nil
}

func (c *ChatContext) convertMessages(msgs []ChatMessage) *Error {
	var instructions []string
	leading := true
	calls := make(map[string]bool) // call ids of the tool calls so far
	for i, m := range msgs {
		p := IndexParam("messages", i)
		if m.Role != RoleSystem && m.Role != RoleDeveloper {
			leading = false
		}
		switch m.Role {
		case RoleSystem, RoleDeveloper:
			text, perr := chatText(m.Content, p, "text")
			if perr != nil {
				return perr
			}
			if leading {
				instructions = append(instructions, text)
				continue
			}
			c.Items = append(c.Items, &Message{Role: m.Role, Content: Contents{&InputText{Text: text}}})
		case RoleUser:
			if m.Content == nil {
				return Invalid(CodeMissingRequired, p+".content", "Missing required parameter: '%s.content'.", p)
			}
			content, perr := userContents(m.Content, p)
			if perr != nil {
				return perr
			}
			c.Items = append(c.Items, &Message{Role: RoleUser, Content: content})
		case RoleAssistant:
			if perr := c.assistant(m, p, calls); perr != nil {
				return perr
			}
		case RoleTool:
			if perr := validateCallID(m.ToolCallID, p+".tool_call_id"); perr != nil {
				return perr
			}
			if !calls[m.ToolCallID] {
				return Invalid(CodeToolCallNotFound, p+".tool_call_id",
					"Invalid '%s.tool_call_id': no earlier assistant message has a tool call with id '%s'.", p, m.ToolCallID)
			}
			text, perr := chatText(m.Content, p, "text")
			if perr != nil {
				return perr
			}
			c.Items = append(c.Items, &FunctionCallOutput{CallID: m.ToolCallID, Output: ToolOutput{Text: text}})
		case "":
			return Invalid(CodeMissingRequired, p+".role", "Missing required parameter: '%s.role'.", p)
		default:
			return Invalid(CodeInvalidValue, p+".role", "Invalid '%s.role': '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.", p, m.Role)
		}
	}
	c.Instructions = strings.Join(instructions, "\n\n")
	return nil
}

// assistant converts an assistant message: its text or refusal, if any, then
// its tool calls.
func (c *ChatContext) assistant(m ChatMessage, p string, calls map[string]bool) *Error {
	var content Contents
	if m.Content != nil {
		text, perr := chatText(m.Content, p, "text", "refusal")
		if perr != nil {
			return perr
		}
		if text != "" {
			content = append(content, &OutputText{Text: text, Annotations: []Annotation{}})
		}
	}
	if m.Refusal != "" {
		content = append(content, &Refusal{Refusal: m.Refusal})
	}
	if content == nil && len(m.ToolCalls) == 0 {
		return Invalid(CodeMissingRequired, p+".content", "Missing required parameter: '%s.content' (an assistant message needs content or tool_calls).", p)
	}
	if content != nil {
		c.Items = append(c.Items, &Message{Role: RoleAssistant, Content: content})
	}
	for j, tc := range m.ToolCalls {
		q := IndexParam(p+".tool_calls", j)
		if tc.Type != "" && tc.Type != "function" {
			return Invalid(CodeInvalidValue, q+".type", "Invalid value: '%s'. Supported tool call types are: 'function'.", tc.Type)
		}
		if perr := validateCallID(tc.ID, q+".id"); perr != nil {
			return perr
		}
		if perr := validateName(tc.Function.Name, q+".function.name"); perr != nil {
			return perr
		}
		if a := tc.Function.Arguments; a != "" && !json.Valid([]byte(a)) {
			return Invalid(CodeInvalidValue, q+".function.arguments", "Invalid '%s.function.arguments': expected a JSON string.", q)
		}
		calls[tc.ID] = true
		c.Items = append(c.Items, &FunctionCall{CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return nil
}

// chatText is the text of a content that may only hold parts of the given
// types (whose text is concatenated). Absent content is "".
func chatText(cc *ChatContent, p string, types ...string) (string, *Error) {
	if cc == nil {
		return "", nil
	}
	if cc.Parts == nil {
		return cc.Text, nil
	}
	var b strings.Builder
	for j, part := range cc.Parts {
		switch {
		case part.Type == "text" && slices.Contains(types, "text"):
			b.WriteString(part.Text)
		case part.Type == "refusal" && slices.Contains(types, "refusal"):
			b.WriteString(part.Refusal)
		default:
			return "", badPart(part.Type, IndexParam(p+".content", j), types)
		}
	}
	return b.String(), nil
}

// userContents converts a user message's content: text, images and files.
func userContents(cc *ChatContent, p string) (Contents, *Error) {
	if cc.Parts == nil {
		return Contents{&InputText{Text: cc.Text}}, nil
	}
	out := make(Contents, 0, len(cc.Parts))
	for j, part := range cc.Parts {
		q := IndexParam(p+".content", j)
		switch part.Type {
		case "text":
			out = append(out, &InputText{Text: part.Text})
		case "image_url":
			if part.ImageURL == nil || part.ImageURL.URL == "" {
				return nil, Invalid(CodeMissingRequired, q+".image_url.url", "Missing required parameter: '%s.image_url.url'.", q)
			}
			switch part.ImageURL.Detail {
			case "", "low", "high", "auto":
			default:
				return nil, Invalid(CodeInvalidValue, q+".image_url.detail", "Invalid '%s.image_url.detail': '%s'. Supported values are: 'low', 'high' and 'auto'.", q, part.ImageURL.Detail)
			}
			url := part.ImageURL.URL
			out = append(out, &InputImage{ImageURL: &url, Detail: part.ImageURL.Detail})
		case "file":
			if part.File == nil || part.File.FileData == "" {
				return nil, Invalid(CodeUnsupportedParameter, q+".file", "Unsupported file part: tether takes files inline, as 'file.file_data' (file ids need the Files API).")
			}
			out = append(out, &InputFile{Filename: part.File.Filename, FileData: part.File.FileData})
		default:
			return nil, badPart(part.Type, q, []string{"text", "image_url", "file"})
		}
	}
	return out, nil
}

func badPart(typ, q string, types []string) *Error {
	if typ == "" {
		return Invalid(CodeMissingRequired, q+".type", "Missing required parameter: '%s.type'.", q)
	}
	return Invalid(CodeInvalidValue, q+".type", "Invalid content part type '%s' here: expected '%s'.", typ, strings.Join(types, "' or '"))
}
