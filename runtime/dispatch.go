package runtime

import (
	"context"
	"errors"
	"net/http"
	goruntime "runtime"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"

	"golang.org/x/sync/errgroup"

	"github.com/tether-run/tether/protocol"
)

// stepCall is one tool call sampled in the current step.
type stepCall struct {
	call  protocol.Call
	kind  callKind
	tool  Tool // the hosted tool that runs it; nil for the client's calls, which the rollout's clientCalls answer
	index int  // output index of the call's item
	pos   int  // position of the call's item in the rollout's items

	toolFinishes bool   // the call's item is the tool's own (web_search_call): done when the tool returns
	approval     string // an MCP call the client approved: the id of the approval request
}

// callKind is who answers a call, which decides its output item.
type callKind uint8

const (
	clientCall   callKind = iota // the client's: a function_call (or its typed kin) the client answers
	hostedCall                   // a hosted tool's: its own item (web_search_call) or the function_call it answers
	mcpCall                      // an MCP server's tool: an mcp_call
	approvedCall                 // an MCP server's tool, which the client approved: an mcp_call naming the approval
)

// route routes a sampled call: to a hosted tool the request offered, an
// MCP server's tool (which may make c an approval request for the client),
// else to the client (protocol.RunnerOf says which types are which; the
// members of the request's namespaces are always the client's).
func (r *rollout) route(c *protocol.Call) *stepCall {
	if c.Type == protocol.ItemMultiAgentCall {
		return &stepCall{kind: hostedCall, tool: agentTool{tree: r.tree, caller: r}}
	}
	if t, ok := r.hosted[c.Name]; ok && c.Namespace == "" && c.Type == protocol.ItemFunctionCall {
		return &stepCall{kind: hostedCall, tool: t}
	}
	if sc := r.routeMCP(c); sc != nil {
		return sc
	}
	return &stepCall{kind: clientCall}
}

// startItem is the in-progress output item of a call: a function_call or a
// custom_tool_call for the client, the hosted tool's own item type otherwise,
// at output index (its id drawn from it: ids.Output).
func (r *rollout) startItem(c *stepCall, index int) protocol.Item {
	id := func(prefix string) string { return ids.Output(r.resp.ID, prefix, index) }
	switch {
	case c.kind == mcpCall:
		c.call.ID = id("mcp")
		return &protocol.MCPCall{ID: c.call.ID, ServerLabel: c.call.Namespace, Name: c.call.Name, Status: protocol.StatusInProgress}
	case c.kind == approvedCall:
		c.call.ID = id("mcp")
		return &protocol.MCPCall{ID: c.call.ID, ServerLabel: c.call.Namespace, Name: c.call.Name, Arguments: c.call.Input,
			ApprovalRequestID: &c.approval, Status: protocol.StatusInProgress}
	case c.kind == hostedCall && c.tool.Definition().Type == protocol.ToolWebSearch:
		c.call.ID = id("ws")
		return &protocol.WebSearchCall{ID: c.call.ID, Status: protocol.StatusInProgress}
	case c.call.Type == protocol.ItemMCPApprovalRequest:
		// The request's id is the call_id its approval names.
		c.call.ID = id("mcpr")
		c.call.CallID = c.call.ID
		return protocol.ItemOf(c.call, "")
	}
	c.call.ID = id(idPrefixes[c.call.Type])
	return protocol.ItemOf(c.call, protocol.StatusInProgress)
}

// idPrefixes are the id prefixes of the client's call items, as OpenAI's.
var idPrefixes = map[protocol.ItemType]string{
	protocol.ItemFunctionCall:   "fc",
	protocol.ItemCustomToolCall: "ctc",
	protocol.ItemShellCall:      "sh",
	protocol.ItemLocalShellCall: "lsh",
	protocol.ItemApplyPatchCall: "apc",
	protocol.ItemComputerCall:   "cu",
	protocol.ItemToolSearchCall: "tsc",
	protocol.ItemMultiAgentCall: "mac",
}

