package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/tether-run/tether/protocol"
)

// This file is an open tree (agents.go) across requests. Served over
// HTTP, a multi-agent response completes when every agent has ended or
// waits on its client, and the next request, chained (previous_response_id)
// or replayed (every item sent again), brings the outputs. Its items are
// then every agent's, flat, each naming its agent: the output as the
// client got it. rebuild splits them back into each agent's context as it
// stood when its loop stopped, so that each agent goes on from there,
// whichever form the client used, as it would have over WebSocket.
//
// An agent's context is its items in the order they came, but for one
// thing: a step's results join it in the order of the step's calls
// (endStep), while the output shows them as they came back. A sub-agent's
// context begins with its parent's as it stood at the spawn (fork_turns
// "all"), then its message. An agent_message sent to a sub-agent while it
// streams a step may land in the output among that step's items, where
// its context has it after the step's results; rebuild places it where
// the output does.

// agentState is one agent as a continuation finds it in the items.
type agentState struct {
	path   string
	parent string         // the spawning agent's path; "" for the root
	spawn  spawnArgs      // how it was spawned (sub-agents)
	own    protocol.Items // the items it made, and its calls' outputs, in the order they came
	ctx    protocol.Items // its context (agentContext), once built
	built  bool

	interrupted bool // an interrupt_agent ended it
}

// rebuild builds the root's tree again from the items a continuation
// brings, when they hold one: the root's context becomes its own
// (r.items), and the sub-agents wait in t.pending for the root to start.
// A tree that ended with its response (the root answered) has no agent
// left to run: its sub-agents are there to be named, ended.
func (t *agents) rebuild(flat protocol.Items) bool {
	if !slices.ContainsFunc(flat, func(it protocol.Item) bool { _, ok := it.(*protocol.MultiAgentCall); return ok }) {
		return false
	}
	root, subs := splitTree(flat)
	byPath := map[string]*agentState{protocol.RootAgent: root}
	for _, s := range subs {
		byPath[s.path] = s
	}
	r := t.root
	r.items = agentContext(root, byPath)
	rootPlace := placeOf(root.own)
	r.rerun, t.rootOwed = rootPlace.rerun, rootPlace.owed
	for _, s := range subs {
		p := placeOf(s.own)
		sa := &subAgent{path: s.path, ctx: agentContext(s, byPath), done: make(chan struct{})}
		switch {
		case s.interrupted || (rootPlace.answered && !p.ended):
			sa.status, sa.final = agentInterrupted, p.final
		case p.ended:
			sa.status, sa.final = string(protocol.ResponseCompleted), p.final
		case p.waits: // startPending, or waitPending, says how it waits
			t.pending = append(t.pending, pendingAgent{sa: sa, ctx: sa.ctx, owed: p.owed})
			t.byPath[sa.path], t.order = sa, append(t.order, sa)
			continue
		default:
			t.pending = append(t.pending, pendingAgent{sa: sa, ctx: sa.ctx, rerun: p.rerun})
			sa.ctx = nil // its loop's from here
			t.byPath[sa.path], t.order = sa, append(t.order, sa)
			continue
		}
		close(sa.done)
		t.byPath[sa.path], t.order = sa, append(t.order, sa)
	}
	return true
}

// pendingAgent is a sub-agent rebuild found to go on with the root
// (startPending): runnable, from ctx, or waiting on the client calls it
// owes outputs for (its context in sa.ctx).
type pendingAgent struct {
	sa    *subAgent
	ctx   protocol.Items
	rerun []protocol.Call
	owed  []protocol.Call
}

// waitPending makes the sub-agents rebuild found waiting on their client
// wait on it in this response, before it begins (a suspension's): the
// outputs for their calls start their loops (accept).
func (t *agents) waitPending() {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.pending[:0]
	for _, p := range t.pending {
		if p.owed == nil {
			pending = append(pending, p)
			continue
		}
		p.sa.ctx, p.sa.owed = p.ctx, p.owed
		p.sa.calls = &agentCalls{tree: t, agent: p.sa, asked: true, pending: map[string]protocol.Call{}, outputs: map[string]protocol.Item{}}
		for _, c := range p.owed {
			p.sa.calls.pending[c.CallID] = c
			t.waiting[c.CallID] = p.sa
		}
	}
	t.pending = pending
}

// startPending starts the loops of the sub-agents rebuild found runnable,
// once the root's response has begun: they share its response object.
// Every loop is made before any starts: one may act on another at once.
// One that waits on its client in an open tree ends on its calls.
func (t *agents) startPending() {
	var runs []*subAgent
	for _, p := range t.pending {
		switch {
		case p.owed != nil: // an open tree's (waitPending took a waiting one's)
			p.sa.status = agentWaiting
			close(p.sa.done)
		default:
			t.newLoop(p.sa, p.ctx)
			p.sa.ro.rerun = p.rerun
			runs = append(runs, p.sa)
		}
	}
	for _, sa := range runs {
		t.start(sa)
	}
	t.pending = nil
}

