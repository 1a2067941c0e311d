package sampler

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tether-run/tether/protocol"
)

// This file builds an upstream request from a sampler Request: the context
// as chat messages or as Responses input items.

// webSearchFunction is the function a hosted web_search is offered upstream as.
func webSearchFunction() protocol.Tool {
	return protocol.Tool{
		Type:        protocol.ToolFunction,
		Name:        string(protocol.ToolWebSearch),
		Description: new("Search the web. Returns the title, URL and a snippet of each result."),
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to search for."}},"required":["query"]}`),
	}
}

// upstreamTools are the function tools to offer upstream: the request's
// functions, and its hosted web search as a function.
func upstreamTools(tools []protocol.Tool) []protocol.Tool {
	var out []protocol.Tool
	for _, t := range tools {
		switch t.Type {
		case protocol.ToolFunction:
			t.Raw = nil
			out = append(out, t)
		case protocol.ToolWebSearch:
			out = append(out, webSearchFunction())
		}
	}
	return out
}

// responsesTools are the tools to offer a Responses upstream: what
// upstreamTools offers, and namespaces and custom tools as they were sent,
// since the Responses API has them.
func responsesTools(tools []protocol.Tool) []protocol.Tool {
	out := upstreamTools(tools)
	for _, t := range tools {
		if t.Type == protocol.ToolNamespace || t.Type == protocol.ToolCustom {
			out = append(out, t)
		}
	}
	return out
}

// upstreamChoice is the tool choice as the upstream sees it: web_search is
// a function there, and the tools it is not offered cannot be chosen.
func upstreamChoice(c protocol.ToolChoice) protocol.ToolChoice {
	asFunction := func(r protocol.ToolRef) (protocol.ToolRef, bool) {
		switch {
		case r.Type == protocol.ToolFunction:
			return r, true
		case r.Type.Canonical() == protocol.ToolWebSearch:
			return protocol.ToolRef{Type: protocol.ToolFunction, Name: string(protocol.ToolWebSearch)}, true
		}
		return protocol.ToolRef{}, false
	}
	if c.Builtin != "" {
		if r, ok := asFunction(protocol.ToolRef{Type: c.Builtin}); ok {
			c.Function = r.Name
		}
		c.Builtin = ""
	}
	c.Custom = ""
	if c.Allowed != nil {
		refs := make([]protocol.ToolRef, 0, len(c.Allowed))
		for _, r := range c.Allowed {
			if r, ok := asFunction(r); ok {
				refs = append(refs, r)
			}
		}
		c.Allowed = refs
	}
	return c
}

// upstreamItems is the context as the upstream is sent it: items without
// their ids and statuses (ids are this server's, unknown upstream), hosted
// web searches as a web_search function call and its output, and without
// reasoning, which another server could not read.
func upstreamItems(items protocol.Items) protocol.Items {
	out := make(protocol.Items, 0, len(items))
	for _, it := range items {
		switch it := it.(type) {
		case *protocol.Message:
			if it != nil {
				out = append(out, &protocol.Message{Role: it.Role, Content: it.Content, Phase: it.Phase})
			}
		case *protocol.FunctionCall:
			if it != nil {
				out = append(out, &protocol.FunctionCall{CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Arguments: it.Arguments})
			}
		case *protocol.CustomToolCall:
			if it != nil {
				out = append(out, &protocol.CustomToolCall{CallID: it.CallID, Name: it.Name, Namespace: it.Namespace, Input: it.Input})
			}
		case *protocol.CustomToolCallOutput:
			if it != nil {
				out = append(out, &protocol.CustomToolCallOutput{CallID: it.CallID, Output: it.Output})
			}
		case *protocol.FunctionCallOutput:
			if it != nil {
				out = append(out, &protocol.FunctionCallOutput{CallID: it.CallID, Output: it.Output})
			}
		case *protocol.WebSearchCall:
			if it != nil {
				call, output := webSearchItems(it)
				out = append(out, call, output)
			}
		}
	}
	return out
}

