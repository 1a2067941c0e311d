package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// This file is a multi-agent response's agent tree (OpenAI's Responses
// multi-agent beta), served over WebSocket. The root agent is the
// response's own loop. Each sub-agent that spawn_agent starts is a loop
// of its own: a rollout that is not a response, sharing the root's lock,
// response object and event stream, so that its items take their places
// in the one output and its events their numbers in the one sequence,
// each naming its agent. An agent acts on the tree with multi_agent_call
// items, which the tree runs as a hosted tool (agentTool); a sub-agent's
// client calls wait for their outputs as the root's do, as a value (its
// loop parked), and an inject routes each output by call_id to the agent
// waiting on it (agents.accept).
//
// Not yet: a tree is not durable (a server with Options.Checkpoints
// refuses spawn_agent, with an error output), it is not forked, and it is
// not served over HTTP, where a multi_agent_call gets an error output;
// followup_task is refused. A sub-agent's client calls are bounded by
// Suspension.Timeout, as a pause is.

// defaultSubagents is max_concurrent_subagents when the request leaves it out.
const defaultSubagents = 3

// agents is a multi-agent response's sub-agents. Its lock is a leaf:
// nothing else is locked while it is held.
type agents struct {
	root *rollout
	max  int

	mu      sync.Mutex
	byPath  map[string]*subAgent
	order   []*subAgent          // in spawn order
	waiting map[string]*subAgent // call_id -> the sub-agent whose step waits for its output
}

// subAgent is one sub-agent: its loop, its client calls, how it ended.
type subAgent struct {
	path  string
	ro    *rollout
	calls *agentCalls
	done  chan struct{} // closed when its loop has ended

	// Set when done closes.
	status string // completed, failed, interrupted
	final  string // its last message's text
}

func newAgents(root *rollout) *agents {
	max := defaultSubagents
	if m := root.req.MultiAgent; m != nil && m.MaxConcurrentSubagents != nil {
		max = *m.MaxConcurrentSubagents
	}
	return &agents{root: root, max: max, byPath: map[string]*subAgent{}, waiting: map[string]*subAgent{}}
}

// pathOf is the path an agent's name stands for, named by caller: a path
// as it is, or the task name of one of caller's children.
func pathOf(caller *rollout, name string) string {
	if strings.HasPrefix(name, protocol.RootAgent) {
		return name
	}
	return caller.agentPath() + "/" + name
}

// attribute names the sub-agent that made an item (nil: the root, whose
// items name none), on the item types that carry it: all an agent makes
// but MCP's and reasoning.
func attribute(it protocol.Item, agent *protocol.AgentRef) {
	if agent == nil {
		return
	}
	switch it := it.(type) {
	case *protocol.Message:
		it.Agent = agent
	case *protocol.FunctionCall:
		it.Agent = agent
	case *protocol.CustomToolCall:
		it.Agent = agent
	case *protocol.MultiAgentCall:
		it.Agent = agent
	case *protocol.ShellCall:
		it.Agent = agent
	case *protocol.LocalShellCall:
		it.Agent = agent
	case *protocol.ApplyPatchCall:
		it.Agent = agent
	case *protocol.ComputerCall:
		it.Agent = agent
	case *protocol.ToolSearchCall:
		it.Agent = agent
	case *protocol.WebSearchCall:
		it.Agent = agent
	}
}

// agentName is a sub-agent's path, "" for the root.
func (r *rollout) agentName() string {
	if r.agent != nil {
		return r.agent.AgentName
	}
	return ""
}

// agentPath is the path of a rollout's agent: the root's, or a sub-agent's.
func (r *rollout) agentPath() string {
	if r.agent != nil {
		return r.agent.AgentName
	}
	return protocol.RootAgent
}

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	TaskName  string `json:"task_name"`
	Message   string `json:"message"`
	ForkTurns string `json:"fork_turns"`
}

