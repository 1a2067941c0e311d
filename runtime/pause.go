package runtime

import (
	"context"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// pauseVersion is the version of pauseState's written form.
const pauseVersion = 1

// pauseState is a suspended rollout's state at a pause, as one value that
// points into no live rollout, connection or server: everything needed to
// rebuild its loop parked on the pause's client calls (restore), here or on
// another server that serves the same model and tools. It is written out
// with the wire codec (protocol.Marshal, JSON or msgpack) and read back by
// decodePause.
//
// A fork is a restore under a new id, on a lane of the same connection.
// Taken in this process, the value also keeps the rendered prompt it was
// taken with, which a restore here shares instead of rendering the context
// again; it is not written out.
//
// It is immutable once taken: a restore copies what it will change.
type pauseState struct {
	Version  int                     `json:"version"`
	Request  *protocol.CreateRequest `json:"request"`
	Response *protocol.Response      `json:"response"` // as the pause left it: its output so far, its usage
	Tenant   string                  `json:"tenant,omitempty"`
	Creds    string                  `json:"creds,omitempty"` // hash of the credentials that created it
	Lane     string                  `json:"lane,omitempty"`
	// The context: items[:Base] came from the parent response, whose
	// stored ancestors Chain names.
	Base  int            `json:"base"`
	Chain []string       `json:"chain,omitempty"`
	Items protocol.Items `json:"items"`
	// What the model is offered (nil until listed) and each MCP server's
	// listed tools.
	Tools    []protocol.Tool                   `json:"tools,omitempty"`
	MCPTools map[string][]protocol.MCPToolInfo `json:"mcp_tools,omitempty"`
	pauseLoop

	// Kept when the state is taken in this process; not written out.
	kept       bool
	header     []sampler.Token // rendered instructions and tools
	prompt     *sampler.Prompt // rendered Items[promptFrom:Rendered]
	promptFrom int             // the first item the prompt renders: the latest compaction's, or 0
	win        window          // the latest context compaction, opened

	// Read back from a journal whose snapshot kept its prompt's tokens:
	// what a restore rebuilds the prompt from, rather than render it.
	packed *packedPrompt
}

// pauseLoop is the part of a pauseState that each pause rewrites whole
// (a journal's step entry holds it): where the loop stands, small whatever
// the context's length.
type pauseLoop struct {
	Path  ServePath      `json:"path"`
	Usage protocol.Usage `json:"usage"`
	// Steps taken, the output index of the paused step's first item, the
	// items looked at for MCP approvals.
	Steps        int `json:"steps"`
	StepAt       int `json:"step_at"`
	ApprovedFrom int `json:"approved_from"`
	// The paused step's calls, in output order, and the call_ids answered
	// over the rollout with the step that answered each.
	Calls    []pausedCall   `json:"calls"`
	Answered map[string]int `json:"answered,omitempty"`
	// ClientSteps is the steps that parked on the client, the paused one
	// included: Answered counts by them.
	ClientSteps int `json:"client_steps,omitempty"`
	// Steered is what the client steered in (user messages on
	// response.append) that joins the context after the step.
	Steered protocol.Items `json:"steered,omitempty"`
	// Seq is the sequence_number the rollout's next event takes.
	Seq int `json:"sequence_number"`
	// Rendered is how many of Items the loop had rendered at the pause
	// (the step's own are rendered before the next step samples).
	Rendered int `json:"rendered"`
	// ToolCalls are the hosted calls run so far (max_tool_calls), and
	// Capped the incomplete_details.reason of a bound the paused step
	// reached, with which the response ends once the step does.
	ToolCalls int    `json:"tool_calls,omitempty"`
	Capped    string `json:"capped,omitempty"`
	// Tree marks a multi-agent response's tree at rest (agents_durable.go):
	// every live agent waits, on its client's calls or on its own
	// sub-agents. Items are then every agent's, flat, as a continuation
	// brings them (agents.rebuild builds the tree again from them), Calls
	// the client calls its sub-agents wait on, and nothing was rendered.
	Tree bool `json:"tree,omitempty"`
}

// pausedCall is one call of the paused step: the client's, which the pause
// lists, or a hosted one, settled with its result.
type pausedCall struct {
	Type         protocol.ItemType   `json:"type"`
	ID           string              `json:"id,omitempty"`
	CallID       string              `json:"call_id,omitempty"`
	Name         string              `json:"name,omitempty"`
	Namespace    string              `json:"namespace,omitempty"`
	Input        string              `json:"input,omitempty"`
	Status       protocol.ItemStatus `json:"status,omitempty"`
	Index        int                 `json:"index"` // output index of its item
	Pos          int                 `json:"pos"`   // position of its item in Items
	ToolFinishes bool                `json:"tool_finishes,omitempty"`
	Client       bool                `json:"client,omitempty"`
	Result       protocol.Items      `json:"result,omitempty"` // a hosted call's result: one item
}

func (c pausedCall) call() protocol.Call {
	return protocol.Call{Type: c.Type, ID: c.ID, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Input: c.Input, Status: c.Status}
}

// pauseStateLocked takes the rollout's state at its pause. The caller holds the
// suspension's lock, having decided the rollout is parked, and the
// rollout's: the loop waits in park, and the step's hosted calls, which
// write under it, must all be done (a call still running has no result to
// keep).
func (r *rollout) pauseStateLocked() (*pauseState, *protocol.Error) {
	for i, c := range r.calls {
		if c.kind != clientCall && !r.settled[i] {
			return nil, errForkHostedRunning(r.resp.ID, c.call.Name)
		}
	}
	resp := *r.resp
	resp.Output = slices.Clip(r.resp.Output)
	resp.DropEcho() // the state is kept while parked, or written: a rollout made from it keeps its own
	ps := &pauseState{Version: pauseVersion, Request: r.req, Response: &resp, Tenant: r.tenant, Lane: r.lane,
		Base: r.base, Chain: r.chain, Items: slices.Clip(r.items), Tools: r.tools,
		pauseLoop: pauseLoop{Path: r.path, Usage: r.usage, Steps: r.steps, StepAt: r.stepAt, ApprovedFrom: r.approvedFrom,
			Steered: r.inbox.peek(), Seq: r.order.seq, Rendered: r.rendered, ToolCalls: r.toolCalls, Capped: r.capped},
		kept: true, header: r.header, prompt: r.prompt, promptFrom: r.win.start(), win: r.win}
	for label, s := range r.mcp {
		if s.tools != nil {
			if ps.MCPTools == nil {
				ps.MCPTools = make(map[string][]protocol.MCPToolInfo, len(r.mcp))
			}
			ps.MCPTools[label] = s.tools
		}
	}
	for i, c := range r.calls {
		pc := pausedCall{Type: c.call.Type, ID: c.call.ID, CallID: c.call.CallID, Name: c.call.Name, Namespace: c.call.Namespace,
			Input: c.call.Input, Status: c.call.Status, Index: c.index, Pos: c.pos, ToolFinishes: c.toolFinishes, Client: c.kind == clientCall}
		if !pc.Client && r.results[i] != nil {
			pc.Result = protocol.Items{r.results[i]}
		}
		ps.Calls = append(ps.Calls, pc)
	}
	return ps, nil
}

// decodePause reads back a pauseState that protocol.Marshal wrote: with
// its items, or without them and items its items (a snapshot's, apart).
func decodePause(b []byte, items protocol.Items) (*pauseState, error) {
	// One pass: the request is kept as it was written, and read as a
	// client's create is, its input included.
	var w struct {
		pauseState
		Request jsontext.Value `json:"request"` // over pauseState's
	}
	if err := protocol.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	ps := &w.pauseState
	if items != nil {
		if ps.Items != nil {
			return nil, errPauseUnreadable(ps.Version)
		}
		ps.Items = items
	}
	if ps.Version != pauseVersion || len(w.Request) == 0 || ps.Response == nil || !ps.valid() {
		return nil, errPauseUnreadable(ps.Version)
	}
	req, perr := protocol.DecodeCreateRequest(w.Request)
	if perr != nil {
		return nil, perr
	}
	ps.Request = req
	return ps, nil
}

// valid reports whether the state's positions fall within its context and
// output.
func (ps *pauseState) valid() bool {
	n := len(ps.Items)
	if ps.Rendered < 0 || ps.Rendered > n || ps.Base < 0 || ps.Base > n || ps.ApprovedFrom < 0 || ps.ApprovedFrom > n ||
		ps.Steps < 0 || ps.Seq < 0 || ps.ClientSteps < 0 || ps.StepAt < 0 || ps.StepAt > len(ps.Response.Output) {
		return false
	}
	for _, c := range ps.Calls {
		if c.Pos < 0 || c.Pos >= n || c.Index < 0 || c.Index >= len(ps.Response.Output) || len(c.Result) > 1 {
			return false
		}
	}
	return true
}

// restore rebuilds the loop parked at ps as a rollout of s's on lane: run
// starts it inside the paused step, parked on the step's client calls,
// which its own client Tool (a suspension) answers. The response keeps its
// id; a fork gives it another. The context is rendered again unless ps was
// taken in this process; a state read back from a journal opens its latest
// context compaction again, which may read the store (ctx).
func (s *Server) restore(ctx context.Context, ps *pauseState, lane string) (*rollout, *protocol.Error) {
	model, perr := s.model(ps.Request.Model)
	if perr != nil {
		return nil, perr
	}
	// Copy on write: the rollout shares the state's items and output,
	// clipped, so that its first append copies them into arrays of its
	// own; nothing writes them in place once the step's hosted calls are
	// settled (a client's output never replaces its call's item:
	// finishCall).
	r := &rollout{srv: s, req: ps.Request, model: model, lane: lane, tenant: ps.Tenant, base: ps.Base, chain: ps.Chain, everyDelta: s.opts.EveryDelta,
		path: ps.Path, routed: true, items: ps.Items, usage: ps.Usage, steps: ps.Steps, stepAt: ps.StepAt,
		approvedFrom: ps.ApprovedFrom, tools: ps.Tools, paused: ps, client: openCalls{}, toolCalls: ps.ToolCalls, capped: ps.Capped,
		header: ps.header, prompt: ps.prompt, rendered: ps.Rendered}
	r.shareNew()
	if r.hosted, perr = s.hostedTools(ps.Request); perr != nil {
		return nil, perr
	}
	if perr := r.askLogprobs(); perr != nil {
		return nil, perr
	}
	if perr := s.prepareMCP(r); perr != nil {
		return nil, perr
	}
	for label, tools := range ps.MCPTools {
		if m := r.mcp[label]; m != nil {
			m.tools = tools
		}
	}
	r.win = ps.win
	if !ps.kept {
		if r.win, perr = s.windowOf(ctx, ps.Tenant, ps.Items[:ps.Rendered], 0, "items"); perr != nil {
			return nil, perr
		}
		// Read back from its written form: render what the loop had, but
		// for the items whose tokens the journal kept.
		r.header = s.renderer.Header(derefString(ps.Request.Instructions), ps.Request.Tools)
		r.prompt = s.rebuildPrompt(ps, r.win)
	}
	resp := *ps.Response
	resp.Status, resp.RequiredAction, resp.OutputOffset = protocol.ResponseInProgress, nil, nil
	r.resp = &resp
	r.own = make([]int, len(resp.Output)) // every item the loop's, their done events out before the pause
	for i := range r.own {
		r.own[i] = i
	}
	r.order.doneNext = len(r.own)
	r.order.seq = ps.Seq
	r.inbox.add(ps.Steered...)
	return r, nil
}

// resumePaused runs the rest of the paused step: the rollout parks on the
// step's client calls (its own pause, response.done, listing them), takes
// the outputs its client appends, and ends the step as the original would
// have.
func (r *rollout) resumePaused(ctx context.Context) (open bool, err error) {
	t0 := r.srv.now()
	ps := r.paused
	r.calls = make([]*stepCall, len(ps.Calls))
	results := make([]protocol.Item, len(ps.Calls))
	var client []int
	settled := make([]bool, len(ps.Calls))
	for i, pc := range ps.Calls {
		c := &stepCall{call: pc.call(), index: pc.Index, pos: pc.Pos, toolFinishes: pc.ToolFinishes, kind: hostedCall, tool: settledTool{}}
		if pc.Client {
			c.kind, c.tool = clientCall, nil // the restored rollout's own suspension answers it
			client = append(client, i)
		} else {
			if len(pc.Result) > 0 {
				results[i] = pc.Result[0]
			}
			settled[i] = true // it had its result before the pause
		}
		r.calls[i] = c
	}
	r.mu.Lock()
	r.results, r.settled = results, settled
	r.mu.Unlock()
	if len(client) > 0 {
		err = r.answerClient(ctx, client)
	}
	return r.endOrPark(t0, client, err)
}

// settledTool stands for the hosted tool of a call that had its result
// before the pause: a restored step does not call it again.
type settledTool struct{}

func (settledTool) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolFunction} }
func (settledTool) Call(context.Context, protocol.Call, func(protocol.Event)) (protocol.Item, error) {
	return nil, errSettledTool
}
