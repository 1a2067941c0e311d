package runtime

import (
	"context"
	"net/http"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tether-run/tether/hostedtools"
	"github.com/tether-run/tether/protocol"
)

// Tool is every tool the rollout calls: a hosted tool (web_search) or the
// client bridge. Its contract is hostedtools.Tool's.
type Tool = hostedtools.Tool

// stepCall is one tool call sampled in the current step.
type stepCall struct {
	call  protocol.FunctionCall
	tool  Tool
	index int // output index of the call's item
	pos   int // position of the call's item in the rollout's items
}

// toolFor routes a sampled call: a hosted tool the request offered, else the
// client.
func (r *Rollout) toolFor(name string) Tool {
	if t, ok := r.hosted[name]; ok {
		return t
	}
	return r.client
}

// startItem is the in-progress output item of a call: a function_call for
// the client, the hosted tool's own item type otherwise.
func startItem(c *stepCall) protocol.Item {
	switch c.tool.Definition().Type {
	case protocol.ToolWebSearch:
		c.call.ID = newID("ws")
		return &protocol.WebSearchCall{ID: c.call.ID, Status: protocol.StatusInProgress}
	default:
		c.call.ID = newID("fc")
		return &protocol.FunctionCall{ID: c.call.ID, CallID: c.call.CallID, Name: c.call.Name, Status: protocol.StatusInProgress}
	}
}

func markStatus(it protocol.Item, status protocol.ItemStatus) {
	switch it := it.(type) {
	case *protocol.WebSearchCall:
		it.Status = status
	case *protocol.FunctionCall:
		it.Status = status
	case *protocol.Message:
		it.Status = status
	}
}

// dispatch runs the step's calls concurrently through their tools and adds
// their results to the context. open reports that a call stays open for the
// next turn (the cached-state design), which ends this response.
func (r *Rollout) dispatch(ctx context.Context) (open bool, err error) {
	calls := r.calls
	clientCalls := 0
	for _, c := range calls {
		if c.tool == Tool(r.client) {
			clientCalls++
		}
	}
	r.client.beginStep(ctx, clientCalls)
	defer r.client.endStep()

	results := make([]protocol.Item, len(calls))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range calls {
		g.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					r.srv.log.Error("tool panicked", "tool", c.call.Name, "panic", p)
					err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "The tool '%s' failed.", c.call.Name)
				}
			}()
			item, err := c.tool.Call(gctx, c.call, func(ev protocol.Event) { r.emitFor(c, ev) })
			if err != nil && gctx.Err() == nil && c.tool != Tool(r.client) {
				// A hosted tool that fails (a search backend down) does not
				// end the rollout: its item says so and the model reads that.
				r.srv.log.Warn("hosted tool failed", "tool", c.call.Name, "err", err)
				r.mu.Lock()
				markStatus(r.resp.Output[c.index], protocol.StatusFailed)
				r.mu.Unlock()
				item, err = r.resp.Output[c.index], nil
			}
			if err != nil {
				return err
			}
			results[i] = item
			if item != nil && item.ItemID() == c.call.ID {
				r.mu.Lock()
				r.resp.Output[c.index] = item
				r.items[c.pos] = item
				r.itemDoneLocked(c.index, item)
				r.mu.Unlock()
			}
			return nil
		})
	}
	err = g.Wait()
	r.mu.Lock()
	r.flushDoneLocked()
	r.mu.Unlock()
	if err != nil {
		return false, err
	}
	r.renderPending() // the step's output, complete now
	for _, res := range results {
		if res == nil {
			return true, nil
		}
	}
	r.appendContext(r.client.takeArrived())
	if r.client.wasParked() {
		r.mu.Lock()
		r.resp.Status = protocol.ResponseInProgress
		r.resp.RequiredAction = nil
		r.emitLocked(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventInProgress}, Response: r.resp})
		r.mu.Unlock()
	}
	return false, nil
}

// emitFor stamps a tool's progress event with its call's item and sends it.
func (r *Rollout) emitFor(c *stepCall, ev protocol.Event) {
	if ws, ok := ev.(*protocol.WebSearchCallEvent); ok {
		ws.OutputIndex, ws.ItemID = c.index, c.call.ID
	}
	r.emit(ev)
}

// bridge is the Tool behind every client function: the one part of the loop
// that knows the design. In the cached-state design its calls stay open (the
// response ends and the next turn brings the outputs). In the suspended
// design it parks the calls until response.append delivers their outputs,
// announcing the pause with response.done once the whole step is waiting.
type bridge struct {
	r       *Rollout
	suspend bool // set before Run; the suspended design

	mu       sync.Mutex
	expect   int                                          // client calls in this step
	waiting  map[string]chan *protocol.FunctionCallOutput // call_id -> 1-buffered; guarded by mu
	order    []protocol.FunctionCall                      // this step's client calls, in arrival order
	answered map[string]bool                              // call_ids already given an output this rollout
	arrived  protocol.Items                               // outputs and steering messages, in arrival order
	parked   bool                                         // response.done sent this step
	stepCtx  context.Context                              // cancelled with errToolTimeout after SuspendTimeout
	stop     context.CancelFunc
}

