package runtime

import (
	"context"
	"maps"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
)

// suspend makes ro a suspended rollout reporting to sess on lane. It
// refuses when the server already holds Suspension.Max of them: each may
// outlive its connection, so they are bounded server-wide. start runs it.
func (s *Server) suspend(ro *rollout, sess *session, lane string) (*suspension, context.Context, *protocol.Error) {
	return s.suspendAt(ro, sess, lane, lifecycle.New(s.opts.Checkpoints != nil, ro.req.MultiAgentEnabled()), 1)
}

// suspendAt is suspend for a rollout whose state begins at st, at epoch:
// one taken over from its checkpoint (lifecycle.Restored) begins at 0, and
// is given the epoch it takes once the store has let it take it.
func (s *Server) suspendAt(ro *rollout, sess *session, lane string, st lifecycle.State, epoch uint64) (*suspension, context.Context, *protocol.Error) {
	sp := &suspension{srv: s, ro: ro, id: ro.ID(), creds: sess.creds, lane: lane, done: newSignal(),
		sess: sess, gone: newSignal(), sent: -1, epoch: epoch, st: st}
	ro.client = sp
	ro.everyDelta = ro.everyDelta || s.opts.Checkpoints != nil
	if ro.tree != nil { // a restored one has none: its sub-agents are not journaled
		ro.tree.open = false // its agents wait on their client's calls in the response
		ro.tree.waitPending()
	}
	if ro.paused != nil { // restored: the calls answered before the pause stay answered, counted by the steps before it
		sp.answered, sp.steps = maps.Clone(ro.paused.Answered), max(ro.paused.ClientSteps-1, 0)
	}
	if perr := s.register(sp); perr != nil {
		return nil, nil, perr
	}
	return sp, sp.gone, nil
}
