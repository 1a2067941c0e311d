package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/ids"
)

// This file is what an agent of a multi-agent response's tree does with
// it (agents.go): its client calls, which park it until their outputs
// come (agentCalls), and its multi_agent_call items, which the tree runs
// (agentTool).

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
			if it, ok := t.early[c.CallID]; ok { // answered as its output_item.done came
				a.outputs[c.CallID] = it
				delete(t.early, c.CallID)
				continue
			}
			t.waiting[c.CallID] = a.agent
		}
		// Bounded as a pause is: the agent fails, and whoever waits on
		// it learns so.
		if wait := t.root.srv.opts.Suspension.Timeout; wait > 0 {
			// Held weakly: a timer stopped as the agent's calls are answered
			// must not keep its rollout alive (afterFunc); the tree holds
			// it while it waits.
			a.timer = afterFunc(wait, a.agent.ro, func(ro *rollout) { ro.abort(errToolTimeout) })
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
		t.checkpoint() // the tree may be at rest now: its wait journaled before its client sees more
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
// its inbox, taken after the step's results. A wait in an open tree on an
// agent that waits on its client stays open: no output (nil), and the
// caller's loop ends on it, to run it again in the next request.
func (at agentTool) Call(ctx context.Context, call protocol.Call, _ func(protocol.Event)) (protocol.Item, error) {
	text, messages, open := at.run(ctx, call)
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if open {
		return nil, nil
	}
	out := &protocol.MultiAgentCallOutput{CallID: call.CallID, Action: call.Name,
		Output: protocol.Contents{&protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}}, Agent: at.caller.agent}
	r := at.caller
	r.mu.Lock()
	r.showLocked(out)
	for _, m := range messages {
		r.showLocked(m)
	}
	r.mu.Unlock()
	r.inbox.add(messages...)
	return out, nil
}

// showLocked places an item a multi_agent_call gave in the output, done
// at once.
func (r *rollout) showLocked(it protocol.Item) {
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

// run runs the action: its output's text and the messages it brings, or
// open: a wait that stays open (see Call).
func (at agentTool) run(ctx context.Context, call protocol.Call) (text string, messages protocol.Items, open bool) {
	failed := func(format string, args ...any) (string, protocol.Items, bool) {
		b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(format, args...)})
		return string(b), nil, false
	}
	ok := func(v any) (string, protocol.Items, bool) {
		b, _ := json.Marshal(v)
		return string(b), nil, false
	}
	t := at.tree
	if t == nil {
		return failed("this response has no agent tree: it was restored from a journal, which does not keep one")
	}
	var args struct {
		spawnArgs
		Targets []string `json:"targets"`
		Target  string   `json:"target"`
	}
	if call.Input != "" && json.Unmarshal([]byte(call.Input), &args) != nil {
		return failed("the arguments are not a JSON object")
	}
	switch call.Name {
	case protocol.ActionSpawnAgent:
		sa, err := t.spawn(at.caller, args.spawnArgs, call.CallID)
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
		t.enterWait(at.caller, call.CallID)
		defer t.leaveWait(at.caller, call.CallID)
		for _, sa := range subs {
			select {
			case <-sa.done:
			case <-ctx.Done():
				return "", nil, false
			}
			st := t.statusOf(sa)
			if st == agentWaiting {
				open = true
			}
			status[sa.path] = st
			messages = append(messages, &protocol.AgentMessage{Author: sa.path, Recipient: at.caller.agentPath(),
				Content: protocol.Contents{&protocol.OutputText{Text: sa.final, Annotations: []protocol.Annotation{}}}, Agent: at.caller.agent})
		}
		if open {
			return "", nil, true
		}
		text, _, _ := ok(map[string]any{"status": status})
		return text, messages, false
	case protocol.ActionSendMessage, protocol.ActionFollowupTask:
		subs, err := t.find(at.caller, []string{args.Target})
		if err != nil {
			return failed("%v", err)
		}
		sa := subs[0]
		if !sa.live() && call.Name == protocol.ActionSendMessage {
			return failed("%s has ended", sa.path)
		}
		// In the output, and so in the items an open tree is built again
		// from, as the recipient's; into its context after its step.
		m := &protocol.AgentMessage{Author: at.caller.agentPath(), Recipient: sa.path,
			Content: protocol.Contents{&protocol.OutputText{Text: args.Message, Annotations: []protocol.Annotation{}}}, Agent: &protocol.AgentRef{AgentName: sa.path}}
		if !sa.live() { // followup_task: the agent runs again, from its context and the message
			next, err := t.followup(sa, m, args.Message)
			if err != nil {
				return failed("%v", err)
			}
			at.caller.mu.Lock()
			at.caller.showLocked(m) // before its run's items, as its context has it
			at.caller.mu.Unlock()
			t.start(next)
			return ok(map[string]string{"restarted": sa.path})
		}
		at.caller.mu.Lock()
		at.caller.showLocked(m)
		at.caller.mu.Unlock()
		t.mu.Lock()
		ro := sa.ro
		if ro == nil && sa.owed != nil { // a waiting tree rebuilt: after its outputs, when its loop starts
			sa.later = append(sa.later, m)
		}
		t.mu.Unlock()
		if ro != nil {
			ro.inbox.add(m)
		}
		return ok(map[string]string{"delivered": sa.path})
	case protocol.ActionListAgents:
		t.mu.Lock()
		list := make([]map[string]string, 0, len(t.order))
		for _, sa := range t.order {
			st := sa.status
			select {
			case <-sa.done:
			default:
				st = agentRunning
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
		if t.interrupt(subs[0], ctx); ctx.Err() != nil {
			return "", nil, false
		}
		t.mu.Lock()
		if subs[0].status == agentWaiting { // an open tree's: its calls are let go
			subs[0].status = agentInterrupted
		}
		t.mu.Unlock()
		return ok(map[string]string{"interrupted": subs[0].path})
	}
	return failed("%s is not served", call.Name)
}
