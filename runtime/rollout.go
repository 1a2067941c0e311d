package runtime

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// IncludeTimings is the include value that adds per-phase timings to the
// terminal response.
const IncludeTimings = "tether.timings"

// Sink receives a rollout's events in order. It must encode the event before
// returning (the rollout keeps mutating the objects it points to). An error
// means the client is gone: the rollout stops.
type Sink func(protocol.Event) error

// Rollout is one response's sampling loop. It is built by Server.prepare and
// run once, on one goroutine; nothing in it is shared until it publishes its
// conversation.
type Rollout struct {
	srv      *Server
	req      *protocol.CreateRequest
	model    Sampler
	parent   *conversation // nil when the request has no previous_response_id
	lane     string
	streamID string // stamped on every event ("" on the default lane and HTTP)

	input  protocol.Items  // the request's new input, compactions expanded
	items  protocol.Items  // whole context, grows with each output item
	prompt *sampler.Prompt // rendered items
	header []sampler.Token // rendered instructions and tools
	resp   *protocol.Response
	sink   Sink
	seq    int
	start  time.Time
	tm     protocol.Timings
	usage  protocol.Usage

	// The output part being streamed.
	open     protocol.Item
	openText strings.Builder
	emitErr  error
	cancel   context.CancelFunc
}

// prepare validates a create request against its parent state and renders its
// new input: all the pre-inference work, done once per turn, on new input only.
// tm carries the timings measured before prepare (decode, state load);
// received is when the frame or body arrived.
func (s *Server) prepare(req *protocol.CreateRequest, parent *conversation, received time.Time, tm protocol.Timings) (*Rollout, *protocol.Error) {
	r := &Rollout{srv: s, req: req, parent: parent, start: received, tm: tm}
	t0 := s.now()
	if perr := req.Validate(); perr != nil {
		return nil, perr
	}
	model, ok := s.models[req.Model]
	if !ok {
		return nil, protocol.Errorf(http.StatusNotFound, protocol.CodeModelNotFound, "model",
			"The model '%s' does not exist. Models served here: %s.", req.Model, strings.Join(s.ModelNames(), ", "))
	}
	r.model = model
	if perr := protocol.ValidateItems(req.Input, "input"); perr != nil {
		return nil, perr
	}
	var ctxItems protocol.Items
	if parent != nil {
		ctxItems = parent.items
	}
	input, perr := s.expand(req.Input, ctxItems, "input")
	if perr != nil {
		return nil, perr
	}
	for i, it := range req.Input {
		out, ok := it.(*protocol.FunctionCallOutput)
		if ok && !hasCall(req.Input[:i], out.CallID) && !hasCall(ctxItems, out.CallID) {
			return nil, protocol.Invalid(protocol.CodeToolCallNotFound, indexParam("input", i)+".call_id",
				"No tool call found for function call output with call_id '%s'.", out.CallID)
		}
	}
	if parent == nil && len(input) == 0 && req.Generating() {
		return nil, protocol.Invalid(protocol.CodeMissingRequired, "input", "Missing required parameter: 'input'.")
	}
	r.input = input
	t1 := s.now()
	r.tm.ValidateMicros = t1.Sub(t0).Microseconds()

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
		r.items = append(slices.Clip(parent.items), input...)
		r.prompt = parent.prompt
		r.tm.CachedTokens += parent.prompt.Len()
	} else {
		r.items = slices.Clip(input)
	}
	for _, it := range input {
		toks := s.renderer.Item(it)
		r.prompt = r.prompt.Append(toks)
		r.tm.RenderedTokens += len(toks)
	}
	r.tm.RenderMicros = s.now().Sub(t1).Microseconds()
	r.resp = s.newResponse(req, parent)
	return r, nil
}

