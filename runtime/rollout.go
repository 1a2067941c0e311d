package runtime

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/runtime/internal/stackroom"
	"github.com/tether-run/tether/sampler"
)

// rollout is one response's sampling loop. Server.prepare builds it; run
// runs it once, on one goroutine (the loop), which owns its state except:
//
//   - what the step's tool goroutines share with the loop while they run:
//     the response object (its Output slots and Status), the context's slots
//     for the step's calls, and the event order, all guarded by mu;
//   - stop and inbox, which any goroutine may use (a cancel from the read
//     loop, a steering message from response.append); their locks are
//     leaves.
//
// A rollout does not know which design it runs: client calls go to client,
// a Tool like any other (the cached-state design leaves them open, a
// suspended rollout's suspension parks them).
type rollout struct {
	// Set by prepare (client and lane before run); read-only afterwards.
	srv          *Server
	req          *protocol.CreateRequest
	model        Sampler
	lane         string
	tenant       string                // whose key created it: its stored record is that tenant's
	inFlightHeld bool                  // admission.Response counted it among its tenant's responses in progress
	base         int                   // items[:base] came from the parent
	chain        []string              // the stored responses the parent's context came from, oldest first
	win          window                // the latest context compaction, which the context reads from (contextcompact.go)
	header       []sampler.Token       // rendered instructions and tools
	hosted       map[string]Tool       // hosted tools offered by the request, by call name
	mcp          map[string]*mcpServer // the request's mcp tools, by server label
	client       clientCalls           // the client's calls: left open (openCalls), or answered in this response (a suspension)
	path         ServePath             // how it is served, for the metrics and the cost model
	routed       bool                  // the connection has resolved this model before: no route hop
	start        time.Time
	ctx          context.Context         // run's context, set when it starts
	cancel       context.CancelCauseFunc // cancels ctx, as the run closes

	// Owned by the loop.
	items        protocol.Items  // whole context, grows with each output item
	prompt       *sampler.Prompt // rendered items[:rendered]
	rendered     int
	tm           protocol.Timings
	usage        protocol.Usage
	steps        int             // sampling steps taken
	stepAt       int             // output index of the current step's first item; tool goroutines read it
	calls        []*stepCall     // the current step's tool calls
	tools        []protocol.Tool // what the model is offered: the request's tools, MCP servers as namespaces; nil until listed
	approvedFrom int             // items before it have been looked at for MCP approvals
	paused       *pauseState     // set on a restore (a fork): run starts inside the paused step
	leftOpen     bool            // a step left calls open: the response (a sub-agent: its loop) ended on them
	moved        bool            // restored under its own id, taken over from a checkpoint: its beginning went out where it began
	bg           *bgLog          // a background response's log: its response.created (queued) went out there at its create (announceQueued)
	// tree is a multi-agent response's agents (the root's and its
	// sub-agents'); agent names a sub-agent, nil for the root (see
	// agents.go).
	tree  *agents
	agent *protocol.AgentRef
	// rerun are the multi_agent_calls an open tree's agent left open in an
	// earlier response (a wait on agents that waited on their client),
	// which its loop runs again before it samples; flat is an open tree's
	// items before this response's output, all its agents' (agents_http.go).
	rerun []protocol.Call
	flat  protocol.Items
	// soloSample is a multi-agent response's agent's sampling time while
	// none of its sub-agents ran; owned by the loop.
	soloSample time.Duration
	// restart, taken over in the middle of a step from a model that may
	// not say the same twice, announces the step's run again as it begins
	// (resumeLocked); guarded by mu.
	restart     *protocol.StepRestartedEvent
	logprobs    bool               // the request asked for the text's logprobs (synthetic: sampler.SyntheticLogprob)
	topLogprobs int                // alternatives a token, 0–20
	openProbs   []protocol.LogProb // the open message's tokens' logprobs, when asked
	everyDelta  bool               // never merge deltas: Options.EveryDelta, or a durable rollout, whose step run again after a takeover lines up with the first run frame by frame
	open        protocol.Item      // the item streaming, placed in the output at openIdx (place)
	openIdx     int
	openText    strings.Builder
	together    []byte    // token text the model released with the next token's (sampler.Delta.More), sent with it in one event
	openCall    *stepCall // non-nil while a call's arguments stream
	modelReady  time.Time // when the next step's prompt was ready (time.Now, the model's clock); zero: when it samples
	firstAt     time.Time // when the current step's first delta came
	first       bool      // the current step has had its first delta

	// mu, resp and order's stream are the response's: its loops share
	// them (a multi-agent response's agents), and so its one lock.
	mu      *lockrank.Mutex[lockrank.Rollout]
	resp    *protocol.Response // shared with tool goroutines during dispatch: guarded by mu then
	order   eventOrder         // guarded by mu
	deltas  *deltaEvents       // guarded by mu; made by the first delta of a step, let go at a pause
	results []protocol.Item    // the current step's calls' results, guarded by mu
	settled []bool             // which of them are in, guarded by mu
	// own are the output indices of the loop's items, in order, guarded by
	// mu: the items this loop placed in the response's output (place),
	// whose output_item.done events go out in their order (eventOrder).
	own []int

	stop  stopper // ends run from any goroutine
	inbox inbox   // steering messages for the next step
	// A loop parked on its client is a value, not a goroutine: parked is
	// the step it parked in (owned by the loop; read by the goroutine that
	// drives it on), dormant that no goroutine runs it, driveOn what starts
	// one (the suspension's, set before run). See kick.
	parked  *parkedStep
	dormant atomic.Bool
	driveOn func()
	// steerClosed: the response is ending and takes no more response.steer;
	// required: the outputs its client owes when it ends on open calls (a
	// cached-state turn). Guarded by mu.
	steerClosed bool
	required    []protocol.RequiredInput
	// succeeds: steering ends the response at its next step's end and a
	// successor takes the input on (OpenAI's shape: a cached-state turn);
	// successor is that input once the response has ended holding it
	// (closeSteers). Set before run; successor is read once run returned.
	succeeds    bool
	successor   *successor
	out         outbox.Delivery // what its frames cost on the way out; atomic
	journalWait atomic.Int64    // nanoseconds its pauses waited for their journal writes (suspension_durable.go)
	// held is what it holds of the server's memory budget (memory.go);
	// contextHeld, the part its context's growth took, and stepOut, the
	// bytes of the step's output text not rendered yet, are the loop's.
	held        heldMemory
	contextHeld int64
	stepOut     int
	// echoHeld is what the response's kept echo, kept while parked
	// (keepEchoParkedLocked), took of held; guarded by mu.
	echoHeld int64
	// outBytes are the text and arguments its model streamed and its
	// compactions' content, compactions their count, and capped the
	// incomplete_details.reason of a bound on them (or on its output
	// items) it reached (Limits.MaxOutputBytes…): the loop's.
	outBytes    int64
	compactions int
	capped      string
	// toolCalls are the hosted calls it has run, which the request's
	// max_tool_calls bounds; the loop's.
	toolCalls int
	// cut is what the step reads of a context truncated to its model's
	// window (truncation auto), nil when it reads it all; set by fit
	// before each step, the loop's.
	cut *truncated
	// tier is the service tier that served its latest step, when its
	// model said (an upstream's); the loop's.
	tier string
}