// resumeWaitingLocked makes the loop of a sub-agent rebuild found waiting
// on its client, once every output it owed has come (the caller starts
// it): from its context, the outputs after it in the order of its calls.
// The caller holds t.mu: an interrupt finds the loop, or the wait.
func (t *agents) resumeWaitingLocked(sa *subAgent, outputs map[string]protocol.Item) {
	ctx := slices.Clip(sa.ctx)
	for _, c := range sa.owed {
		ctx = append(ctx, outputs[c.CallID])
	}
	ctx = append(ctx, sa.later...)
	sa.ctx, sa.owed, sa.later = nil, nil, nil
	t.newLoop(sa, ctx)
}

// splitTree splits flat items into their agents': the root's, and each
// sub-agent's, in the order of their spawns. An item goes to the agent it
// names; an output that names none, to the agent whose call it answers;
// anything else is the root's.
func splitTree(flat protocol.Items) (root *agentState, subs []*agentState) {
	root = &agentState{path: protocol.RootAgent}
	byPath := map[string]*agentState{protocol.RootAgent: root}
	spawns := map[string]*protocol.MultiAgentCall{}
	interrupted := map[string]bool{}
	for _, it := range flat {
		switch it := it.(type) {
		case *protocol.MultiAgentCall:
			if it.Action == protocol.ActionSpawnAgent {
				spawns[it.CallID] = it
			}
		case *protocol.MultiAgentCallOutput:
			var out map[string]string
			if json.Unmarshal([]byte(it.Output.Text()), &out) != nil {
				continue
			}
			switch call := spawns[it.CallID]; {
			case it.Action == protocol.ActionSpawnAgent && call != nil && out["task_name"] != "" && byPath[out["task_name"]] == nil:
				s := &agentState{path: out["task_name"], parent: agentPathOf(call.Agent)}
				_ = json.Unmarshal([]byte(call.Arguments), &s.spawn)
				byPath[s.path] = s
				subs = append(subs, s)
			case it.Action == protocol.ActionInterruptAgent && out["interrupted"] != "":
				interrupted[out["interrupted"]] = true
			}
		}
	}
	caller := map[string]*agentState{} // call_id -> the agent that made the call
	for _, it := range flat {
		a := root
		if ref := protocol.AgentOf(it); ref != nil {
			if s := byPath[ref.AgentName]; s != nil {
				a = s
			}
		} else if id, ok := answerID(it); ok && caller[id] != nil {
			a = caller[id]
		}
		if id, ok := callIDOf(it); ok {
			caller[id] = a
		}
		a.own = append(a.own, it)
	}
	for _, s := range subs {
		s.interrupted = interrupted[s.path]
	}
	return root, subs
}

// agentContext is a's context: its beginning (a sub-agent's parent's
// context up to the step that spawned it, forked, then its message), then
// its own items in context order.
func agentContext(a *agentState, byPath map[string]*agentState) protocol.Items {
	if a.built {
		return a.ctx
	}
	a.built = true // a cycle (items naming each other's spawns) ends here
	var items protocol.Items
	if a.parent != "" {
		if a.spawn.ForkTurns == "all" {
			if p := byPath[a.parent]; p != nil {
				items = slices.Clip(forkedAt(agentContext(p, byPath), a))
			}
		}
		items = append(items, spawnMessage(a.spawn.Message))
	}
	a.ctx = append(items, contextOrder(a.own)...)
	return a.ctx
}

// forkedAt is the part of a parent's context a sub-agent forked: up to
// the end of the step whose call spawned it, as the parent's loop had it
// when its tools ran.
func forkedAt(parent protocol.Items, a *agentState) protocol.Items {
	i := slices.IndexFunc(parent, func(it protocol.Item) bool {
		c, ok := it.(*protocol.MultiAgentCall)
		if !ok || c.Action != protocol.ActionSpawnAgent {
			return false
		}
		var args spawnArgs
		return json.Unmarshal([]byte(c.Arguments), &args) == nil && args.TaskName == a.spawn.TaskName
	})
	if i < 0 {
		return nil
	}
	for i < len(parent) && sampled(parent[i]) {
		i++
	}
	return parent[:i]
}

// contextOrder is an agent's own items in the order its context has them:
// each step's results after it in the order of the step's calls, then
// what else came before the next step.
func contextOrder(own protocol.Items) protocol.Items {
	out := make(protocol.Items, 0, len(own))
	var step []string // the call_ids of the last step, in order
	for i := 0; i < len(own); {
		j := i
		if sampled(own[i]) {
			step = nil
			for ; j < len(own) && sampled(own[j]); j++ {
				if id, ok := callIDOf(own[j]); ok {
					step = append(step, id)
				}
			}
			out = append(out, own[i:j]...)
			i = j
			continue
		}
		for j < len(own) && !sampled(own[j]) {
			j++
		}
		run := slices.Clone(own[i:j])
		rank := func(it protocol.Item) int {
			if id, ok := answerID(it); ok {
				if k := slices.Index(step, id); k >= 0 {
					return k
				}
			}
			return len(step)
		}
		slices.SortStableFunc(run, func(a, b protocol.Item) int { return cmp.Compare(rank(a), rank(b)) })
		out = append(out, run...)
		i = j
	}
	return out
}