// spawn starts a sub-agent of caller from args: its context the caller's
// (fork_turns "all", shared copy-on-write) or nothing, then its message.
func (t *agents) spawn(caller *rollout, args spawnArgs) (*subAgent, error) {
	switch {
	case t.root.srv.opts.Checkpoints != nil:
		return nil, errors.New("sub-agents are not journaled yet, and this server keeps its rollouts durable")
	case args.TaskName == "" || strings.ContainsAny(args.TaskName, "/ "):
		return nil, fmt.Errorf("task_name %q: want a name without '/' or spaces", args.TaskName)
	case args.ForkTurns != "" && args.ForkTurns != "all" && args.ForkTurns != "none":
		return nil, fmt.Errorf("fork_turns %q: want \"all\" or \"none\"", args.ForkTurns)
	}
	path := caller.agentPath() + "/" + args.TaskName
	root := t.root
	sub := &rollout{srv: root.srv, req: root.req, model: root.model, lane: root.lane, tenant: root.tenant, path: root.path, routed: true,
		start: root.srv.now(), everyDelta: root.everyDelta, logprobs: root.logprobs, topLogprobs: root.topLogprobs,
		header: root.header, hosted: root.hosted, tools: root.tools,
		mu: root.mu, resp: root.resp, order: eventOrder{eventStream: root.order.eventStream},
		tree: t, agent: &protocol.AgentRef{AgentName: path}}
	message := &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: args.Message}}}
	ids.NameInputs(protocol.Items{message})
	if args.ForkTurns == "all" {
		root.mu.Lock() // the caller's tool goroutines may write its context's slots
		sub.items, sub.prompt, sub.rendered, sub.win = slices.Clip(caller.items), caller.prompt, caller.rendered, caller.win
		root.mu.Unlock()
	}
	sub.items = append(sub.items, message)
	sub.renderPending()
	sa := &subAgent{path: path, ro: sub, done: make(chan struct{})}
	sa.calls = &agentCalls{tree: t, agent: sa}
	sub.client = sa.calls
	sub.driveOn = func() { go t.drive(sa, sub.resume) }

	// Whole before the tree has it: another agent may name it at once.
	t.mu.Lock()
	live := 0
	for _, o := range t.order {
		select {
		case <-o.done:
		default:
			live++
		}
	}
	switch {
	case t.byPath[path] != nil:
		t.mu.Unlock()
		return nil, fmt.Errorf("an agent %s exists already", path)
	case live >= t.max:
		t.mu.Unlock()
		return nil, fmt.Errorf("%d sub-agents run already, max_concurrent_subagents", t.max)
	}
	t.byPath[path] = sa
	t.order = append(t.order, sa)
	t.mu.Unlock()
	go t.drive(sa, func() (*conversation, error) { return sub.run(root.ctx, nil) })
	return sa, nil
}

// endAgent is a sub-agent's end: its items' done events go out, and
// nothing else (the response's end is the root's, once every agent's).
func (r *rollout) endAgent(serr error) (*conversation, error) {
	r.mu.Lock()
	r.flushDoneLocked()
	r.mu.Unlock()
	return nil, serr
}

// drive runs a sub-agent's loop from first until it ends, or parks on
// its client's calls (then the outputs' kick drives it on).
func (t *agents) drive(sa *subAgent, first func() (*conversation, error)) {
	for {
		_, err := first()
		if !errors.Is(err, errParked) {
			t.ended(sa, err)
			return
		}
		if sa.ro.sleep(sa.calls.ready) {
			return
		}
		first = sa.ro.resume
	}
}

// ended records how a sub-agent's loop ended, and lets go of its calls.
func (t *agents) ended(sa *subAgent, err error) {
	r := sa.ro
	r.mu.Lock()
	status := string(protocol.ResponseCompleted)
	switch cause := context.Cause(r.ctx); {
	case cause == errInterrupted:
		status = "interrupted"
	case err != nil:
		status = string(protocol.ResponseFailed)
	}
	final := ""
	for _, idx := range slices.Backward(r.own) {
		if m, ok := r.resp.Output[idx].(*protocol.Message); ok {
			final = m.Content.Text()
			break
		}
	}
	r.mu.Unlock()
	t.mu.Lock()
	for id, w := range t.waiting {
		if w == sa {
			delete(t.waiting, id)
		}
	}
	if sa.calls.timer != nil {
		sa.calls.timer.Stop()
	}
	sa.status, sa.final = status, final
	t.mu.Unlock()
	close(sa.done)
}

// end ends the tree with its response: every sub-agent still running is
// interrupted, and end returns once they have all ended, with the usage
// of their steps.
func (t *agents) end() protocol.Usage {
	t.mu.Lock()
	subs := slices.Clone(t.order)
	t.mu.Unlock()
	var usage protocol.Usage
	for _, sa := range subs {
		sa.ro.abort(errInterrupted)
		<-sa.done
		usage.Add(sa.ro.usage)
	}
	return usage
}