// shareNew gives the rollout a response's lock and event stream of its
// own: it is the response's first loop.
func (r *rollout) shareNew() {
	r.mu, r.order.eventStream = new(lockrank.Mutex[lockrank.Rollout]), new(eventStream)
}

// askLogprobs sets the rollout up to give its text's logprobs when its
// request asks for them, or refuses a request its model cannot give them
// for. Every rollout of the request calls it: a create's, and one restored
// from a pause (fork, takeover, wake).
func (r *rollout) askLogprobs() *protocol.Error {
	req := r.req
	if !req.WantsLogprobs() {
		return nil
	}
	if lm, ok := r.model.(LogprobSampler); !ok || !lm.Logprobs() {
		param := "include"
		if !req.Includes(protocol.IncludeLogprobs) {
			param = "top_logprobs"
		}
		return protocol.Invalid(protocol.CodeUnsupportedParameter, param,
			"The model '%s' cannot give logprobs: it does not say how likely its tokens were.", req.Model)
	}
	// A token's logprobs ride on its own delta: no merging.
	r.logprobs, r.everyDelta = true, true
	if req.TopLogprobs != nil {
		r.topLogprobs = *req.TopLogprobs
	}
	return nil
}

// abort ends the rollout with cause, from any goroutine, whether or not run
// has started. A loop parked on its client is driven on, to its end.
func (r *rollout) abort(cause error) {
	r.stop.abort(cause)
	r.kick()
}

