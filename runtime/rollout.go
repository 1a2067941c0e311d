package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

	input    protocol.Items  // the request's new input, compactions expanded
	items    protocol.Items  // whole context, grows with each output item
	base     int             // items[:base] came from the parent
	prompt   *sampler.Prompt // rendered items[:rendered]
	rendered int
	header   []sampler.Token // rendered instructions and tools
	resp     *protocol.Response
	sink     Sink
	seq      int
	start    time.Time
	tm       protocol.Timings
	usage    protocol.Usage

	hosted map[string]Tool // hosted tools offered by the request, by call name
	client *bridge         // every other call: the client's functions
	steps  int             // sampling steps taken

	// mu guards what tool goroutines share with the loop during dispatch:
	// the sink, seq, emitErr, resp (Output slots, Status) and items slots.
	mu      sync.Mutex
	emitErr error
	cancel  context.CancelCauseFunc // set when Run starts
	aborted error                   // an abort that came before Run started

	// Hosted calls finish in any order, but output_item.done events go out
	// in output_index order: an item's waits in held until every lower
	// index's has gone out, and a pause waits for the held events.
	doneNext  int                               // lowest output index whose output_item.done has not gone out; guarded by mu
	held      map[int]*protocol.OutputItemEvent // guarded by mu
	heldPause []protocol.PendingCall            // a response.done waiting for held events; guarded by mu

	// The output part being streamed; owned by the sampling loop.
	open     protocol.Item
	openText strings.Builder
	openCall *stepCall // non-nil while a call's arguments stream
	calls    []*stepCall
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
	model, perr := s.model(req.Model)
	if perr != nil {
		return nil, perr
	}
	r.model = model
	r.hosted = make(map[string]Tool)
	for i, t := range req.Tools {
		if t.Type == protocol.ToolFunction {
			continue
		}
		h, ok := s.hosted[t.Type]
		if !ok {
			return nil, protocol.Invalid(protocol.CodeUnsupportedParameter, indexParam("tools", i)+".type",
				"This server does not run the hosted tool '%s' (start it with a search backend to enable web_search).", t.Type)
		}
		r.hosted[string(t.Type)] = h
	}
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
		r.base = len(parent.items)
		r.items = append(slices.Clip(parent.items), input...)
		r.prompt = parent.prompt
		r.tm.CachedTokens += parent.prompt.Len()
	} else {
		r.items = slices.Clip(input)
	}
	r.rendered = len(r.items) - len(input)
	r.renderPending()
	r.tm.RenderMicros = s.now().Sub(t1).Microseconds()
	r.resp = s.newResponse(req, parent)
	r.client = &bridge{r: r}
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

// abort ends the rollout with cause, from any goroutine, whether or not Run
// has started.
func (r *Rollout) abort(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel(cause)
	} else if r.aborted == nil {
		r.aborted = cause
	}
}

// ID is the response id.
func (r *Rollout) ID() string { return r.resp.ID }

// storeTimeout bounds a store write, so that a hung store cannot hold a
// connection's teardown or the server's shutdown.
const storeTimeout = 10 * time.Second

// maxSteps bounds the sampling steps of one response, against a backend that
// would call hosted tools forever.
const maxSteps = 1024

// Causes of a rollout's end other than its own completion.
var (
	errCancelled   = errors.New("runtime: response cancelled by the client")
	errToolTimeout = errors.New("runtime: client tool outputs did not arrive in time")
)

// Run streams the response to sink and returns the conversation it leaves
// for the next turn (nil unless it completed or ended incomplete). It ends
// the response with exactly one terminal event, unless the sink failed or
// ctx ended for a reason the client cannot be told (disconnect, shutdown).
//
// The loop samples a step, dispatches the step's tool calls through one
// errgroup (hosted tools and the client bridge alike), appends their results
// and samples again, until a step makes no call or a client call stays open
// for the next turn.
func (r *Rollout) Run(ctx context.Context, sink Sink) (*conversation, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	r.cancel = cancel
	if r.aborted != nil {
		cancel(r.aborted)
	}
	r.mu.Unlock()
	r.sink = sink
	r.emitResponse(protocol.EventCreated)
	r.emitResponse(protocol.EventInProgress)
	if !r.req.Generating() {
		r.addUsage(sampler.Result{})
		return r.finish(ctx, sampler.Result{}, nil)
	}
	for {
		res, err := r.sampleStep(ctx)
		if err != nil || res.Incomplete || len(r.calls) == 0 {
			return r.finish(ctx, res, err)
		}
		if r.steps >= maxSteps {
			return r.finish(ctx, sampler.Result{Incomplete: true}, nil)
		}
		open, err := r.dispatch(ctx)
		if err != nil || open {
			return r.finish(ctx, sampler.Result{}, err)
		}
	}
}

