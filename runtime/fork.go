package runtime

import (
	"context"
	"slices"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Forking a parked suspended rollout (response.fork): the rollout's state
// at its pause, taken at once, becomes new rollouts, one per lane named,
// each parked on the same client calls, each answered and run on its own.
// What they share is shared, not copied: the rendered prompt is persistent
// (sampler.Prompt), so every fork's prompt is the original's plus its own
// items, and the model's prefix cache finds the shared prefix cached; the
// items themselves are shared by pointer (a fork copies the list of them,
// a few hundred pointers, and appends its own).

// forkPoint is a parked rollout's state at its pause: what a fork starts
// from. It is immutable once taken; every fork of it copies what it will
// change.
type forkPoint struct {
	from         *rollout // its fields set by prepare, which never change
	items        protocol.Items
	prompt       *sampler.Prompt
	rendered     int
	usage        protocol.Usage
	steps        int
	stepAt       int
	approvedFrom int
	calls        []stepCall
	results      []protocol.Item // the hosted calls' results; the client's calls are nil
	resp         protocol.Response
}

// forkPoint takes the rollout's state at its pause. The caller holds the
// suspension's lock, having checked that the rollout is parked, and the
// rollout's (the loop waits in park, and the step's hosted calls, which
// write under it, must all be done).
func (r *rollout) forkPointLocked() (*forkPoint, *protocol.Error) {
	for i, c := range r.calls {
		if _, ok := c.tool.(parker); !ok && !r.settled[i] {
			return nil, errForkHostedRunning(r.resp.ID, c.call.Name)
		}
	}
	fp := &forkPoint{from: r, items: slices.Clip(r.items), prompt: r.prompt, rendered: r.rendered, usage: r.usage,
		steps: r.steps, stepAt: r.stepAt, approvedFrom: r.approvedFrom, results: slices.Clone(r.results), resp: *r.resp}
	fp.resp.Output = slices.Clip(r.resp.Output)
	for _, c := range r.calls {
		fp.calls = append(fp.calls, *c)
	}
	return fp, nil
}

// rollout is a fork of the point, a new response on lane created at
// created (Unix seconds); run starts it parked on the step's client calls.
func (fp *forkPoint) rollout(lane string, created int64) *rollout {
	from := fp.from
	// Copy on write: the fork shares the point's items and output, clipped,
	// so that its first append copies them into arrays of its own; nothing
	// writes them in place once the step's hosted calls are settled (a
	// client's output never replaces its call's item: settleCall).
	r := &rollout{srv: from.srv, req: from.req, model: from.model, lane: lane, tenant: from.tenant, base: from.base,
		chain: from.chain, header: from.header, hosted: from.hosted, path: from.path, routed: true,
		items: fp.items, prompt: fp.prompt, rendered: fp.rendered, usage: fp.usage,
		steps: fp.steps, stepAt: fp.stepAt, fork: fp,
		tools: from.tools, approvedFrom: fp.approvedFrom}
	for label, s := range from.mcp {
		// The fork's own session with each server: the original's ends
		// with it.
		if r.mcp == nil {
			r.mcp = make(map[string]*mcpServer, len(from.mcp))
		}
		r.mcp[label] = &mcpServer{def: s.def, client: s.client, conns: s.conns, tools: s.tools}
	}
	r.path.State = stateFork
	resp := fp.resp
	parent := fp.resp.ID
	resp.ID, resp.CreatedAt, resp.ForkedFrom = newID("resp"), created, &parent
	resp.Output = fp.resp.Output // clipped by forkPointLocked
	resp.Status, resp.RequiredAction, resp.OutputOffset = protocol.ResponseInProgress, nil, nil
	r.resp = &resp
	r.order.doneNext = len(resp.Output) // every earlier item's done event went out before the pause
	return r
}

// resumeFork runs the rest of the forked step: the fork parks on the
// step's client calls (its own pause, response.done, listing them), takes
// the outputs its client appends, and ends the step as the original would
// have.
func (r *rollout) resumeFork(ctx context.Context) (open bool, err error) {
	t0 := r.srv.now()
	fp := r.fork
	r.calls = make([]*stepCall, len(fp.calls))
	var parked []int
	for i := range fp.calls {
		c := fp.calls[i]
		if _, ok := c.tool.(parker); ok {
			c.tool = r.client // the fork's own suspension answers it
			parked = append(parked, i)
		}
		r.calls[i] = &c
	}
	r.mu.Lock()
	r.results, r.settled = slices.Clone(fp.results), make([]bool, len(fp.calls))
	r.mu.Unlock()
	beginStep(r.calls)
	if len(parked) > 0 {
		err = r.answerParked(ctx, parked)
	}
	return r.endStep(t0, err)
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
	var ro *rollout
	var sp *suspension
	switch {
	case sess.oneLane && len(ev.StreamIDs) > 0:
		return protocol.Invalid(protocol.CodeInvalidStreamID, "stream_ids",
			"On WebTransport a stream is a lane, without a stream_id: send response.fork, without stream_ids, on the stream each fork is to run on.")
	case sess.oneLane:
		owner, ln, ro, sp = sess.scope.find(ev.ResponseID)
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
		_, ro, sp = sess.running(ev.ResponseID)
	}
	switch {
	case ro != nil:
		return errNotSuspendedRollout(ev.ResponseID, evFork)
	case sp == nil:
		return errNoSuspended(ev.ResponseID)
	}
	fp, perr := sp.forkPoint(owner, from)
	if perr != nil {
		return perr
	}
	for _, id := range lanes {
		sess.admit(id, &job{fork: fp, received: received}, func(ln *lane) *protocol.Error {
			if ln.sp != nil {
				return ln.sp.queueRefusal(sess, true)
			}
			return nil
		})
	}
	return nil
}

// forkOn runs a fork job: a new suspended rollout on ln, from the point.
func (sess *session) forkOn(ln *lane, j *job) (last []byte) {
	ro := j.fork.rollout(ln.id, sess.srv.now().Unix())
	ro.path.Transport = sess.transport
	ro.start = j.received
	return sess.runSuspended(ln, ro, nil)
}