// steer adds messages to the context after the current step, from any goroutine.
func (r *rollout) steer(items ...protocol.Item) { r.inbox.add(items...) }

// ID is the response id.
func (r *rollout) ID() string { return r.resp.ID }

// outputBound is the incomplete_details.reason of the bound on its output
// items or bytes (Limits) the response has reached, with n output items,
// or "".
func (r *rollout) outputBound(n int) string {
	switch l := &r.srv.opts.Limits; {
	case n >= l.MaxOutputItems:
		return "max_output_items"
	case r.outBytes >= l.MaxOutputBytes:
		return "max_output_bytes"
	}
	return ""
}

// takeToolCall counts a hosted call the model has made, or, when the
// response has run the max_tool_calls its request allows, caps it
// (reason max_tool_calls) and reports false: the call is not to run.
func (r *rollout) takeToolCall() bool {
	if limit := r.req.MaxToolCalls; limit != nil && r.toolCalls >= *limit {
		r.capped = "max_tool_calls"
		return false
	}
	r.toolCalls++
	return true
}

// storeTimeout bounds a store write, so that a hung store cannot hold a
// connection's teardown or the server's shutdown.
const storeTimeout = 10 * time.Second

// maxSteps bounds the sampling steps of one response, against a backend that
// would call hosted tools forever.
const maxSteps = 1024

// run streams the response to sink and returns the conversation it leaves
// for the next turn (nil unless it completed or ended incomplete). It ends
// the response with exactly one terminal event, unless the sink failed or
// ctx ended for a reason the client cannot be told (disconnect, shutdown).
//
// The loop samples a step, dispatches the step's tool calls (the hosted
// ones through one errgroup, the client's to its clientCalls), adds their
// results and what was steered in to the context and samples again, until
// a step makes no call or a call stays open for the next turn.
//
// A suspended rollout's loop may also park on its client's calls: run then
// returns errParked, its goroutine ends, and the rollout, open still, is a
// value until resume drives the loop on from the pause.
func (r *rollout) run(ctx context.Context, sink sink) (*conversation, error) {
	r.startRun(ctx, sink)
	return r.drive(r.begin)
}

// resume drives the loop of a rollout parked on its client's calls (run
// returned errParked) on from the pause: once every call has its output,
// or the rollout is ending. Called too soon, it returns errParked again.
func (r *rollout) resume() (*conversation, error) {
	return r.drive(r.resumeStep)
}