// Definition describes the client's functions collectively.
func (b *bridge) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolFunction} }

func (b *bridge) beginStep(ctx context.Context, calls int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expect, b.parked, b.order, b.arrived = calls, false, nil, nil
	b.waiting = make(map[string]chan *protocol.FunctionCallOutput, calls)
	// Call ids need only be unique within a step: some backends number
	// them per completion (call_0 in every step).
	b.answered = make(map[string]bool, calls)
	if b.suspend && calls > 0 {
		b.stepCtx, b.stop = context.WithTimeoutCause(ctx, b.r.srv.opts.SuspendTimeout, errToolTimeout)
	}
}

func (b *bridge) endStep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	b.waiting = nil
}

// Call parks a client call until its output arrives (suspended), or leaves
// it open for the next turn.
func (b *bridge) Call(ctx context.Context, call protocol.FunctionCall, _ func(protocol.Event)) (protocol.Item, error) {
	if !b.suspend {
		return nil, nil
	}
	ch := make(chan *protocol.FunctionCallOutput, 1)
	b.mu.Lock()
	b.waiting[call.CallID] = ch
	b.order = append(b.order, call)
	last := len(b.order) == b.expect
	stepCtx := b.stepCtx
	b.mu.Unlock()
	if last {
		b.park()
	}
	// The one place a suspended rollout parks.
	select {
	case out := <-ch:
		return out, nil
	case <-stepCtx.Done():
		return nil, context.Cause(stepCtx)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// park announces the pause: response.done with every call the step waits on,
// in output order (they register in any order).
func (b *bridge) park() {
	r := b.r
	var calls []protocol.PendingCall
	for _, c := range r.calls { // read-only while the step's tools run
		if c.tool == Tool(b) {
			calls = append(calls, protocol.PendingCall{CallID: c.call.CallID, Name: c.call.Name, Arguments: c.call.Arguments})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) > 0 {
		// A call's output_item.done waits behind a running hosted call's:
		// the pause follows it.
		r.heldPause = calls
		return
	}
	r.pauseLocked(calls)
}

// pauseLocked emits response.done; from then on the step takes outputs.
func (r *Rollout) pauseLocked(calls []protocol.PendingCall) {
	r.client.mu.Lock()
	r.client.parked = true
	r.client.mu.Unlock()
	r.resp.Status = protocol.ResponseRequiresAction
	r.resp.RequiredAction = &protocol.RequiredAction{Type: "submit_tool_outputs",
		SubmitToolOutputs: protocol.SubmitToolOutputs{ToolCalls: calls}}
	r.emitLocked(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone}, Response: r.resp})
}

// Parked reports whether the rollout is waiting on client outputs.
func (b *bridge) Parked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.parked && b.waiting != nil
}

func (b *bridge) wasParked() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.parked
}

// takeArrived ends the step's intake: it returns what arrived, and later
// appends are refused (response_not_suspended) rather than lost.
func (b *bridge) takeArrived() protocol.Items {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.arrived
	b.arrived, b.waiting = nil, nil
	return out
}

// deliver hands appended items to the parked calls: function_call_outputs
// for pending calls, user messages as steering. It checks every item before
// delivering any, so a refused append changes nothing.
func (b *bridge) deliver(items protocol.Items) *protocol.Error {
	if perr := protocol.ValidateItems(items, "input"); perr != nil {
		return perr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.parked || b.waiting == nil {
		return protocol.Invalid(protocol.CodeNothingSuspended, "response_id",
			"Response '%s' is not waiting for tool outputs: append only after response.done.", b.r.resp.ID)
	}
	seen := map[string]bool{}
	for i, it := range items {
		param := indexParam("input", i)
		switch it := it.(type) {
		case *protocol.FunctionCallOutput:
			if b.answered[it.CallID] || seen[it.CallID] {
				return protocol.Invalid(protocol.CodeDuplicateToolOutput, param+".call_id",
					"The tool call '%s' already has an output.", it.CallID)
			}
			if _, ok := b.waiting[it.CallID]; !ok {
				return protocol.Invalid(protocol.CodeToolCallNotFound, param+".call_id",
					"No pending tool call with call_id '%s' in response '%s'.", it.CallID, b.r.resp.ID)
			}
			seen[it.CallID] = true
		case *protocol.Message:
			if it.Role != protocol.RoleUser {
				return protocol.Invalid(protocol.CodeInvalidValue, param+".role",
					"Only user messages may steer a suspended response, not '%s' messages.", it.Role)
			}
		default:
			return protocol.Invalid(protocol.CodeInvalidValue, param+".type",
				"response.append takes function_call_output items and user messages, not '%s'.", it.ItemType())
		}
	}
	for _, it := range items {
		if out, ok := it.(*protocol.FunctionCallOutput); ok {
			if out.ID == "" {
				out.ID = newID("fco")
			}
			b.answered[out.CallID] = true
			b.waiting[out.CallID] <- out
		}
		b.arrived = append(b.arrived, it)
	}
	return nil
}