func (s *Server) newResponse(req *protocol.CreateRequest, parent *conversation) *protocol.Response {
	resp := &protocol.Response{
		ID:                newID("resp"),
		Object:            "response",
		CreatedAt:         s.now().Unix(),
		Status:            protocol.ResponseInProgress,
		Model:             req.Model,
		Instructions:      req.Instructions,
		Output:            protocol.Items{},
		Tools:             req.Tools,
		Truncation:        "disabled",
		ParallelToolCalls: true,
		Text:              protocol.TextConfig{Format: protocol.TextFormat{Type: "text"}},
		TopP:              1,
		Temperature:       1,
		MaxOutputTokens:   req.MaxOutputTokens,
		MaxToolCalls:      req.MaxToolCalls,
		Store:             req.Storing(),
		ServiceTier:       "default",
		Metadata:          req.Metadata,
		SafetyIdentifier:  req.SafetyIdentifier,
		PromptCacheKey:    req.PromptCacheKey,
		User:              req.User,
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = ptr(req.PreviousResponseID)
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
	if req.ServiceTier != "" && req.ServiceTier != "auto" {
		resp.ServiceTier = req.ServiceTier
	}
	return resp
}

// ID is the response id.
func (r *Rollout) ID() string { return r.resp.ID }

// emit stamps the next sequence number and the lane on ev and sends it.
func (r *Rollout) emit(ev protocol.Event) {
	if r.emitErr != nil {
		return
	}
	h := protocol.Header(ev)
	h.SequenceNumber = r.seq
	h.StreamID = r.streamID
	r.seq++
	if err := r.sink(ev); err != nil {
		r.emitErr = err
		r.cancel()
	}
}

func (r *Rollout) emitResponse(t protocol.EventType) {
	r.emit(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: t}, Response: r.resp})
}

// Run streams the response to sink and returns the conversation it leaves
// for the next turn (nil unless it completed or ended incomplete). It always
// ends the response with exactly one terminal event, unless the sink failed.
func (r *Rollout) Run(ctx context.Context, sink Sink) (*conversation, error) {
	ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	r.sink = sink
	r.emitResponse(protocol.EventCreated)
	r.emitResponse(protocol.EventInProgress)

	var serr error
	var res sampler.Result
	if r.req.Generating() {
		t0 := r.srv.now()
		res, serr = r.model.Sample(ctx, &sampler.Request{
			Model:           r.req.Model,
			Instructions:    derefString(r.req.Instructions),
			Items:           r.items,
			Tools:           r.req.Tools,
			ToolChoice:      r.resp.ToolChoice,
			MaxOutputTokens: derefInt(r.req.MaxOutputTokens),
			Prompt:          r.prompt,
		}, r.onDelta)
		r.tm.SampleMicros = r.srv.now().Sub(t0).Microseconds()
		if r.open != nil { // the backend stopped mid-part: close it as incomplete
			r.endPart(protocol.StatusIncomplete)
		}
	}
	inputTokens := len(r.header) + r.prompt.Len()
	r.usage.Add(protocol.Usage{
		InputTokens:        inputTokens,
		InputTokensDetails: protocol.InputTokensDetails{CachedTokens: r.tm.CachedTokens},
		OutputTokens:       res.OutputTokens,
	})
	return r.finish(ctx, res, serr)
}

func (r *Rollout) finish(ctx context.Context, res sampler.Result, serr error) (*conversation, error) {
	if r.emitErr != nil {
		return nil, r.emitErr
	}
	now := r.srv.now()
	r.resp.Usage = &r.usage
	var conv *conversation
	switch {
	case serr != nil && ctx.Err() != nil:
		// The client went away or the server is shutting down: nobody to tell.
		return nil, ctx.Err()
	case serr != nil:
		perr := protocol.AsError(serr)
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = perr.ResponseError()
	case res.Incomplete:
		r.resp.Status = protocol.ResponseIncomplete
		r.resp.IncompleteDetails = &protocol.IncompleteDetails{Reason: "max_output_tokens"}
	default:
		r.resp.Status = protocol.ResponseCompleted
		r.resp.CompletedAt = ptr(now.Unix())
	}
	if r.resp.Status != protocol.ResponseFailed {
		conv = r.publish()
	}
	if r.resp.Store {
		t0 := r.srv.now()
		if err := r.srv.store.Put(ctx, &Record{Response: r.resp, Input: r.req.Input}); err != nil {
			r.srv.log.Warn("store write failed", "response", r.resp.ID, "err", err)
		}
		r.tm.StoreMicros = r.srv.now().Sub(t0).Microseconds()
	}
	if r.req.Includes(IncludeTimings) {
		r.tm.TotalMicros = r.srv.now().Sub(r.start).Microseconds()
		r.resp.Timings = &r.tm
	}
	switch r.resp.Status {
	case protocol.ResponseCompleted:
		r.emitResponse(protocol.EventCompleted)
	case protocol.ResponseIncomplete:
		r.emitResponse(protocol.EventIncomplete)
	default:
		r.emitResponse(protocol.EventFailed)
	}
	return conv, r.emitErr
}

