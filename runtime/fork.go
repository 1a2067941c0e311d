package runtime

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"
	"github.com/tether-run/tether/runtime/internal/lifecycle"

	"github.com/tether-run/tether/protocol"
)

// Forking a parked suspended rollout (response.fork): the rollout's state
// at its pause (pauseState), taken at once, becomes new rollouts, one per lane named,
// each parked on the same client calls, each answered and run on its own.
// What they share is shared, not copied: the rendered prompt is persistent
// (sampler.Prompt), so every fork's prompt is the original's plus its own
// items, and the model's prefix cache finds the shared prefix cached; the
// items themselves are shared by pointer (a fork copies the list of them,
// a few hundred pointers, and appends its own).

// forkRollout is a fork of the pause ps, a new response on lane created at
// created (Unix seconds): ps restored under a new id, its own suspension
// answering the paused calls.
func (s *Server) forkRollout(ctx context.Context, ps *pauseState, lane string, created int64) (*rollout, *protocol.Error) {
	r, perr := s.restore(ctx, ps, lane)
	if perr != nil {
		return nil, perr
	}
	parent := ps.Response.ID
	r.resp.ID, r.resp.CreatedAt, r.resp.ForkedFrom = ids.New("resp"), created, &parent
	if r.req.Conversation != nil {
		// The parent adds what it and its forks share to its conversation
		// when it ends; a fork adding it again would repeat it there.
		req := *r.req
		req.Conversation = nil
		r.req, r.resp.Conversation = &req, nil
	}
	r.order.seq = 0 // a new response's events
	r.path.State = stateFork
	return r, nil
}

// treeFork is a multi-agent response whose sub-agents ran, as it stands
// when it is forked: its request, and its items (agents.log), every
// agent's, from which a fork builds the tree again.
type treeFork struct {
	req    *protocol.CreateRequest
	items  protocol.Items
	id     string // the response forked
	tenant string
	path   ServePath
}

// treeFork takes the tree's items now for response.fork from sess on
// lane. Its root need not be parked: a tree forks from where its agents
// stand (those running run their step again in the fork, those waiting
// on their client wait there too); the lane and the sender are checked
// as for any fork. The rollout's lock is taken first, as the lock order
// says.
func (sp *suspension) treeFork(sess *session, lane string) (*treeFork, *protocol.Error) {
	sp.ro.mu.Lock()
	defer sp.ro.mu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch v, perr := sp.decideLocked(lifecycle.Fork, sess, lane, ""); v {
	case lifecycle.Allow, lifecycle.RefuseNotParked, lifecycle.RefuseAppended:
	default:
		return nil, cmp.Or(perr, errNoSuspended(sp.id))
	}
	r := sp.ro
	return &treeFork{req: r.req, items: append(slices.Clip(r.flat), r.tree.log...), id: r.resp.ID, tenant: r.tenant, path: r.path}, nil
}

// forkTree is a fork of tf: a new suspended response on lane, created at
// created (Unix seconds), whose tree is built again from tf's items
// (agents.rebuild) and waits on its own client.
func (s *Server) forkTree(tf *treeFork, lane string, created int64) (*rollout, *protocol.Error) {
	req := *tf.req
	req.Input, req.PreviousResponseID, req.Conversation = tf.items, "", nil
	r, perr := s.prepare(WithTenant(context.Background(), tf.tenant), &req, nil, s.now(), protocol.Timings{})
	if perr != nil {
		return nil, perr
	}
	if len(r.tree.rootOwed) > 0 {
		return nil, errForkTree(tf.id)
	}
	r.resp.CreatedAt, r.resp.ForkedFrom = created, &tf.id
	r.tenant, r.lane, r.path, r.routed = tf.tenant, lane, tf.path, true
	r.path.State = stateFork
	return r, nil
}

// fork handles response.fork: it takes the parked rollout's state now and
// puts a fork of it on each lane named, in the lane's turn; each fork is
// refused on its own lane when the lane cannot take it. On WebTransport,
// where a stream is a lane without a stream_id, a response.fork without
// stream_ids forks onto the stream it came on, from a rollout parked on
// another stream of the connection.
func (sess *session) fork(ev *protocol.ForkEvent, received time.Time) *protocol.Error {
	owner, from, lanes := sess, ev.StreamID, ev.StreamIDs // from: the lane the fork is asked on, the rollout's
	var ln *lane
	var occ occupant
	switch {
	case sess.oneLane && len(ev.StreamIDs) > 0:
		return protocol.Invalid(protocol.CodeInvalidStreamID, "stream_ids",
			"On WebTransport a stream is a lane, without a stream_id: send response.fork, without stream_ids, on the stream each fork is to run on.")
	case sess.oneLane:
		owner, ln, occ = sess.scope.find(ev.ResponseID)
		if owner == sess {
			return errForkOwnStream(ev.ResponseID)
		}
		if ln != nil {
			from = ln.id
		}
		lanes = []string{ev.StreamID}
	case len(ev.StreamIDs) == 0:
		return protocol.ErrForkLanes()
	default:
		_, occ = sess.running(ev.ResponseID)
	}
	switch {
	case occ.ro != nil:
		return errNotSuspendedRollout(ev.ResponseID, true)
	case occ.sp == nil:
		return errNoSuspended(ev.ResponseID)
	}
	if t := occ.sp.ro.tree; t != nil && t.spawned() {
		tf, perr := occ.sp.treeFork(owner, from)
		if perr != nil {
			return perr
		}
		for _, id := range lanes {
			sess.admit(id, &forkJob{tree: tf, received: received}, func(ln *lane) *protocol.Error { return ln.queueRefusal(sess, true) })
		}
		return nil
	}
	ps, perr := occ.sp.pause(owner, from)
	if perr != nil {
		return perr
	}
	for _, id := range lanes {
		sess.admit(id, &forkJob{pause: ps, received: received}, func(ln *lane) *protocol.Error { return ln.queueRefusal(sess, true) })
	}
	return nil
}

// forkOn runs a fork job: a new suspended rollout on ln, from the point.
func (sess *session) forkOn(ln *lane, j *forkJob) (last []byte) {
	var ro *rollout
	var perr *protocol.Error
	if j.tree != nil {
		ro, perr = sess.srv.forkTree(j.tree, ln.id, sess.srv.now().Unix())
	} else {
		ro, perr = sess.srv.forkRollout(sess.ctx, j.pause, ln.id, sess.srv.now().Unix())
	}
	if perr != nil {
		return errorFrame(perr, ln.id)
	}
	ro.path.Transport = sess.transport
	ro.onConnection(&sess.scope.mcp)
	ro.start = j.received
	return sess.runSuspended(ln, ro, nil)
}