// spawned reports whether the tree has had a sub-agent.
func (t *agents) spawned() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.order) > 0
}

// errInterrupted ends a sub-agent that interrupt_agent, or its response's
// end, interrupted.
var errInterrupted = errors.New("runtime: the agent was interrupted")

// accept takes items (an inject's, an append's) when every one of them is
// the output of a call a sub-agent waits on: each goes to its agent, and
// an agent that has all its outputs runs on. It reports whether they were
// the tree's; nothing is taken when they were not all.
func (t *agents) accept(items protocol.Items) bool {
	t.mu.Lock()
	var to []*subAgent
	for _, it := range items {
		callID, _, ok := protocol.AnswerOf(it)
		if !ok || t.waiting[callID] == nil {
			t.mu.Unlock()
			return false
		}
		to = append(to, t.waiting[callID])
	}
	var ready []*subAgent
	for i, it := range items {
		callID, _, _ := protocol.AnswerOf(it)
		delete(t.waiting, callID)
		a := to[i].calls
		a.outputs[callID] = it
		if len(a.outputs) == len(a.pending) && !slices.Contains(ready, to[i]) {
			ready = append(ready, to[i])
		}
	}
	t.mu.Unlock()
	for _, sa := range ready {
		sa.ro.kick()
	}
	return true
}

// agentCalls are a sub-agent's client calls: asked for a step's calls, it
// lists them as waited on (accept brings their outputs), and the loop
// parks until they are all in.
type agentCalls struct {
	tree  *agents
	agent *subAgent

	// Guarded by tree.mu.
	asked   bool
	pending map[string]protocol.Call
	outputs map[string]protocol.Item
	timer   *time.Timer // the wait's bound, Suspension.Timeout
}

func (a *agentCalls) answer(ctx context.Context, calls []protocol.Call) (map[string]protocol.Item, error) {
	t := a.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	if !a.asked {
		a.asked = true
		a.pending, a.outputs = make(map[string]protocol.Call, len(calls)), make(map[string]protocol.Item, len(calls))
		for _, c := range calls {
			a.pending[c.CallID] = c
			t.waiting[c.CallID] = a.agent
		}
		// Bounded as a pause is: the agent fails, and whoever waits on
		// it learns so.
		if wait := t.root.srv.opts.Suspension.Timeout; wait > 0 {
			ro := a.agent.ro
			a.timer = time.AfterFunc(wait, func() { ro.abort(errToolTimeout) })
		}
		// Its wait is told once the calls' output_item.done events are
		// out (rollout.requireAction), the calls listed as waited on
		// first; not under the tree's lock, a leaf.
		pending := make([]protocol.PendingCall, len(calls))
		for i, c := range calls {
			pending[i] = pendingCall(c)
		}
		t.mu.Unlock()
		a.agent.ro.requireAction(pending)
		t.mu.Lock()
	}
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case len(a.outputs) < len(a.pending):
		return nil, errParked
	}
	outs := a.outputs
	if a.timer != nil {
		a.timer.Stop()
	}
	a.asked, a.pending, a.outputs, a.timer = false, nil, nil, nil
	return outs, nil
}

// ready reports whether the step's calls all have their outputs.
func (a *agentCalls) ready() bool {
	a.tree.mu.Lock()
	defer a.tree.mu.Unlock()
	return a.asked && len(a.outputs) == len(a.pending)
}

// agentTool runs an agent's multi_agent_call items on its tree.
type agentTool struct {
	tree   *agents // nil: the response has no tree (served over HTTP)
	caller *rollout
}

func (agentTool) Definition() protocol.Tool { return protocol.Tool{Type: "multi_agent"} }