// publish renders the output onto the prompt and returns the state the next
// turn continues from.
func (r *Rollout) publish() *conversation {
	p := r.prompt
	for _, it := range r.resp.Output {
		p = p.Append(r.srv.renderer.Item(it))
	}
	instr := derefString(r.req.Instructions)
	return &conversation{
		response: r.resp, lane: r.lane, items: r.items, prompt: p,
		instructions: instr, tools: r.req.Tools, header: r.header,
	}
}

// onDelta turns the sampler's deltas into output items and their events.
func (r *Rollout) onDelta(d sampler.Delta) {
	idx := len(r.resp.Output)
	switch d.Kind {
	case sampler.TextStart:
		msg := &protocol.Message{ID: newID("msg"), Status: protocol.StatusInProgress, Role: protocol.RoleAssistant, Content: protocol.Contents{}}
		r.open = msg
		r.openText.Reset()
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: msg})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartAdded},
			ItemID: msg.ID, OutputIndex: idx, Part: &protocol.OutputText{Annotations: []protocol.Annotation{}}})
	case sampler.TextDelta:
		if r.open == nil {
			return
		}
		r.openText.WriteString(d.Text)
		r.emit(&protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta},
			ItemID: r.open.ItemID(), OutputIndex: idx, Delta: d.Text, Logprobs: &[]protocol.LogProb{}})
	case sampler.CallStart:
		fc := &protocol.FunctionCall{ID: newID("fc"), CallID: d.CallID, Name: d.Name, Status: protocol.StatusInProgress}
		r.open = fc
		r.openText.Reset()
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: fc})
	case sampler.ArgsDelta:
		if r.open == nil {
			return
		}
		r.openText.WriteString(d.Text)
		r.emit(&protocol.FunctionArgsDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDelta},
			ItemID: r.open.ItemID(), OutputIndex: idx, Delta: d.Text})
	case sampler.PartEnd:
		if d.Incomplete {
			r.endPart(protocol.StatusIncomplete)
		} else {
			r.endPart(protocol.StatusCompleted)
		}
	}
}

// endPart closes the open output item with status and appends it to the output.
func (r *Rollout) endPart(status protocol.ItemStatus) {
	idx := len(r.resp.Output)
	text := r.openText.String()
	switch it := r.open.(type) {
	case *protocol.Message:
		part := &protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}
		r.emit(&protocol.TextDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDone},
			ItemID: it.ID, OutputIndex: idx, Text: &text, Logprobs: &[]protocol.LogProb{}})
		r.emit(&protocol.ContentPartEvent{EventHeader: protocol.EventHeader{Type: protocol.EventContentPartDone},
			ItemID: it.ID, OutputIndex: idx, Part: part})
		it.Content = protocol.Contents{part}
		it.Status = status
	case *protocol.FunctionCall:
		it.Arguments = text
		it.Status = status
		r.emit(&protocol.FunctionArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDone},
			ItemID: it.ID, OutputIndex: idx, Name: it.Name, Arguments: text})
	default:
		return
	}
	r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, OutputIndex: idx, Item: r.open})
	r.resp.Output = append(r.resp.Output, r.open)
	r.items = append(r.items, r.open)
	r.open = nil
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(i *int) int {
	if i == nil {
		return 0
	}
	return *i
}
