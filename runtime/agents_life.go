package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// This file is a sub-agent's life in its tree (agents.go): spawned by a
// spawn_agent call and started once that call is in the tree's log, its
// loop driven until it ends or parks on its client, given a followup
// task, ended.

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	TaskName  string `json:"task_name"`
	Message   string `json:"message"`
	ForkTurns string `json:"fork_turns"`
}

// spawn makes a sub-agent of caller from args, for the spawn_agent call
// callID: its context the caller's (fork_turns "all", shared
// copy-on-write) or nothing, then its message. It starts once the call's
// item joins the tree's log (see agents.starting).
func (t *agents) spawn(caller *rollout, args spawnArgs, callID string) (*subAgent, error) {
	switch {
	case args.TaskName == "" || strings.ContainsAny(args.TaskName, "/ "):
		return nil, fmt.Errorf("task_name %q: want a name without '/' or spaces", args.TaskName)
	case args.ForkTurns != "" && args.ForkTurns != "all" && args.ForkTurns != "none":
		return nil, fmt.Errorf("fork_turns %q: want \"all\" or \"none\"", args.ForkTurns)
	}
	var items protocol.Items
	if args.ForkTurns == "all" {
		t.root.mu.Lock() // the caller's tool goroutines may write its context's slots
		items = slices.Clip(caller.items)
		t.root.mu.Unlock()
	}
	// Its own state, as a request's: the message it starts from, its
	// context's growth (a forked context is shared, not copied).
	sa := &subAgent{path: caller.agentPath() + "/" + args.TaskName, cost: requestCost(len(args.Message)), done: make(chan struct{})}
	mem := t.root.srv.mem
	if perr := mem.Charge(sa.cost); perr != nil {
		return nil, fmt.Errorf("no room for another agent: %s", perr.Message)
	}
	t.newLoop(sa, append(items, spawnMessage(args.Message)))

	// Whole before the tree has it: another agent may name it at once.
	t.mu.Lock()
	if err := t.addLocked(sa); err != nil {
		t.mu.Unlock()
		mem.Refund(sa.cost)
		return nil, err
	}
	t.mu.Unlock()
	t.root.mu.Lock()
	if t.starting == nil {
		t.starting = map[string]*subAgent{}
	}
	t.starting[callID] = sa
	t.root.mu.Unlock()
	return sa, nil
}

// loggedLocked notes that it joined the tree's log: a spawn_agent call's
// item starts the sub-agent it made (agents.starting). The caller holds
// root.mu.
func (t *agents) loggedLocked(it protocol.Item) {
	if c, ok := it.(*protocol.MultiAgentCall); ok {
		if sa := t.starting[c.CallID]; sa != nil {
			delete(t.starting, c.CallID)
			t.start(sa)
		}
	}
}

// spawnMessage is the user message a sub-agent starts from.
func spawnMessage(text string) protocol.Item {
	m := &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}
	ids.NameInputs(protocol.Items{m})
	return m
}

// newLoop makes sa's loop, whose context is items, not started.
func (t *agents) newLoop(sa *subAgent, items protocol.Items) {
	root := t.root
	sub := &rollout{srv: root.srv, req: root.req, model: root.model, lane: root.lane, tenant: root.tenant, path: root.path, routed: true,
		start: root.srv.now(), everyDelta: root.everyDelta, logprobs: root.logprobs, topLogprobs: root.topLogprobs,
		header: root.header, hosted: root.hosted, mcp: root.mcp, tools: root.tools,
		mu: root.mu, resp: root.resp, order: eventOrder{eventStream: root.order.eventStream},
		tree: t, agent: &protocol.AgentRef{AgentName: sa.path}, items: items}
	sub.renderPending()
	sa.ro = sub
	if t.open {
		sub.client = openCalls{}
		return
	}
	sa.calls = &agentCalls{tree: t, agent: sa}
	sub.client = sa.calls
	sub.driveOn = func() { go t.drive(sa, sub.resume) }
}

// addLocked adds sa to the tree, unless its path is taken or the tree has
// max_concurrent_subagents live already.
func (t *agents) addLocked(sa *subAgent) error {
	switch {
	case t.byPath[sa.path] != nil:
		return fmt.Errorf("an agent %s exists already", sa.path)
	case t.liveLocked() >= t.max:
		return fmt.Errorf("%d sub-agents run already, max_concurrent_subagents", t.max)
	}
	t.byPath[sa.path] = sa
	t.order = append(t.order, sa)
	return nil
}

// liveLocked is how many sub-agents count against
// max_concurrent_subagents. The caller holds t.mu.
func (t *agents) liveLocked() int {
	live := 0
	for _, o := range t.order {
		if o.live() {
			live++
		}
	}
	return live
}

// followup gives sa, which has ended, a new task: a run of its own again,
// from its context and then m, in sa's place in the tree, which start
// starts. It counts against max_concurrent_subagents, as a spawn does.
func (t *agents) followup(sa *subAgent, m protocol.Item, text string) (*subAgent, error) {
	ctx := sa.ctx
	if sa.ro != nil {
		ctx = sa.ro.items // its loop has ended: the items are still
	}
	next := &subAgent{path: sa.path, cost: requestCost(len(text)), done: make(chan struct{}), prior: sa}
	mem := t.root.srv.mem
	if perr := mem.Charge(next.cost); perr != nil {
		return nil, fmt.Errorf("no room for another run of %s: %s", sa.path, perr.Message)
	}
	t.newLoop(next, append(slices.Clip(ctx), m))
	t.mu.Lock()
	live, i := t.liveLocked(), slices.Index(t.order, sa)
	if live >= t.max || i < 0 {
		t.mu.Unlock()
		mem.Refund(next.cost)
		if i < 0 {
			return nil, fmt.Errorf("%s was given a task meanwhile", sa.path)
		}
		return nil, fmt.Errorf("%d sub-agents run already, max_concurrent_subagents", t.max)
	}
	t.order[i], t.byPath[sa.path] = next, next
	t.mu.Unlock()
	return next, nil
}

// start runs a sub-agent's loop, on a goroutine of its own.
func (t *agents) start(sa *subAgent) {
	go t.drive(sa, func() (*conversation, error) { return sa.ro.run(t.root.ctx, nil) })
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
		status = agentInterrupted
	case err != nil:
		status = string(protocol.ResponseFailed)
	case r.leftOpen:
		status = agentWaiting
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
	if sa.calls != nil && sa.calls.timer != nil {
		sa.calls.timer.Stop()
	}
	sa.status, sa.final = status, final
	t.mu.Unlock()
	t.root.srv.mem.Refund(sa.cost)
	close(sa.done)
}
