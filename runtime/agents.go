package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tether-run/tether/protocol"
)

// This file is a multi-agent response's agent tree (OpenAI's Responses
// multi-agent beta). The root agent is the response's own loop. Each
// sub-agent that spawn_agent starts is a loop of its own: a rollout that
// is not a response, sharing the root's lock, response object and event
// stream, so that its items take their places in the one output and its
// events their numbers in the one sequence, each naming its agent. An
// agent acts on the tree with multi_agent_call items, which the tree runs
// as a hosted tool (agents_tool.go).
//
// A tree has two forms. Over WebSocket the response waits: a sub-agent's
// client calls wait for their outputs as the root's do, its loop parked,
// and an inject routes each output by call_id to the agent waiting on it
// (agents.accept). Over HTTP (open) every agent leaves its client calls
// open, and the response completes once every agent has ended or waits on
// them; a continuation, chained or replayed, builds the tree again from
// its items (agents_http.go).
//
// A waiting tree's items, every agent's, join its log as they are done
// (agents.log); a fork builds the tree again from them, as a continuation
// does from its request's (fork.go's treeFork), and a durable server's
// journal whenever the tree is at rest (agents_durable.go). A sub-agent's
// client calls are bounded by Suspension.Timeout over WebSocket, as a
// pause is.

// defaultSubagents is max_concurrent_subagents when the request leaves it out.
const defaultSubagents = 3

// agents is a multi-agent response's sub-agents. Its lock is a leaf:
// nothing else is locked while it is held.
type agents struct {
	root *rollout
	max  int
	// open: served over HTTP, the agents leave their client calls open
	// (openCalls) and wait for them in the next request. Set before the
	// root runs.
	open bool

	mu      sync.Mutex
	byPath  map[string]*subAgent
	order   []*subAgent          // in spawn order
	waiting map[string]*subAgent // call_id -> the sub-agent whose step waits for its output
	// early holds the outputs of sub-agents' client calls that came
	// before their step waited on them (a beta client answers a call once
	// its output_item.done is out, which may be before its step's end):
	// the step's wait takes them. At most maxEarly.
	early   map[string]protocol.Item
	pending []pendingAgent // what rebuild found to go on, until the root starts them
	// rootOwed are the client calls of the root's last step that rebuild
	// found with no output: a fork of a tree whose root waits on its
	// client is refused.
	rootOwed []protocol.Call
	// log is every agent's items, in the order they were done, and the
	// outputs and messages the client sent, in the order they were taken:
	// with the root's items before its output (rollout.flat), what
	// rebuild builds the tree again from (a fork's, a takeover's). Guarded
	// by root.mu.
	log protocol.Items
	// starting are the sub-agents a spawn_agent call made, by its call_id,
	// until the call's item joins log (loggedLocked): a sub-agent
	// starts only then, so that no item of its joins the log before the
	// spawn that made it, and the log holds a tree a fork can build again
	// at any moment. Guarded by root.mu.
	starting map[string]*subAgent
	// blocked counts each agent's wait_agent calls waiting now, and
	// waitCalls names them (call_id); taken is how much of log the tree's
	// last journaled state held, -1 when a state could not be written and
	// the next rest is to be (see agents_durable.go). Guarded by mu.
	blocked   map[*rollout]int
	waitCalls map[string]bool
	taken     int
	// rootWaits, when set, is closed as the root first waits on its
	// sub-agents: a tree taken over from its journal is running again.
	rootWaits chan struct{}
}

// subAgent is one sub-agent: its loop, its client calls, how it ended.
type subAgent struct {
	path  string
	cost  int64           // what its spawn took from the server's memory budget, given back at its end
	ro    *rollout        // nil for one a continuation found ended or waiting (agents_http.go): it does not run
	ctx   protocol.Items  // such a one's context, for a followup_task, or to go on from once its outputs come
	owed  []protocol.Call // the client calls such a one waits on, in order (a waiting tree rebuilt: agents_http.go)
	later protocol.Items  // what was sent it meanwhile, for its context after the outputs
	prior *subAgent       // the agent's earlier run, a followup_task's: its usage counts too
	calls *agentCalls     // nil in an open tree
	done  chan struct{}   // closed when its loop has ended

	// Set when done closes.
	status string // completed, failed, interrupted; waiting (open trees: it left client calls open)
	final  string // its last message's text
}

// Statuses of a sub-agent, besides a response's completed and failed.
const (
	agentInterrupted = "interrupted"
	agentWaiting     = "waiting" // its loop ended on client calls left open (an open tree)
	agentRunning     = "running"
)

// live reports whether the sub-agent counts against
// max_concurrent_subagents: it runs, or waits on its client. The caller
// holds t.mu or knows done closed.
func (sa *subAgent) live() bool {
	select {
	case <-sa.done:
		return sa.status == agentWaiting
	default:
		return true
	}
}

// statusOf is how sa ended; sa has ended.
func (t *agents) statusOf(sa *subAgent) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sa.status
}