// webSearchItems are a hosted search as a web_search function call and its
// output. The item's id stands in for the call id it does not have.
func webSearchItems(ws *protocol.WebSearchCall) (*protocol.FunctionCall, *protocol.FunctionCallOutput) {
	query := ""
	if ws.Action != nil {
		query = ws.Action.Query
	}
	args, _ := json.Marshal(struct {
		Query string `json:"query"`
	}{query})
	var b strings.Builder
	switch {
	case ws.Status == protocol.StatusFailed:
		b.WriteString("The search failed.")
	case ws.Action == nil || len(ws.Action.Sources) == 0:
		b.WriteString("No results.")
	default:
		for i, src := range ws.Action.Sources {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(strconv.Itoa(i+1) + ". " + src.Title + "\n" + src.URL)
			if src.Snippet != "" {
				b.WriteString("\n" + src.Snippet)
			}
		}
	}
	return &protocol.FunctionCall{CallID: ws.ID, Name: string(protocol.ToolWebSearch), Arguments: string(args)},
		&protocol.FunctionCallOutput{CallID: ws.ID, Output: protocol.ToolOutput{Text: b.String()}}
}

// responsesBody is the body of a streamed, unstored POST /responses.
func responsesBody(model string, req *Request) ([]byte, error) {
	body := struct {
		Model           string               `json:"model"`
		Instructions    string               `json:"instructions,omitempty"`
		Input           protocol.Items       `json:"input"`
		Tools           []protocol.Tool      `json:"tools,omitempty"`
		ToolChoice      *protocol.ToolChoice `json:"tool_choice,omitempty"`
		Parallel        *bool                `json:"parallel_tool_calls,omitempty"`
		MaxOutputTokens int                  `json:"max_output_tokens,omitempty"`
		Text            *protocol.TextConfig `json:"text,omitempty"`
		Stream          bool                 `json:"stream"`
		Store           bool                 `json:"store"`
		Include         []string             `json:"include,omitempty"`
		TopLogprobs     *int                 `json:"top_logprobs,omitempty"`
		CacheKey        string               `json:"prompt_cache_key,omitempty"`
		CacheRetention  string               `json:"prompt_cache_retention,omitempty"`
		ServiceTier     string               `json:"service_tier,omitempty"`
	}{
		Model:          model,
		Instructions:   req.Instructions,
		Input:          upstreamItems(req.Items),
		Tools:          responsesTools(req.Tools),
		Stream:         true,
		Parallel:       serial(req),
		CacheKey:       req.cacheKey(),
		CacheRetention: req.CacheRetention,
		ServiceTier:    req.ServiceTier,
	}
	if choice := upstreamChoice(req.ToolChoice); len(body.Tools) > 0 && !isAuto(choice) {
		body.ToolChoice = &choice
	}
	body.MaxOutputTokens = max(req.MaxOutputTokens, 0)
	if req.Logprobs {
		body.Include, body.TopLogprobs = []string{protocol.IncludeLogprobs}, &req.TopLogprobs
	}
	if f := req.Format; f != nil && f.Type != "" && f.Type != "text" {
		body.Text = &protocol.TextConfig{Format: *f} // passed through: the upstream model answers in it
	}
	return json.Marshal(body)
}

// chatBody is the body of a streamed POST /chat/completions that asks for
// usage. allowed_tools, which few chat servers know, is sent as the allowed
// tools alone; max_tokens is the limit every chat server reads.
func chatBody(model string, req *Request) ([]byte, error) {
	body := protocol.ChatRequest{
		Model:         model,
		Messages:      chatMessages(req.Instructions, upstreamItems(req.Items)),
		Stream:        true,
		StreamOptions: &protocol.ChatStreamOptions{IncludeUsage: true},
	}
	body.ParallelToolCalls = serial(req)
	if req.Logprobs {
		body.Logprobs, body.TopLogprobs = new(true), &req.TopLogprobs
	}
	choice := upstreamChoice(req.ToolChoice)
	offer := func(t protocol.Tool) {
		f := protocol.ChatFunction{Name: t.Name, Parameters: t.Parameters, Strict: t.Strict}
		if t.Description != nil {
			f.Description = *t.Description
		}
		body.Tools = append(body.Tools, protocol.ChatTool{Type: "function", Function: f})
	}
	for _, t := range upstreamTools(req.Tools) {
		if choice.Allows(t) {
			offer(t)
		}
	}
	mapped, _ := chatFunctions(req.Tools, req.ToolChoice) // already as the choice allows
	for _, t := range mapped {
		offer(t)
	}
	choice.Allowed = nil
	if len(body.Tools) > 0 && !isAuto(choice) {
		c := protocol.ChatToolChoice(choice)
		body.ToolChoice = &c
	}
	if req.MaxOutputTokens > 0 {
		body.MaxTokens = &req.MaxOutputTokens
	}
	if k := req.cacheKey(); k != "" {
		body.PromptCacheKey = &k
	}
	if req.CacheRetention != "" {
		body.PromptCacheRetention = &req.CacheRetention
	}
	body.ServiceTier = req.ServiceTier
	return json.Marshal(body)
}