// sampleStep samples one model step, streaming its items.
func (r *Rollout) sampleStep(ctx context.Context) (sampler.Result, error) {
	r.calls = r.calls[:0]
	r.steps++
	t0 := r.srv.now()
	res, err := r.model.Sample(ctx, &sampler.Request{
		Model:           r.req.Model,
		Instructions:    derefString(r.req.Instructions),
		Items:           r.items,
		Tools:           r.req.Tools,
		ToolChoice:      r.resp.ToolChoice,
		MaxOutputTokens: derefInt(r.req.MaxOutputTokens) - r.usage.OutputTokens,
		Prompt:          r.prompt,
	}, r.onDelta)
	r.tm.SampleMicros += r.srv.now().Sub(t0).Microseconds()
	if r.open != nil { // the backend stopped mid-part: close it as incomplete
		r.endPart(protocol.StatusIncomplete)
	}
	r.addUsage(res)
	return res, err
}

// addUsage counts one sampling step. Input is the whole prompt (a step reads
// all of it); cached input is what the backend's prefix cache already held,
// which is the same whatever transport or design delivered the request.
// A backend that does not report prompt tokens is charged the rendered
// prompt, with nothing cached.
func (r *Rollout) addUsage(res sampler.Result) {
	in := res.PromptTokens
	if in == 0 {
		in = len(r.header) + r.prompt.Len()
	}
	r.usage.Add(protocol.Usage{
		InputTokens:        in,
		InputTokensDetails: protocol.InputTokensDetails{CachedTokens: res.CachedPromptTokens},
		OutputTokens:       res.OutputTokens,
	})
}

// appendContext adds items that are not output (tool outputs, steering
// messages) to the context.
func (r *Rollout) appendContext(items protocol.Items) {
	r.items = append(r.items, items...)
	r.renderPending()
}

// renderPending renders the items not yet in the prompt, in context order:
// a step's output once its hosted results are in, then what follows it.
// Only new items are ever tokenized.
func (r *Rollout) renderPending() {
	t0 := r.srv.now()
	for _, it := range r.items[r.rendered:] {
		toks := r.srv.renderer.Item(it)
		r.prompt = r.prompt.Append(toks)
		r.tm.RenderedTokens += len(toks)
	}
	r.rendered = len(r.items)
	r.tm.RenderMicros += r.srv.now().Sub(t0).Microseconds()
}

func (r *Rollout) finish(ctx context.Context, res sampler.Result, serr error) (*conversation, error) {
	r.mu.Lock()
	emitErr := r.emitErr
	r.mu.Unlock()
	if emitErr != nil {
		return nil, emitErr
	}
	cause := context.Cause(ctx)
	now := r.srv.now()
	r.resp.Usage = &r.usage
	r.resp.RequiredAction = nil
	terminal := protocol.EventCompleted
	switch {
	case cause == errCancelled:
		r.resp.Status = protocol.ResponseCancelled
		terminal = protocol.EventCancelled
	case serr != nil && ctx.Err() != nil:
		// The client went away or the server is shutting down: nobody to tell.
		return nil, ctx.Err()
	case serr == errToolTimeout:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = &protocol.ResponseError{Code: protocol.CodeClientToolTimeout,
			Message: fmt.Sprintf("No output arrived for the pending tool calls within %s.", r.srv.opts.SuspendTimeout)}
		terminal = protocol.EventFailed
	case serr != nil:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = protocol.AsError(serr).ResponseError()
		terminal = protocol.EventFailed
	case res.Incomplete:
		r.resp.Status = protocol.ResponseIncomplete
		reason := "max_output_tokens"
		if r.steps >= maxSteps {
			reason = "max_steps"
		}
		r.resp.IncompleteDetails = &protocol.IncompleteDetails{Reason: reason}
		terminal = protocol.EventIncomplete
	default:
		r.resp.Status = protocol.ResponseCompleted
		r.resp.CompletedAt = ptr(now.Unix())
	}
	var conv *conversation
	if r.resp.Status == protocol.ResponseCompleted || r.resp.Status == protocol.ResponseIncomplete {
		conv = r.publish()
	}
	if r.resp.Store {
		t0 := r.srv.now()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		err := r.srv.store.Put(sctx, &Record{Response: r.resp, Input: r.req.Input, Items: slices.Clip(r.items[r.base:])})
		cancel()
		if err != nil {
			r.srv.log.Warn("store write failed", "response", r.resp.ID, "err", err)
		}
		r.tm.StoreMicros = r.srv.now().Sub(t0).Microseconds()
	}
	if r.req.Includes(IncludeTimings) {
		r.tm.TotalMicros = r.srv.now().Sub(r.start).Microseconds()
		r.resp.Timings = &r.tm
	}
	r.mu.Lock()
	r.flushDoneLocked()
	r.mu.Unlock()
	r.emitResponse(terminal)
	r.mu.Lock()
	defer r.mu.Unlock()
	return conv, r.emitErr
}

// publish renders the output onto the prompt and returns the state the next
// turn continues from.
func (r *Rollout) publish() *conversation {
	r.renderPending()
	return &conversation{
		response: r.resp, lane: r.lane, items: r.items, prompt: r.prompt,
		instructions: derefString(r.req.Instructions), tools: r.req.Tools, header: r.header,
	}
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
