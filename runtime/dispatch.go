package runtime

import (
	"context"
	"net/http"
	goruntime "runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tether-run/tether/protocol"
)

// stepCall is one tool call sampled in the current step.
type stepCall struct {
	call  protocol.Call
	tool  Tool
	index int // output index of the call's item
	pos   int // position of the call's item in the rollout's items

	toolFinishes bool // the call's item is the tool's own (web_search_call): done when the tool returns
}

// toolFor routes a sampled call: a hosted tool the request offered, an MCP
// server's tool (which may make c an approval request for the client),
// else the client (protocol.RunnerOf says which types are which; the
// members of the request's namespaces are always the client's).
func (r *rollout) toolFor(c *protocol.Call) Tool {
	if t, ok := r.hosted[c.Name]; ok && c.Namespace == "" && c.Type == protocol.ItemFunctionCall {
		return t
	}
	if t, ok := r.mcpTool(c); ok {
		return t
	}
	return r.client
}

// startItem is the in-progress output item of a call: a function_call or a
// custom_tool_call for the client, the hosted tool's own item type otherwise,
// at output index (its id drawn from it: outputID).
func (r *rollout) startItem(c *stepCall, index int) protocol.Item {
	id := func(prefix string) string { return outputID(r.resp.ID, prefix, index) }
	switch t := c.tool.(type) {
	case *mcpServer:
		c.call.ID = id("mcp")
		return &protocol.MCPCall{ID: c.call.ID, ServerLabel: c.call.Namespace, Name: c.call.Name, Status: protocol.StatusInProgress}
	case approvedCall:
		c.call.ID = id("mcp")
		return &protocol.MCPCall{ID: c.call.ID, ServerLabel: c.call.Namespace, Name: c.call.Name, Arguments: c.call.Input,
			ApprovalRequestID: &t.request, Status: protocol.StatusInProgress}
	}
	switch {
	case c.tool.Definition().Type == protocol.ToolWebSearch:
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

// dispatch runs the step's calls concurrently through their tools and adds
// their results to the context, in output order, then the messages steered
// in meanwhile. open reports that a call stays open for the next turn, which
// ends this response.
func (r *rollout) dispatch(ctx context.Context) (open bool, err error) {
	calls := r.calls
	t0 := r.srv.now()
	beginStep(calls)
	results := make([]protocol.Item, len(calls))
	r.mu.Lock()
	r.results, r.settled = results, make([]bool, len(calls))
	r.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	var parked []int // the calls a parker answers, waited for below
	for i, c := range calls {
		if _, ok := c.tool.(parker); ok {
			parked = append(parked, i)
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
			r.settleResult(i, r.settleCall(c, item, err))
			return nil
		})
	}
	var parkErr error
	if len(parked) > 0 {
		parkErr = r.answerParked(gctx, parked)
	}
	if err = g.Wait(); err == nil {
		err = parkErr
	}
	return r.endStep(t0, err)
}

// settleResult records call i's result, which a fork of the rollout
// parked on the step's client calls starts from.
func (r *rollout) settleResult(i int, item protocol.Item) {
	r.mu.Lock()
	r.results[i], r.settled[i] = item, true
	r.mu.Unlock()
}

// answerParked parks on the step's client calls (the calls at parked) and
// settles them with the outputs their parker returns; an error means the
// rollout is ending. The append that answers the pause may resume the
// response meanwhile (resumeAnsweredLocked, under the lock): nothing here
// writes the rollout's state before settleCall takes the lock.
func (r *rollout) answerParked(ctx context.Context, parked []int) error {
	calls := r.calls
	outs, err := calls[parked[0]].tool.(parker).park(ctx)
	if err != nil {
		return err
	}
	for _, i := range parked {
		r.settleResult(i, r.settleCall(calls[i], outs[calls[i].call.CallID], nil))
	}
	return nil
}

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
	r.renderPending() // the step's output, complete now
	for i, res := range results {
		switch {
		case res == nil:
			open = true
		case answeredByClient(calls[i]) || res.ItemID() != calls[i].call.ID:
			// A client's output joins whatever id it gave itself (even
			// its call's).
			r.items = append(r.items, res)
		}
	}
	if open {
		r.renderPending()
		var required []protocol.RequiredInput
		for i, res := range results {
			if res == nil {
				required = append(required, requiredInput(calls[i].call.Type, calls[i].call.CallID, calls[i].call.Name))
			}
		}
		r.mu.Lock()
		r.required = required
		r.mu.Unlock()
		return true, nil
	}
	r.appendContext(r.inbox.take())
	r.modelReady = time.Now() // the pause's in_progress goes out while the model starts
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

// beginStep tells the tools that see their calls of a step together which
// calls are theirs, in output order.
func beginStep(calls []*stepCall) {
	var byTool map[stepTool][]protocol.Call
	for _, c := range calls {
		if t, ok := c.tool.(stepTool); ok {
			if byTool == nil {
				byTool = make(map[stepTool][]protocol.Call)
			}
			byTool[t] = append(byTool[t], c.call)
		}
	}
	for t, cs := range byTool {
		t.beginStep(cs)
	}
}

// settleCall finishes a call's output item with what its tool returned, and
// returns the call's result: the tool's own item replaces the call's; a call
// whose item waits for its tool is completed by any other result. A tool's
// error fails the call's item, which is then the result: a search backend
// down does not end the rollout, the item says so and the model reads that.
func (r *rollout) settleCall(c *stepCall, item protocol.Item, err error) protocol.Item {
	if err != nil {
		r.srv.log.Warn("tool failed", "tool", c.call.Name, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		item = r.resp.Output[c.index]
		if c.toolFinishes {
			markStatus(item, protocol.StatusFailed)
			r.itemDoneLocked(c.index, item)
		}
	case item != nil && item.ItemID() == c.call.ID && !answeredByClient(c):
		r.resp.Output[c.index] = item
		r.items[c.pos] = item
		if c.toolFinishes {
			r.itemDoneLocked(c.index, item)
		}
	case item != nil && c.toolFinishes:
		markStatus(r.resp.Output[c.index], protocol.StatusCompleted)
		r.itemDoneLocked(c.index, r.resp.Output[c.index])
	}
	return item
}

// answeredByClient reports whether c's result comes from the client (a
// suspended rollout's response.append): such an output is added to the
// context, never put in place of the call's item, whatever id it claims,
// so that a fork's items, shared with its original, are never written.
func answeredByClient(c *stepCall) bool {
	_, ok := c.tool.(parker)
	return ok
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