func markStatus(it protocol.Item, status protocol.ItemStatus) {
	switch it := it.(type) {
	case *protocol.WebSearchCall:
		it.Status = status
	case *protocol.FunctionCall:
		it.Status = status
	case *protocol.CustomToolCall:
		it.Status = status
	case *protocol.MCPCall:
		it.Status = status
	case *protocol.Message:
		it.Status = status
	}
}

// dispatch runs the step's hosted calls concurrently through their tools,
// while the rollout's clientCalls answer the client's, and adds their
// results to the context, in output order, then the messages steered in
// meanwhile. open reports that a call stays open for the next turn, which
// ends this response.
func (r *rollout) dispatch(ctx context.Context) (open bool, err error) {
	calls := r.calls
	t0 := r.srv.now()
	results := make([]protocol.Item, len(calls))
	r.mu.Lock()
	r.results, r.settled = results, make([]bool, len(calls))
	r.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	var client []int // the client's calls, answered below
	for i, c := range calls {
		if c.kind == clientCall {
			client = append(client, i)
			continue
		}
		g.Go(func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					r.srv.log.Error("tool panicked", "tool", c.call.Name, "panic", p)
					err = protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "The tool '%s' failed.", c.call.Name)
				}
			}()
			item, err := c.tool.Call(gctx, c.call, func(ev protocol.Event) { r.emitFor(c, ev) })
			if err != nil && gctx.Err() != nil {
				return err // the rollout is ending
			}
			r.recordResult(i, r.finishCall(c, item, err))
			return nil
		})
	}
	var clientErr error
	if len(client) > 0 {
		clientErr = r.answerClient(ctx, client)
	}
	if err = g.Wait(); err == nil {
		err = clientErr
	}
	return r.endOrPark(t0, client, err)
}

// endOrPark ends the step begun at t0 (endStep), whose calls have their
// results (err: the rollout is ending), or parks the loop on the client's
// calls, those at client, when their outputs are not in (errParked).
func (r *rollout) endOrPark(t0 time.Time, client []int, err error) (open bool, _ error) {
	if errors.Is(err, errParked) {
		r.parked = &parkedStep{t0: t0, client: client}
		return false, err
	}
	return r.endStep(t0, err)
}

// parkedStep is a step whose loop parked on its client's calls (errParked)
// once its hosted calls had returned: when it began, and which of its
// calls are the client's.
type parkedStep struct {
	t0     time.Time
	client []int
}

// resumeStep goes on with the step the loop parked in: it settles the
// client's calls with their outputs and ends the step. Asked too soon, it
// parks again.
func (r *rollout) resumeStep(ctx context.Context) (end bool, err error) {
	p := r.parked
	r.parked = nil
	return r.endOrPark(p.t0, p.client, r.answerClient(ctx, p.client))
}

// recordResult records call i's result, which a fork of the rollout
// parked on the step's client calls starts from.
func (r *rollout) recordResult(i int, item protocol.Item) {
	r.mu.Lock()
	r.results[i], r.settled[i] = item, true
	r.mu.Unlock()
}

// answerClient asks the rollout's clientCalls for the outputs of the
// step's client calls (the calls at idx) and settles the calls with them,
// or leaves them open (no outputs). errParked means they are not in yet;
// any other error, that the rollout is ending. It asks with the loop's
// context, not the step's errgroup's: the loop may ask again after the
// hosted calls have returned.
// A suspended rollout's append that answers the pause may resume the
// response meanwhile (resumeAnsweredLocked, under the lock): nothing here
// writes the rollout's state before finishCall takes the lock, but for
// the prompt shed at the first ask, which that does not read.
func (r *rollout) answerClient(ctx context.Context, idx []int) error {
	if _, open := r.client.(openCalls); !open {
		// At the step's first ask, before the pause is announced (a fork
		// reads the prompt once it is); asked again, it writes nothing.
		r.shed()
	}
	calls := make([]protocol.Call, len(idx))
	for n, i := range idx {
		calls[n] = r.calls[i].call
	}
	outs, err := r.client.answer(ctx, calls)
	if err != nil {
		return err
	}
	for _, i := range idx {
		c := r.calls[i]
		r.recordResult(i, r.finishCall(c, outs[c.call.CallID], nil))
	}
	return nil
}