// startRun starts the rollout's run: its context, its sink, what runs
// before inference. endRun undoes it as the run ends.
func (r *rollout) startRun(ctx context.Context, sink sink) {
	r.srv.began(r)
	if rec := r.srv.opts.Recorder; rec != nil && r.paused == nil && r.agent == nil && r.bg == nil {
		rec.Created(r.start, r.resp.ID, r.path, r.req)
	}
	r.ctx, r.cancel = r.stop.start(ctx)
	r.mu.Lock()         // a steer (steerIn) may emit from the read loop once the rollout runs
	if r.agent == nil { // a sub-agent's stream is its response's, running already
		r.order.sink, r.order.streamID = sink, r.lane
	}
	// Its events carry the response object again and again (a suspended
	// rollout's at every pause and resume): what echoes the request is
	// encoded once while it runs. Should that fail, each event encodes it
	// whole.
	_ = r.resp.KeepEcho()
	r.mu.Unlock()
	r.out.Flush = r.flushDelta
	r.srv.hooks.PreInference(r.ctx, r.path, r.routed, &r.tm)
}

// endRun ends the run startRun began, once the response has ended.
func (r *rollout) endRun() {
	if r.agent == nil { // a sub-agent's MCP servers are its root's
		r.closeMCP()
	}
	r.cancel(nil)
	r.held.letGo(r.srv.mem)
	r.srv.ended(r)
}

// begin is the loop's first move: the response's beginning, or, restored
// from a pause (a fork, a takeover), the rest of the paused step. end
// reports that the response ends without sampling.
func (r *rollout) begin(ctx context.Context) (end bool, err error) {
	switch {
	case r.agent != nil: // a sub-agent: its response has begun
		r.modelReady = time.Now()
		if len(r.rerun) > 0 {
			return r.rerunCalls(ctx)
		}
		return false, nil
	case r.paused != nil:
		// A fork's beginning shows the forked step's items alone, as a
		// pause does: the client has the earlier ones from the original.
		if !r.moved {
			r.emitStepView(protocol.EventCreated)
			r.emitStepView(protocol.EventInProgress)
		}
		return r.resumePaused(ctx)
	case !r.req.Generating():
		r.emitResponse(protocol.EventCreated)
		r.emitResponse(protocol.EventInProgress)
		r.addUsage(sampler.Result{})
		return true, nil
	}
	// created and in_progress go out while it starts; a tree taken over
	// from its journal goes on, its response begun where it was. A
	// background response's created went out as it was queued; one
	// cancelled there ends as it would have begun.
	r.modelReady = time.Now()
	switch {
	case r.bg != nil && ctx.Err() != nil:
		return true, context.Cause(ctx)
	case r.bg != nil:
		r.mu.Lock()
		r.resp.Status = protocol.ResponseInProgress
		r.mu.Unlock()
		r.emitResponse(protocol.EventInProgress)
	case !r.moved:
		r.emitResponse(protocol.EventCreated)
		r.emitResponse(protocol.EventInProgress)
	}
	if r.tree != nil && len(r.tree.pending) > 0 {
		// A continued tree's sub-agents go on with it, offered the tools
		// it offers (its MCP servers' listed first, as a spawn finds them).
		if err := r.beforeStep(ctx); err != nil {
			return false, err
		}
		r.tree.startPending()
	}
	if len(r.rerun) > 0 {
		return r.rerunCalls(ctx)
	}
	return false, nil
}