// Call runs the action and puts what it gives back in the caller's
// output after the call: the multi_agent_call_output, then agent_message
// items from the agents it waited on. They join the caller's context in
// that order too: the output as the call's result, the messages through
// its inbox, taken after the step's results.
func (at agentTool) Call(ctx context.Context, call protocol.Call, _ func(protocol.Event)) (protocol.Item, error) {
	text, messages := at.run(ctx, call)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	out := &protocol.MultiAgentCallOutput{CallID: call.CallID, Action: call.Name,
		Output: protocol.Contents{&protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}}, Agent: at.caller.agent}
	r := at.caller
	r.mu.Lock()
	for _, it := range append(protocol.Items{out}, messages...) {
		idx := r.placeLocked(func(idx int) protocol.Item {
			prefix := "maco"
			if _, ok := it.(*protocol.AgentMessage); ok {
				prefix = "amsg"
			}
			protocol.SetItemID(it, ids.Output(r.resp.ID, prefix, idx))
			return it
		})
		r.emitLocked(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: it})
		r.itemDoneLocked(idx, it)
	}
	r.mu.Unlock()
	r.inbox.add(messages...)
	return out, nil
}

// run runs the action: its output's text, and the messages it brings.
func (at agentTool) run(ctx context.Context, call protocol.Call) (string, protocol.Items) {
	failed := func(format string, args ...any) (string, protocol.Items) {
		b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(format, args...)})
		return string(b), nil
	}
	t := at.tree
	if t == nil {
		return failed("sub-agents are served over WebSocket only")
	}
	var args struct {
		spawnArgs
		Targets []string `json:"targets"`
		Target  string   `json:"target"`
	}
	if call.Input != "" && json.Unmarshal([]byte(call.Input), &args) != nil {
		return failed("the arguments are not a JSON object")
	}
	ok := func(v any) (string, protocol.Items) {
		b, _ := json.Marshal(v)
		return string(b), nil
	}
	switch call.Name {
	case protocol.ActionSpawnAgent:
		sa, err := t.spawn(at.caller, args.spawnArgs)
		if err != nil {
			return failed("%v", err)
		}
		return ok(map[string]string{"task_name": sa.path})
	case protocol.ActionWaitAgent:
		subs, err := t.find(at.caller, args.Targets)
		if err != nil {
			return failed("%v", err)
		}
		status := map[string]string{}
		var messages protocol.Items
		for _, sa := range subs {
			select {
			case <-sa.done:
			case <-ctx.Done():
				return "", nil
			}
			status[sa.path] = sa.status
			messages = append(messages, &protocol.AgentMessage{Author: sa.path, Recipient: at.caller.agentPath(),
				Content: protocol.Contents{&protocol.OutputText{Text: sa.final, Annotations: []protocol.Annotation{}}}, Agent: at.caller.agent})
		}
		text, _ := ok(map[string]any{"status": status})
		return text, messages
	case protocol.ActionSendMessage:
		subs, err := t.find(at.caller, []string{args.Target})
		if err != nil {
			return failed("%v", err)
		}
		sa := subs[0]
		select {
		case <-sa.done:
			return failed("%s has ended", sa.path)
		default:
		}
		sa.ro.inbox.add(&protocol.AgentMessage{ID: ids.New("amsg"), Author: at.caller.agentPath(), Recipient: sa.path,
			Content: protocol.Contents{&protocol.OutputText{Text: args.Message, Annotations: []protocol.Annotation{}}}})
		return ok(map[string]string{"delivered": sa.path})
	case protocol.ActionListAgents:
		t.mu.Lock()
		list := make([]map[string]string, 0, len(t.order))
		for _, sa := range t.order {
			st := sa.status
			select {
			case <-sa.done:
			default:
				st = "running"
			}
			list = append(list, map[string]string{"agent_name": sa.path, "status": st})
		}
		t.mu.Unlock()
		return ok(map[string]any{"agents": list})
	case protocol.ActionInterruptAgent:
		subs, err := t.find(at.caller, []string{args.Target})
		if err != nil {
			return failed("%v", err)
		}
		subs[0].ro.abort(errInterrupted) // a parked loop is driven on, to its end
		select {
		case <-subs[0].done:
		case <-ctx.Done():
			return "", nil
		}
		return ok(map[string]string{"interrupted": subs[0].path})
	}
	return failed("%s is not served", call.Name)
}

// find is the sub-agents names stand for, named by caller, or the error
// naming one that is not there.
func (t *agents) find(caller *rollout, names []string) ([]*subAgent, error) {
	if len(names) == 0 {
		return nil, errors.New("no agent named")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := make([]*subAgent, len(names))
	for i, n := range names {
		if subs[i] = t.byPath[pathOf(caller, n)]; subs[i] == nil {
			return nil, fmt.Errorf("no agent %s", pathOf(caller, n))
		}
	}
	return subs, nil
}
