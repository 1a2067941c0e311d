package runtime

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// This file is the work done once per response before its loop runs: the
// request validated against its parent, its new input rendered, its
// response object made.

// prepare validates a create request against its parent state and renders its
// new input: all the pre-inference work, done once per turn, on new input only.
// tm carries the timings measured before prepare (decode, state load);
// received is when the frame or body arrived.
func (s *Server) prepare(ctx context.Context, req *protocol.CreateRequest, parent *conversation, received time.Time, tm protocol.Timings) (*rollout, *protocol.Error) {
	r := &rollout{srv: s, req: req, start: received, tm: tm, everyDelta: s.opts.EveryDelta}
	r.shareNew()
	t0 := s.now()
	if perr := req.Validate(); perr != nil {
		return nil, perr
	}
	if req.MultiAgentEnabled() && req.Suspend != nil && !*req.Suspend {
		// Over WebSocket the beta's response waits on its client's calls:
		// a suspended rollout, in the beta's dialect (no response.done).
		return nil, protocol.Invalid(protocol.CodeInvalidValue, "suspend",
			"Invalid 'suspend': false with 'multi_agent' enabled. A multi-agent response waits, in_progress, on its client's calls over WebSocket, and completes at them over HTTP; leave 'suspend' out.")
	}
	model, perr := s.model(req.Model)
	if perr != nil {
		return nil, perr
	}
	r.model = model
	if perr := honours(req, model); perr != nil {
		return nil, perr
	}
	if perr := r.askLogprobs(); perr != nil {
		return nil, perr
	}
	if am, ok := model.(AgentSampler); req.MultiAgentEnabled() && (!ok || !am.Agents()) {
		return nil, protocol.Invalid(protocol.CodeUnsupportedParameter, "multi_agent",
			"Unsupported parameter: 'multi_agent' with the model '%s': it cannot act on an agent tree (an upstream model is offered no agent tools). The simulated models can: tether-scripted, replay:NAME.", req.Model)
	}
	if req.Generating() {
		choice := protocol.ToolChoice{}
		if req.ToolChoice != nil {
			choice = *req.ToolChoice
		}
		if perr := s.offersRequired(req.Model, model, req.Tools, choice); perr != nil {
			return nil, perr
		}
	}
	if r.hosted, perr = s.hostedTools(req); perr != nil {
		return nil, perr
	}
	if perr := s.prepareMCP(r); perr != nil {
		return nil, perr
	}
	if perr := protocol.ValidateItems(req.Input, "input"); perr != nil {
		return nil, perr
	}
	ids.NameInputs(req.Input)
	var ctxItems protocol.Items
	if parent != nil {
		ctxItems, r.chain = parent.items, parent.chain
	}
	input, from, perr := s.expand(req.Input, ctxItems, "input", s.storedItems(ctx))
	if perr != nil {
		return nil, perr
	}
	if perr := checkOutputs(input, from, ctxItems); perr != nil {
		return nil, perr
	}
	if parent == nil && len(input) == 0 && req.Generating() {
		return nil, protocol.Invalid(protocol.CodeMissingRequired, "input", "Missing required parameter: 'input'.")
	}
	r.tm.ValidateMicros = s.now().Sub(t0).Microseconds()
	s.hooks.Admit(input, &r.tm)
	t1 := s.now()

	// Render: the system block unless it is the parent's, then new items only.
	instr := ""
	if req.Instructions != nil {
		instr = *req.Instructions
	}
	if parent != nil && parent.header != nil && parent.instructions == instr && sameTools(parent.tools, req.Tools) {
		r.header = parent.header
		r.tm.CachedTokens += len(r.header)
	} else {
		r.header = s.renderer.Header(instr, req.Tools)
		r.tm.RenderedTokens += len(r.header)
	}
	if parent != nil {
		r.base = len(parent.items)
		r.items = append(slices.Clip(parent.items), input...)
		r.prompt = parent.prompt
		r.win = parent.win
		r.tm.RenderedTokens += parent.rendered
		r.tm.CachedTokens += parent.prompt.Len() - parent.rendered
	} else {
		r.items = slices.Clip(input)
	}
	r.rendered = len(r.items) - len(input)
	if req.MultiAgentEnabled() {
		r.tree, r.flat = newAgents(r), slices.Clip(r.items)
		switch {
		case r.tree.rebuild(r.flat):
			// Each agent's context is rendered whole: the parent's items
			// are every agent's.
			r.prompt, r.rendered, r.win = nil, 0, window{}
		case parent != nil && parent.prompt == nil: // hydrated unrendered, and no tree in it
			r.prompt = s.renderFrom(parent.items, parent.win)
		}
	}
	// A context compaction the client sent back (a stateless client
	// chaining its output): the context reads from it.
	if w, perr := s.windowOf(ctx, Tenant(ctx), input, 0, "input"); perr != nil {
		return nil, perr
	} else if w.n > 0 {
		w.n += r.rendered // an index in input: in the context, after the parent's items
		r.win, r.prompt, r.rendered = w, nil, w.start()
	}
	r.approvedFrom = r.rendered
	r.renderPending()
	r.tm.RenderMicros = s.now().Sub(t1).Microseconds()
	if req.Generating() {
		// A context past the model's window is refused before the response
		// begins, as OpenAI refuses it; the loop fits each step again.
		if perr := r.fit(); perr != nil {
			return nil, perr
		}
	}
	r.resp = s.newResponse(req, parent)
	r.client = openCalls{}
	return r, nil
}