// drive runs the loop from first, its first move, until the response ends
// (then it ends the run), or the loop parks on its client's calls
// (errParked: the run stays open, its state in the rollout).
func (r *rollout) drive(first func(context.Context) (end bool, err error)) (conv *conversation, err error) {
	stackroom.Make() // its goroutine is new, and a step goes deep
	defer func() {
		if !errors.Is(err, errParked) { // a panic's too
			r.endRun()
		}
	}()
	ctx := r.ctx
	end, err := first(ctx)
	switch {
	case errors.Is(err, errParked):
		return nil, err
	case err != nil || end:
		return r.finish(ctx, sampler.Result{}, err)
	}
	for {
		if r.capped != "" {
			// The step before ended the response: it made a hosted call
			// past max_tool_calls (which it did not run), or steering
			// came for a successor. Nothing follows it, a compaction due
			// included.
			return r.finish(ctx, sampler.Result{}, nil)
		}
		if perr := r.holdContext(); perr != nil {
			return r.finish(ctx, sampler.Result{}, perr)
		}
		if err := r.compactIfDue(ctx); err != nil {
			return r.finish(ctx, sampler.Result{}, err)
		}
		r.mu.Lock()
		r.stepAt = len(r.resp.Output)
		r.mu.Unlock()
		if r.capped == "" {
			r.capped = r.outputBound(r.stepAt)
		}
		if r.capped != "" {
			return r.finish(ctx, sampler.Result{Incomplete: true}, nil)
		}
		if err := r.beforeStep(ctx); err != nil {
			return r.finish(ctx, sampler.Result{}, err)
		}
		res, err := r.sampleStep(ctx)
		if err == nil {
			// The step's output is the response's now: one that would
			// pass the budget fails it.
			if perr := r.holdContext(); perr != nil {
				return r.finish(ctx, res, perr)
			}
		}
		if err == nil && !res.Incomplete && len(r.calls) == 0 && r.steps < maxSteps && r.capped == "" {
			// A final answer, but steering came meanwhile (response.steer):
			// it joins the context and the model goes on; or the response
			// ends steered, and its successor takes the steering on.
			if r.succeeds && r.inbox.steerCount() > 0 {
				r.capped = protocol.ReasonSteered
				return r.finish(ctx, sampler.Result{Incomplete: true}, nil)
			}
			if steered := r.inbox.drain(); len(steered) > 0 {
				r.appendContext(steered)
				continue
			}
		}
		if err != nil || res.Incomplete || len(r.calls) == 0 {
			return r.finish(ctx, res, err)
		}
		if r.steps >= maxSteps {
			return r.finish(ctx, sampler.Result{Incomplete: true}, nil)
		}
		open, err := r.dispatch(ctx)
		if errors.Is(err, errParked) {
			return nil, err
		}
		if err != nil || open {
			return r.finish(ctx, sampler.Result{}, err)
		}
	}
}

// appendContext adds items that are not output (tool outputs, steering
// messages) to the context.
func (r *rollout) appendContext(items protocol.Items) {
	r.items = append(r.items, items...)
	r.renderPending()
}

// renderPending renders the items not yet in the prompt, in context order:
// a step's output once its hosted results are in, then what follows it.
// Only new items are ever tokenized. A prompt that let its ids go at a
// pause, and will again at the next (sheds), keeps none of the new items'
// either (Renderer.AppendBare).
func (r *rollout) renderPending() {
	t0 := r.srv.now()
	bare := r.prompt.Shed() && r.sheds() // its ids would go at the next pause: none is kept
	for _, it := range r.items[r.rendered:] {
		n := r.prompt.Len()
		if bare {
			r.prompt = r.srv.renderer.AppendBare(r.prompt, it)
		} else {
			r.prompt = r.prompt.Append(r.srv.renderer.Item(it))
		}
		r.tm.RenderedTokens += r.prompt.Len() - n
	}
	r.rendered = len(r.items)
	r.tm.RenderMicros += r.srv.now().Sub(t0).Microseconds()
}

// sleep ends the loop's goroutine at a pause whose outputs are not in:
// the rollout is dormant, a value, until kick drives it on. It reports
// false, and the caller drives the loop on itself, when what it waits for
// came meanwhile (ready, or the run ended): the kick that came with it
// found the rollout not yet dormant.
func (r *rollout) sleep(ready func() bool) bool {
	r.dormant.Store(true)
	if (ready() || r.ctx.Err() != nil) && r.dormant.CompareAndSwap(true, false) {
		return false
	}
	return true
}

// kick drives a dormant rollout's loop on, on a goroutine of its own
// (driveOn), from any goroutine and under any lock: its pause has all its
// outputs, or it is ending. Of a kick and the loop's own sleep, whichever
// comes second finds the other, and the loop runs on one goroutine at a
// time.
func (r *rollout) kick() {
	if r.dormant.CompareAndSwap(true, false) {
		r.driveOn()
	}
}