// shed lets the prompt's token ids go as the loop parks on its client
// (sampler.Prompt.Bare): a parked rollout, held by the thousand, keeps its
// context as items, and of their render only what its next step reads,
// each item's count and the hash through it (the prefix cache's key). The
// ids come back, rendered again from the items, only if a step has to
// truncate the context (fit). A durable rollout keeps them: its journal's
// snapshots write them, so that a wake or a takeover tokenizes nothing
// (and it leaves memory once it hibernates); so does a rollout whose
// context is truncated, which reads them at every step.
func (r *rollout) shed() {
	if !r.sheds() {
		return
	}
	if p := r.prompt.Bare(); p != r.prompt { // bare already: the same prompt, not written again
		r.prompt = p
	}
}

// sheds reports whether the rollout lets its prompt's ids go as it parks
// (shed).
func (r *rollout) sheds() bool { return r.srv.opts.Checkpoints == nil && r.cut == nil }

// endStep ends a step whose calls have their results (err: the rollout is
// ending): it adds the results to the context, in output order, then the
// messages steered in meanwhile. open reports that a call stays open for
// the next turn.
func (r *rollout) endStep(t0 time.Time, err error) (open bool, _ error) {
	calls := r.calls
	tools := r.srv.now().Sub(t0)
	r.srv.obs.StepDispatched(tools)
	r.mu.Lock()
	r.tm.ToolsMicros += tools.Microseconds()
	r.flushDoneLocked()
	results := r.results
	r.mu.Unlock()
	if err != nil {
		return false, err
	}
	r.stepOut = 0     // rendered now: the prompt counts it
	r.renderPending() // the step's output, complete now
	for i, res := range results {
		switch {
		case res == nil:
			open = true
		case calls[i].kind == clientCall || res.ItemID() != calls[i].call.ID:
			// A client's output joins whatever id it gave itself (even
			// its call's).
			r.items = append(r.items, res)
		}
	}
	if open {
		r.leftOpen = true
		r.renderPending()
		var required []protocol.RequiredInput
		for i, res := range results {
			if res == nil && calls[i].kind == clientCall {
				required = append(required, requiredInput(calls[i].call.Type, calls[i].call.CallID, calls[i].call.Name))
			}
		}
		r.mu.Lock()
		r.required = required
		r.mu.Unlock()
		return true, nil
	}
	if r.succeeds && r.inbox.steerCount() > 0 {
		// The step's end is the safe boundary: the response ends
		// incomplete ("steered"), and its successor takes the steering.
		r.capped = protocol.ReasonSteered
	} else {
		r.appendContext(r.inbox.drain())
	}
	r.modelReady = time.Now() // the pause's in_progress goes out while the model starts
	if r.agent != nil {
		return false, nil // a sub-agent's wait is no pause of its response's
	}
	r.mu.Lock()
	resumed := r.resumeLocked()
	r.mu.Unlock()
	if resumed {
		// The client waits for the in_progress just queued; the next
		// step's preparation (and an unpaced model's whole step) can wait
		// for it. Without this the connection's writer, woken onto this
		// goroutine's P, waits until the loop blocks: on two cores, most
		// of a round trip.
		goruntime.Gosched()
	}
	return false, nil
}