// cacheKey is the prompt_cache_key to send upstream: the request's own,
// or else the rollout's (Session), so that its steps share a cache.
func (req *Request) cacheKey() string {
	if req.CacheKey != "" {
		return req.CacheKey
	}
	return req.Session
}

// serial is parallel_tool_calls: false for a request that asks for one
// call per step, and nil (the upstream's default) otherwise.
func serial(req *Request) *bool {
	if !req.Serial || len(req.Tools) == 0 {
		return nil
	}
	return new(false)
}

func isAuto(c protocol.ToolChoice) bool {
	return (c.Mode == "" || c.Mode == "auto") && c.Function == "" && c.Custom == "" && c.Builtin == "" && c.Allowed == nil
}

// chatMessages is the context as chat messages: the instructions as a
// system message, then one message per message item; function calls join
// the assistant message just before them (or start one), and each output is
// a tool message.
func chatMessages(instructions string, items protocol.Items) []protocol.ChatMessage {
	var msgs []protocol.ChatMessage
	if instructions != "" {
		msgs = append(msgs, protocol.ChatMessage{Role: protocol.RoleSystem, Content: &protocol.ChatContent{Text: instructions}})
	}
	for _, it := range items {
		switch it := it.(type) {
		case *protocol.Message:
			role := it.Role
			if role == "" {
				role = protocol.RoleUser
			}
			msgs = append(msgs, protocol.ChatMessage{Role: role, Content: chatContent(it.Content)})
		case *protocol.FunctionCall, *protocol.CustomToolCall:
			c, _ := protocol.CallOf(it)
			args := c.Input
			if c.Type == protocol.ItemCustomToolCall {
				b, _ := json.Marshal(map[string]string{"input": c.Input})
				args = string(b)
			}
			call := protocol.ChatToolCall{ID: c.CallID, Type: "function",
				Function: protocol.ChatFunctionCall{Name: chatName(c.Namespace, c.Name), Arguments: args}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == protocol.RoleAssistant {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, protocol.ChatMessage{Role: protocol.RoleAssistant, ToolCalls: []protocol.ChatToolCall{call}})
		case *protocol.FunctionCallOutput:
			msgs = append(msgs, protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: it.CallID,
				Content: &protocol.ChatContent{Text: it.Output.String()}})
		case *protocol.CustomToolCallOutput:
			msgs = append(msgs, protocol.ChatMessage{Role: protocol.RoleTool, ToolCallID: it.CallID,
				Content: &protocol.ChatContent{Text: it.Output.String()}})
		}
	}
	return msgs
}

// chatContent is a message's content as chat content: a string when it is
// all text, else parts (text, images, inline files; what chat cannot carry
// is dropped).
func chatContent(cs protocol.Contents) *protocol.ChatContent {
	plain := true
	for _, c := range cs {
		switch c.(type) {
		case *protocol.InputImage, *protocol.InputFile:
			plain = false
		}
	}
	if plain {
		return &protocol.ChatContent{Text: cs.Text()}
	}
	parts := make([]protocol.ChatPart, 0, len(cs))
	for _, c := range cs {
		switch c := c.(type) {
		case *protocol.InputImage:
			if c.ImageURL != nil {
				parts = append(parts, protocol.ChatPart{Type: "image_url", ImageURL: &protocol.ChatImageURL{URL: *c.ImageURL, Detail: c.Detail}})
			}
		case *protocol.InputFile:
			if c.FileData == "" {
				continue // by URL: chat has no such part
			}
			parts = append(parts, protocol.ChatPart{Type: "file", File: &protocol.ChatFile{Filename: c.Filename, FileData: c.FileData}})
		default:
			if t := c.PlainText(); t != "" {
				parts = append(parts, protocol.ChatPart{Type: "text", Text: t})
			}
		}
	}
	return &protocol.ChatContent{Parts: parts}
}