// place is where an agent's loop stopped, read from its own items.
type place struct {
	answered bool            // its last step made no call: an answer
	ended    bool            // answered, and nothing came after it
	final    string          // the answer's text
	waits    bool            // a call of its last step waits on the client
	owed     []protocol.Call // those calls, in order
	rerun    []protocol.Call // the multi_agent_calls of its last step left open
}

func placeOf(own protocol.Items) place {
	e := len(own) // its last step is own[k:e]
	for e > 0 && !sampled(own[e-1]) {
		e--
	}
	if e == 0 {
		return place{} // it has made nothing yet
	}
	k := e
	for k > 0 && sampled(own[k-1]) {
		k--
	}
	answers := map[string]bool{}
	for _, it := range own[e:] {
		if id, ok := answerID(it); ok {
			answers[id] = true
		}
	}
	var p place
	calls := 0
	for _, it := range own[k:e] {
		id, ok := callIDOf(it)
		if !ok {
			continue
		}
		calls++
		switch c, isAgents := it.(*protocol.MultiAgentCall); {
		case answers[id]:
		case isAgents:
			p.rerun = append(p.rerun, protocol.Call{Type: protocol.ItemMultiAgentCall, ID: c.ID, CallID: c.CallID, Name: c.Action, Input: c.Arguments})
		default:
			p.waits = true
			c, _ := protocol.CallOf(it)
			p.owed = append(p.owed, c)
		}
	}
	p.answered = calls == 0
	p.ended = p.answered && e == len(own)
	for _, it := range slices.Backward(own[k:e]) {
		if m, ok := it.(*protocol.Message); ok && p.answered {
			p.final = m.Content.Text()
			break
		}
	}
	return p
}

// sampled reports whether the model made it (a step's item), not a result
// or a message to the agent.
func sampled(it protocol.Item) bool {
	switch it := it.(type) {
	case *protocol.MultiAgentCallOutput, *protocol.AgentMessage:
		return false
	case *protocol.Message:
		return it.Role == protocol.RoleAssistant
	}
	_, _, ok := protocol.AnswerOf(it)
	return !ok
}

// callIDOf is the call_id of a call item, a multi_agent_call's too.
func callIDOf(it protocol.Item) (string, bool) {
	if c, ok := it.(*protocol.MultiAgentCall); ok {
		return c.CallID, true
	}
	c, ok := protocol.CallOf(it)
	return c.CallID, ok
}

// answerID is the call_id an output answers, a multi_agent_call_output's
// too.
func answerID(it protocol.Item) (string, bool) {
	if o, ok := it.(*protocol.MultiAgentCallOutput); ok {
		return o.CallID, true
	}
	id, _, ok := protocol.AnswerOf(it)
	return id, ok
}

// agentPathOf is the path an item's agent names: the root's when none.
func agentPathOf(ref *protocol.AgentRef) string {
	if ref == nil || ref.AgentName == "" {
		return protocol.RootAgent
	}
	return ref.AgentName
}

// openTree reports whether the rollout is the root of an open tree.
func (r *rollout) openTree() bool { return r.tree != nil && r.tree.open && r.agent == nil }

// transcript is what the response leaves as context for the next: its
// items, or a tree's, every agent's, as rebuild reads them: an open tree's
// flat items and then its whole output; a waiting tree's (one that
// spawned) its flat items and then its log.
func (r *rollout) transcript() protocol.Items {
	switch {
	case r.openTree():
		return append(slices.Clip(r.flat), r.resp.Output...)
	case r.tree != nil && r.agent == nil && r.tree.spawned():
		r.mu.Lock()
		defer r.mu.Unlock()
		return append(slices.Clip(r.flat), r.tree.log...)
	}
	return r.items
}

// rerunCalls runs again the multi_agent_calls the agent left open in an
// earlier response (rollout.rerun), as a step: end reports that they stay
// open, and the loop ends on them again.
func (r *rollout) rerunCalls(ctx context.Context) (end bool, err error) {
	calls := r.rerun
	r.rerun = nil
	r.calls = r.calls[:0]
	for _, c := range calls {
		sc := r.route(&c)
		sc.call, sc.index, sc.pos = c, -1, -1
		r.calls = append(r.calls, sc)
	}
	r.mu.Lock()
	r.stepAt = len(r.resp.Output)
	r.mu.Unlock()
	return r.dispatch(ctx)
}