// finishCall finishes a call's output item with what its tool returned, and
// returns the call's result: the tool's own item replaces the call's; a call
// whose item waits for its tool is completed by any other result. A tool's
// error fails the call's item, which is then the result: a search backend
// down does not end the rollout, the item says so and the model reads that.
func (r *rollout) finishCall(c *stepCall, item protocol.Item, err error) protocol.Item {
	if err != nil {
		r.srv.log.Warn("tool failed", "tool", c.call.Name, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case c.index < 0: // a call an earlier response made (rollout.rerun): its item is there
		if err != nil {
			return nil
		}
	case err != nil:
		item = r.resp.Output[c.index]
		if c.toolFinishes {
			markStatus(item, protocol.StatusFailed)
			r.itemDoneLocked(c.index, item)
		}
	case item != nil && item.ItemID() == c.call.ID && c.kind != clientCall:
		// A hosted tool's own item replaces the call's. A client's output
		// never does, whatever id it claims: it joins the context after
		// the step (endStep), so that a fork's items, shared with its
		// original, are never written.
		attribute(item, r.agent)
		r.resp.Output[c.index] = item
		r.items[c.pos] = item
		if c.toolFinishes {
			r.itemDoneLocked(c.index, item)
		}
	case item != nil && c.toolFinishes:
		markStatus(r.resp.Output[c.index], protocol.StatusCompleted)
		r.itemDoneLocked(c.index, r.resp.Output[c.index])
	case c.toolFinishes:
		// Left open by its tool (a wait on agents that wait on their
		// client, in an open tree): done as it stands.
		r.itemDoneLocked(c.index, r.resp.Output[c.index])
	}
	return item
}

// emitFor stamps a tool's progress event with its call's item and sends it.
func (r *rollout) emitFor(c *stepCall, ev protocol.Event) {
	switch ev := ev.(type) {
	case *protocol.WebSearchCallEvent:
		ev.OutputIndex, ev.ItemID = c.index, c.call.ID
	case *protocol.MCPEvent:
		ev.OutputIndex, ev.ItemID = c.index, c.call.ID
	}
	r.emit(ev)
}

// resumeAnsweredLocked ends the pause its client has just answered, on the
// goroutine of the append that answered it (suspension.deliver), when the
// step holds nothing more: every call but the parked ones (parked of them)
// has returned and every output_item.done is out. The client's
// response.in_progress then leaves before the rollout's goroutine has even
// woken, not after it has taken the outputs in; endStep then finds the
// response running. A step whose hosted calls still run resumes there, as
// they return; a rollout that is ending (cancelled, shut down) does not
// resume. The in_progress's timings (include=tether.timings) count the
// step's tool time and the outputs' rendering from the next event on: the
// loop adds them as it takes the outputs in.
//
// The loop is parked (no goroutine runs it), or is being driven on and
// waits for the lock in finishCall, so what it writes without the lock
// (the usage, the timings) is still.
func (r *rollout) resumeAnsweredLocked(parked int) {
	if r.ctx.Err() != nil {
		return
	}
	unsettled := 0
	for _, s := range r.settled {
		if !s {
			unsettled++
		}
	}
	if unsettled != parked || len(r.order.held) > 0 || r.order.doneNext < len(r.own) {
		return
	}
	r.resumeLocked()
}

// resumeLocked ends a pause whose step is over: the response runs again.
// It reports whether there was one (and its response.in_progress went out).
func (r *rollout) resumeLocked() bool {
	if r.resp.Status != protocol.ResponseRequiresAction {
		return false
	}
	r.resp.Status = protocol.ResponseInProgress
	r.resp.RequiredAction = nil
	_ = r.resp.KeepEcho() // kept while parked, unless the budget had no room for it (keepEchoParkedLocked); should it fail, events encode the response whole
	if ev := r.restart; ev != nil {
		r.restart = nil
		r.emitLocked(ev)
	}
	if !r.req.MultiAgentEnabled() { // the beta's waiting response never left in_progress
		r.emitStepViewLocked(protocol.EventInProgress)
	}
	return true
}