// interrupt ends sa's loop, if it runs, or its wait, if it waits with no
// loop yet (a waiting tree rebuilt), and waits for its end or ctx's.
func (t *agents) interrupt(sa *subAgent, ctx context.Context) {
	t.mu.Lock()
	ro, waiting := sa.ro, sa.ro == nil && sa.owed != nil
	if waiting {
		for id, w := range t.waiting {
			if w == sa {
				delete(t.waiting, id)
			}
		}
		sa.owed, sa.status = nil, agentInterrupted
	}
	t.mu.Unlock()
	switch {
	case ro != nil:
		ro.abort(errInterrupted) // a parked loop is driven on, to its end
	case waiting:
		close(sa.done)
	}
	select {
	case <-sa.done:
	case <-ctx.Done():
	}
}

// newAgents is root's tree, open (served over HTTP) until a suspension
// makes it wait.
func newAgents(root *rollout) *agents {
	max := defaultSubagents
	if m := root.req.MultiAgent; m != nil && m.MaxConcurrentSubagents != nil {
		max = *m.MaxConcurrentSubagents
	}
	return &agents{root: root, max: max, open: true, byPath: map[string]*subAgent{}, waiting: map[string]*subAgent{}}
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
// items name none), on the item types that carry it (protocol.AgentOf).
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
	case *protocol.MCPCall:
		it.Agent = agent
	case *protocol.MCPApprovalRequest:
		it.Agent = agent
	case *protocol.Reasoning:
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

// childrenLive reports whether a sub-agent that the agent at path spawned
// runs or waits on its client.
func (t *agents) childrenLive(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sa := range t.order {
		if parent := sa.path[:strings.LastIndexByte(sa.path, '/')]; parent == path && sa.live() {
			return true
		}
	}
	return false
}

// end ends the tree with its response, and returns the usage of its
// sub-agents' steps and each agent's sampling time while none of its own
// sub-agents ran (of those that sampled in this response, the root's
// too): with each agent's tool time, a client finds the tree's critical
// path, which the rest of its sampling is off. When the root's loop ended on calls left open (open
// trees), the response ends once every sub-agent has ended or waits on
// its client too; otherwise every sub-agent still running is interrupted.
func (t *agents) end(rootOpen bool) (usage protocol.Usage, sample map[string]int64) {
	t.mu.Lock()
	subs := slices.Clone(t.order)
	t.mu.Unlock()
	for _, sa := range subs {
		if rootOpen && t.open {
			<-sa.done
		} else {
			t.interrupt(sa, context.Background())
		}
		for run := sa; run != nil; run = run.prior {
			if run.ro == nil {
				continue
			}
			usage.Add(run.ro.usage)
			if us := run.ro.soloSample.Microseconds(); us > 0 {
				if sample == nil {
					sample = map[string]int64{}
				}
				sample[sa.path] += us
			}
		}
	}
	if us := t.root.soloSample.Microseconds(); sample != nil && us > 0 {
		sample[protocol.RootAgent] = us
	}
	return usage, sample
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
// goOn runs on each agent that has all its outputs. It reports whether
// they were the tree's; nothing is taken when they were not all.
func (t *agents) accept(items protocol.Items) (goOn func(), ok bool) {
	t.mu.Lock()
	var to []*subAgent
	for _, it := range items {
		callID, _, ok := protocol.AnswerOf(it)
		switch {
		case !ok:
		case t.waiting[callID] != nil:
			to = append(to, t.waiting[callID])
			continue
		case t.early[callID] == nil && len(t.early) < maxEarly && t.subAgentCallLocked(callID):
			to = append(to, nil) // its step is not waiting on it yet
			continue
		}
		t.mu.Unlock()
		return nil, false
	}
	var ready []*subAgent
	for i, it := range items {
		callID, _, _ := protocol.AnswerOf(it)
		if to[i] == nil {
			if t.early == nil {
				t.early = map[string]protocol.Item{}
			}
			t.early[callID] = it
			continue
		}
		delete(t.waiting, callID)
		a := to[i].calls
		a.outputs[callID] = it
		if len(a.outputs) == len(a.pending) && !slices.Contains(ready, to[i]) {
			ready = append(ready, to[i])
		}
	}
	t.mu.Unlock()
	return func() {
		// A rebuilt waiting agent's loop is made now: until then the tree
		// may be journaled at rest with the outputs in its log.
		var starts []*subAgent
		t.mu.Lock()
		for _, sa := range ready {
			if sa.ro == nil && sa.owed != nil { // rebuilt waiting, not interrupted meanwhile
				t.resumeWaitingLocked(sa, sa.calls.outputs)
				starts = append(starts, sa)
			}
		}
		t.mu.Unlock()
		for _, sa := range ready {
			switch {
			case slices.Contains(starts, sa):
				t.start(sa)
			case sa.ro != nil:
				sa.ro.kick()
			}
		}
	}, true
}

// subAgentCallLocked reports whether a sub-agent made the client call
// callID, its item in the output. The caller holds the root's lock and
// t.mu.
func (t *agents) subAgentCallLocked(callID string) bool {
	for _, it := range t.root.resp.Output {
		if c, ok := protocol.CallOf(it); ok && c.CallID == callID {
			_, multi := it.(*protocol.MultiAgentCall)
			return !multi && protocol.AgentOf(it) != nil
		}
	}
	return false
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
