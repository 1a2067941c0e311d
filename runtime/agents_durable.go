package runtime

import (
	"cmp"
	"context"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// This file is a waiting tree's journal (agents.go). A durable server
// journals a multi-agent response whose sub-agents ran whenever its tree is
// at rest: every live agent waits, a sub-agent on its client's calls (or
// has all its outputs, its loop not yet gone on), an agent on its own
// sub-agents (wait_agent), and the root is one of the latter. The state is
// what a fork of the tree takes (treeFork): every agent's items, flat, as
// a continuation brings them, from which agents.rebuild builds the tree
// again, as a pauseState marked Tree, written as a pause's is (a snapshot,
// then step entries of the items and output it adds). So a tree is at rest
// in its journal when its client has seen its calls: an agent's wait is
// written before anything after it goes out (the frames are held, as an
// answer's write holds its step's), and an inject that answers a wait of
// a tree at rest is written, with the items it brings, before its
// response.inject.created goes out (one taken while an agent runs joins
// the state of the next rest). A server that takes the response over
// builds the tree again from the state (takeoverTree): its agents wait
// where they waited, its root in wait_agent again, and the outputs its
// client sends go on from there.
//
// Not journaled: a frame of the tree that went out before its state (a
// client resuming with an earlier sequence_number is not sent them
// again), and a pause of the root on its own client's calls once it has
// spawned (the tree's last rest stays the checkpoint; its steps after it
// run again on the server that takes it over).

// enterWait counts agent r into the tree's wait_agent callers, its call
// callID, and journals the tree if that puts it at rest.
func (t *agents) enterWait(r *rollout, callID string) {
	t.mu.Lock()
	if t.blocked == nil {
		t.blocked, t.waitCalls = map[*rollout]int{}, map[string]bool{}
	}
	t.blocked[r]++
	t.waitCalls[callID] = true
	if r == t.root && t.rootWaits != nil {
		close(t.rootWaits) // taken over: running again
		t.rootWaits = nil
	}
	t.mu.Unlock()
	t.checkpoint()
}

// leaveWait counts r's wait_agent call callID out.
func (t *agents) leaveWait(r *rollout, callID string) {
	t.mu.Lock()
	if t.blocked[r]--; t.blocked[r] == 0 {
		delete(t.blocked, r)
	}
	delete(t.waitCalls, callID)
	t.mu.Unlock()
}

// atRestLocked reports whether every live agent of the tree waits (see
// the file's comment) and one of them on its client. The caller holds
// t.mu.
func (t *agents) atRestLocked() bool {
	if t.blocked[t.root] == 0 {
		return false
	}
	onClient := false
	for _, sa := range t.order {
		if !sa.live() {
			continue
		}
		switch {
		case sa.calls != nil && sa.calls.asked:
			onClient = true
		case sa.ro == nil || t.blocked[sa.ro] == 0:
			return false // running
		}
	}
	return onClient
}

// checkpoint journals the tree when it is at rest and has changed since
// its last state was taken.
func (t *agents) checkpoint() {
	r := t.root
	sp, ok := r.client.(*suspension)
	if !ok {
		return // served over HTTP
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.checkpointLocked(sp)
}

// checkpointLocked is checkpoint, the caller holding the root's lock.
func (t *agents) checkpointLocked(sp *suspension) {
	if t.open || sp.srv.opts.Checkpoints == nil {
		return
	}
	ps := t.restStateLocked()
	if ps == nil {
		return
	}
	sp.mu.Lock()
	started := sp.checkpointTreeLocked(ps)
	sp.mu.Unlock()
	if !started { // another write holds the frames: the next rest is written
		t.mu.Lock()
		t.taken = -1
		t.mu.Unlock()
	}
}

// restStateLocked is the tree's state when it is at rest and has changed
// since its last state was taken; nil otherwise. The caller holds the
// root's lock.
func (t *agents) restStateLocked() *pauseState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.atRestLocked() || len(t.log) == t.taken {
		return nil
	}
	t.taken = len(t.log)
	return t.stateLocked()
}

// stateLocked is the tree's state now: the root's request and response,
// every agent's items, the calls its sub-agents wait on. The caller holds
// the root's lock and t.mu.
func (t *agents) stateLocked() *pauseState {
	r := t.root
	resp := *r.resp
	resp.Output = slices.Clip(r.resp.Output)
	resp.DropEcho()
	items := append(slices.Clip(r.flat), t.log...)
	// A wait_agent call's item is done once its wait is: the waits under
	// way join the items as they stand in the output, without their
	// outputs, for rebuild to run them again rather than their steps.
	for _, it := range r.resp.Output {
		if c, ok := it.(*protocol.MultiAgentCall); ok && t.waitCalls[c.CallID] && !slices.Contains(items, it) {
			items = append(items, it)
		}
	}
	usage := r.usage
	for _, sa := range t.order {
		for run := sa; run != nil; run = run.prior {
			if run.ro != nil {
				usage.Add(run.ro.usage)
			}
		}
	}
	ps := &pauseState{Version: pauseVersion, Request: r.req, Response: &resp, Tenant: r.tenant, Lane: r.lane,
		Items: slices.Clip(items), Tools: r.tools,
		pauseLoop: pauseLoop{Path: r.path, Usage: usage, Steps: r.steps, StepAt: len(resp.Output), Seq: r.order.seq, Tree: true}}
	for label, s := range r.mcp {
		if s.tools != nil {
			if ps.MCPTools == nil {
				ps.MCPTools = map[string][]protocol.MCPToolInfo{}
			}
			ps.MCPTools[label] = s.tools
		}
	}
	for id := range t.waiting {
		pos := slices.IndexFunc(items, func(it protocol.Item) bool { c, ok := protocol.CallOf(it); return ok && c.CallID == id })
		idx := slices.IndexFunc(resp.Output, func(it protocol.Item) bool { c, ok := protocol.CallOf(it); return ok && c.CallID == id })
		if pos < 0 || idx < 0 {
			continue // not in the output: a call of the tree's input
		}
		c, _ := protocol.CallOf(items[pos])
		ps.Calls = append(ps.Calls, pausedCall{Type: c.Type, ID: c.ID, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace,
			Input: c.Input, Status: c.Status, Index: idx, Pos: pos, Client: true})
	}
	slices.SortFunc(ps.Calls, func(a, b pausedCall) int { return cmp.Compare(a.Index, b.Index) })
	return ps
}

// checkpointTreeLocked starts journaling the tree's state ps: what the
// response sends from then on waits for the write. A write of the tree
// still in flight has ps follow it (treeNext). It reports false when
// another write holds the frames, or the rollout takes none. The caller
// holds the root's lock and the suspension's.
func (sp *suspension) checkpointTreeLocked(ps *pauseState) bool {
	cps := sp.srv.opts.Checkpoints
	if sp.writingTree {
		sp.treeNext = ps
		return true
	}
	if v, _ := lifecycle.Decide(sp.st, lifecycle.Hold, lifecycle.Sender{}); v != lifecycle.Allow {
		return false
	}
	ps.Creds = sp.creds
	sp.applyLocked(lifecycle.Hold, nil, "", "")
	sp.heldFrom, sp.writingTree = ps.Seq, true
	if sp.treeWritten == nil {
		sp.treeWritten = make(chan struct{}) // the rollout's end waits for it: the frames held go out first
	}
	sp.srv.wg.Add(1)
	go sp.writeTree(cps, sp.journal, ps, sp.epoch)
	return true
}

// writeTree journals the tree's state ps, then lets what waited for it
// go, or writes the state taken meanwhile (treeNext) first. A store that
// says another server has the response now stops it here.
func (sp *suspension) writeTree(cps Checkpoints, jr journal, ps *pauseState, epoch uint64) {
	defer sp.srv.wg.Done()
	err := sp.writeJournal(cps, &jr, nil, ps, nil, sp.srv.now(), epoch)
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.writingTree = false
	defer func() {
		if !sp.writingTree { // none follows
			close(sp.treeWritten)
			sp.treeWritten = nil
		}
	}()
	if sp.landedLocked(jr, err, "agent tree") {
		return
	}
	if next := sp.treeNext; next != nil {
		sp.treeNext = nil
		sp.sendUpToLocked(next.Seq)
		if sp.checkpointTreeLocked(next) {
			return
		}
	}
	sp.sendHeldLocked()
}

// sendUpToLocked sends its client the frames held before seq, the rest
// held on.
func (sp *suspension) sendUpToLocked(seq int) {
	if sp.sess == nil || sp.st.Replaying() {
		return
	}
	for _, f := range sp.log {
		if f.seq >= seq {
			break
		}
		if f.seq > sp.sent && sp.sess.send(f.b, nil) == nil {
			sp.sent = f.seq
		}
	}
}

// restoreTree builds the tree of ps again as a rollout of s's on lane, as
// a continuation would from its items (agents.rebuild), under the
// response's own id, its output and sequence numbers going on: its agents
// wait where they waited, on their client's calls or on their own
// sub-agents.
func (s *Server) restoreTree(ps *pauseState, lane string) (*rollout, *protocol.Error) {
	req := *ps.Request
	req.Input, req.PreviousResponseID, req.Conversation = ps.Items, "", nil
	r, perr := s.prepare(WithTenant(context.Background(), ps.Tenant), &req, nil, s.now(), protocol.Timings{})
	if perr != nil {
		return nil, perr
	}
	if r.tree == nil || len(r.tree.rootOwed) > 0 {
		return nil, errNoSuspended(ps.Response.ID) // a root that waits on its own client is not journaled as a tree
	}
	r.req = ps.Request // the response's own, which its next state keeps
	resp := *ps.Response
	resp.Status, resp.RequiredAction, resp.OutputOffset = protocol.ResponseInProgress, nil, nil
	r.resp = &resp
	r.own = make([]int, len(resp.Output))
	for i := range r.own {
		r.own[i] = i
	}
	r.order.doneNext, r.order.seq = len(r.own), ps.Seq
	r.usage, r.steps = ps.Usage, ps.Steps
	r.tenant, r.lane, r.path, r.routed = ps.Tenant, lane, ps.Path, true
	r.tree.rootWaits = make(chan struct{})
	return r, nil
}

// takeoverTree is a takeover (session_takeover.go) of a tree its journal
// has at rest: the tree built again here (restoreTree), the response
// taken from the server that held it, and its root run until it waits on
// its sub-agents again. Then a wake's events go to it (their outputs to
// the agents waiting on them), or a resuming client catches up: the
// tree's frames are not journaled, so a client has every frame up to the
// state's, and nothing after it is sent again. It reports settled once a
// wake's events are the rollout's.
func (sess *session) takeoverTree(ln *lane, j *takeoverJob, jn *Journal, lc *loadedCheckpoint) (last []byte, settled bool) {
	ps := lc.pause
	ro, perr := sess.srv.restoreTree(ps, ln.id)
	if perr == nil {
		perr = ro.holdContext() // the root's; each sub-agent's loop charges its own as it steps
	}
	if perr != nil {
		return sess.wakeFailed(ln, j, perr), false
	}
	ro.moved = true
	ro.path.Transport = sess.transport
	ro.onConnection(&sess.scope.mcp)
	ro.start = j.received
	sp, gone, perr := sess.srv.suspendAt(ro, sess, ln.id, lifecycle.Restored(false, j.wake, true), 0)
	if perr != nil {
		ro.held.letGo(sess.srv.mem)
		return sess.wakeFailed(ln, j, perr), false
	}
	ctx, cancel := context.WithTimeout(sess.ctx, checkpointTimeout)
	defer cancel()
	if err := sess.srv.opts.Checkpoints.Take(ctx, sess.tenant, j.id, jn.Epoch, sess.srv.leases.lease); err != nil {
		ro.held.letGo(sess.srv.mem)
		sess.srv.unregister(sp)
		return sess.wakeFailed(ln, j, sess.takeoverError(j, err)), false
	}
	sess.srv.leases.held() // its state began leased
	sp.mu.Lock()
	sp.epoch, sp.journal, sp.paused, sp.sent = jn.Epoch+1, lc.journal, true, ps.Seq-1
	sp.mu.Unlock()
	var wakes []*wakeEvent
	if j.wake {
		wakes = sess.wakeEvents(ln) // those to come wait for finishTreeWake
	} else {
		sess.setRunning(ln, nil, sp)
	}
	rootWaits := ro.tree.rootWaits
	sp.start()
	select { // its root waits on its sub-agents again, at once
	case <-rootWaits:
	case <-sp.done.Done():
	case <-sess.ctx.Done():
		if j.wake {
			sp.detach(sess)
			sp.wakeDone()
		}
		return nil, false
	}
	if j.wake {
		take := func(wakes []*wakeEvent) { sp.takeWakes(sess, ln.id, wakes) }
		take(wakes)
		sess.finishWake(ln, sp, wakes, take)
		return sess.follow(ln, sp, gone, nil), true
	}
	from := ps.Seq - 1
	if j.after != nil {
		from = *j.after
	}
	sp.replay(sess.ctx, sess, from)
	sess.resumed(ln)
	return sess.follow(ln, sp, gone, nil), false
}

// takeWakes gives the tree sp, woken on ln, the events of its wake, in
// order, each one's refusal written on it: their outputs go to the
// agents waiting on them.
func (sp *suspension) takeWakes(sess *session, lane string, wakes []*wakeEvent) {
	for _, w := range wakes {
		if w.cancel || w.deadline {
			sp.mu.Lock()
			sp.acceptWakeLocked(w)
			sp.mu.Unlock()
			continue
		}
		ev := w.inject
		if ev == nil {
			ev = &protocol.AppendEvent{ResponseID: sp.id, StreamID: lane, Input: w.items}
		}
		_, w.refused = sp.deliver(sess, ev, w.size)
	}
}