// hostedTools are the hosted tools req offers, by call name, or the error
// for one this server does not have.
func (s *Server) hostedTools(req *protocol.CreateRequest) (map[string]Tool, *protocol.Error) {
	hosted := make(map[string]Tool)
	for i, t := range req.Tools {
		if protocol.RunnerOf(t) != protocol.RunsHosted || t.Type == protocol.ToolMCP {
			continue
		}
		h, ok := s.hosted[t.Type.Canonical()]
		if !ok {
			return nil, protocol.Invalid(protocol.CodeToolNotAvailable, protocol.IndexParam("tools", i)+".type",
				"The hosted tool '%s' is not available on this server (an embedding program enables it with a %s tool in Options.HostedTools; tether serve always has it).", t.Type, t.Type.Canonical())
		}
		hosted[string(t.Type.Canonical())] = h
	}
	return hosted, nil
}

func (s *Server) newResponse(req *protocol.CreateRequest, parent *conversation) *protocol.Response {
	resp := &protocol.Response{
		ID:                   ids.New("resp"),
		Object:               "response",
		CreatedAt:            s.now().Unix(),
		Status:               protocol.ResponseInProgress,
		Model:                req.Model,
		Instructions:         req.Instructions,
		Output:               protocol.Items{},
		Tools:                req.Tools,
		Truncation:           "disabled",
		ParallelToolCalls:    true,
		Text:                 protocol.TextConfig{Format: protocol.TextFormat{Type: "text"}},
		TopP:                 1,
		Temperature:          1,
		MaxOutputTokens:      req.MaxOutputTokens,
		MaxToolCalls:         req.MaxToolCalls,
		Store:                req.Storing(),
		Background:           req.InBackground(),
		ServiceTier:          protocol.ServiceTierAuto, // what was asked for while it runs; what served it once it ends (finish)
		Metadata:             req.Metadata,
		SafetyIdentifier:     req.SafetyIdentifier,
		PromptCacheKey:       req.PromptCacheKey,
		PromptCacheRetention: req.PromptCacheRetention,
		User:                 req.User,
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = ptr(req.PreviousResponseID)
	}
	if req.Conversation != nil {
		resp.Conversation = &protocol.ConversationRef{ID: req.Conversation.ID}
	}
	if resp.Tools == nil {
		resp.Tools = []protocol.Tool{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if req.ToolChoice != nil {
		resp.ToolChoice = *req.ToolChoice
	}
	if req.Truncation != "" {
		resp.Truncation = req.Truncation
	}
	if req.ParallelToolCalls != nil {
		resp.ParallelToolCalls = *req.ParallelToolCalls
	}
	if req.Text != nil {
		resp.Text = *req.Text
		if resp.Text.Format.Type == "" {
			resp.Text.Format.Type = "text"
		}
	}
	for dst, src := range map[*float64]*float64{&resp.TopP: req.TopP, &resp.Temperature: req.Temperature,
		&resp.PresencePenalty: req.PresencePenalty, &resp.FrequencyPenalty: req.FrequencyPenalty} {
		if src != nil {
			*dst = *src
		}
	}
	if req.TopLogprobs != nil {
		resp.TopLogprobs = *req.TopLogprobs
	}
	if req.Reasoning != nil {
		resp.Reasoning = *req.Reasoning
	}
	if req.ServiceTier != "" {
		resp.ServiceTier = req.ServiceTier
	}
	return resp
}

// prepareMCP takes the request's mcp tools, refusing a server the request
// may not reach before anything starts.
func (s *Server) prepareMCP(r *rollout) *protocol.Error {
	for i, t := range r.req.Tools {
		if t.Type != protocol.ToolMCP {
			continue
		}
		param := protocol.IndexParam("tools", i)
		if s.opts.MCP == nil {
			return protocol.Invalid(protocol.CodeToolNotAvailable, param+".type",
				"Hosted MCP servers are not enabled on this server (an embedding program enables them with Options.MCP; tether serve always has them).")
		}
		if err := s.opts.MCP.Check(*t.MCP); err != nil {
			code, field := protocol.CodeInvalidValue, ".server_url"
			if errors.Is(err, ErrMCPNotAllowed) {
				code = protocol.CodeMCPServerNotAllowed
			}
			return protocol.Invalid(code, param+field, "%s", mcpReason(err))
		}
		if r.mcp == nil {
			r.mcp = make(map[string]*mcpServer)
		}
		r.mcp[t.MCP.ServerLabel] = &mcpServer{def: *t.MCP, client: s.opts.MCP}
	}
	return nil
}
