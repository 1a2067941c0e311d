package clienttools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is how a rollout runs in each design: one suspended response
// (in tether's dialect or the multi-agent beta's), WebSocket turns, HTTP
// turns. What they share (reading a turn, running its calls, its usage)
// is client.go's.

// suspended runs the rollout as one suspended response in tether's
// dialect, which survives a dropped connection (see resumingConn): each
// pause's response.done answered with response.append.
func (r *run) suspended(ctx context.Context) error {
	conn, err := r.c.dialResuming(ctx, r.ro.filter())
	if err != nil {
		return err
	}
	defer func() { r.res.Reconnects = conn.reconnects }()
	defer conn.close()
	req := r.request(r.ro.Request.Input)
	req.Suspend, req.Store = ptr(true), ptr(false)
	var ev any = &protocol.CreateEvent{Request: req}
	for {
		start := time.Now()
		n, err := conn.send(ctx, ev)
		r.beginTurn(start, n)
		if err != nil {
			return err
		}
		end, err := r.readResponse(ctx, func() (protocol.Event, frameCost, error) { return conn.next(ctx) })
		if err != nil {
			return err
		}
		if ended(end) {
			r.addUsage(end.Response)
			// Read: the server may let go of the rollout's tail, kept for
			// a resume in case this connection was dying (as Codex does).
			conn.send(ctx, &protocol.ProcessedEvent{ResponseID: end.Response.ID})
			return nil
		}
		calls := pausedCalls(ModeSuspend, end)
		if len(calls) == 0 {
			return errors.New("the server paused the response with no pending call")
		}
		outs, err := r.runCalls(ctx, calls)
		if err != nil {
			return err
		}
		ev = &protocol.AppendEvent{ResponseID: end.Response.ID, Input: outs}
	}
}

// injected runs the rollout as one response in the multi-agent beta's
// dialect, which survives a dropped connection (see resumingConn): each
// agent's wait (response.waiting) answered with an inject of its calls'
// outputs. The agents of a tree wait apart: a wait's calls start at once,
// the loop reads on while they run, and their inject goes out as soon as
// they are all in, so that each agent's calls run beside the others'.
// Each agent's round trips are turns of their own: from the request (or
// inject) that set it going, or its first event, to its next wait.
func (r *run) injected(ctx context.Context) error {
	conn, err := r.c.dialResuming(ctx, r.ro.filter())
	if err != nil {
		return err
	}
	defer func() { r.res.Reconnects = conn.reconnects }()
	defer conn.close()
	req := r.request(r.ro.Request.Input)
	req.MultiAgent = cmp.Or(req.MultiAgent, &protocol.MultiAgent{Enabled: ptr(true)})
	if !req.Includes(protocol.IncludeWaits) {
		req.Include = append(slices.Clip(req.Include), protocol.IncludeWaits)
	}
	req.Store = ptr(false)

	type read struct {
		ev   protocol.Event
		cost frameCost
		err  error
	}
	events := make(chan read)
	readCtx, stopReading := context.WithCancel(ctx)
	var reader sync.WaitGroup
	defer func() { stopReading(); reader.Wait() }()
	reader.Go(func() {
		for {
			ev, cost, err := conn.next(readCtx)
			select {
			case events <- read{ev, cost, err}:
			case <-readCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	// A wait's calls, done: run on the loop's goroutine from here.
	type answered struct {
		agent, response string
		calls           []Call
		err             error
	}
	answers := make(chan answered)
	turns := map[string]int{}      // agent -> its current turn
	last := map[string]time.Time{} // agent -> its current turn's last event
	use := func(agent string) {
		i, ok := turns[agent]
		if !ok { // a sub-agent's first turn: from its first event
			r.res.Turns = append(r.res.Turns, Turn{Agent: agent, Spawned: true, Start: time.Now()})
			i = len(r.res.Turns) - 1
			turns[agent] = i
		}
		r.turn, r.last = &r.res.Turns[i], last[agent]
	}

	start := time.Now()
	n, err := conn.send(ctx, &protocol.CreateEvent{Request: req})
	r.beginTurn(start, n)
	if err != nil {
		return err
	}
	turns[""] = len(r.res.Turns) - 1
	for {
		select {
		case rd := <-events:
			if rd.err != nil {
				return rd.err
			}
			agent := ""
			if a := protocol.Header(rd.ev).Agent; a != nil {
				agent = a.AgentName
			}
			use(agent)
			end, err := r.see(ctx, rd.ev, rd.cost)
			last[agent] = r.last
			if err != nil {
				return err
			}
			switch end := end.(type) {
			case *protocol.ResponseEvent:
				r.addUsage(end.Response)
				conn.send(ctx, &protocol.ProcessedEvent{ResponseID: end.Response.ID})
				return nil
			case *protocol.WaitingEvent:
				calls := r.waitedCalls(end)
				if len(calls) == 0 {
					return fmt.Errorf("the server sent a wait naming calls it never sent: %v", end.CallIDs)
				}
				turn := turns[agent]
				for _, c := range calls {
					r.exec.start(ctx, turn, c, false)
				}
				go func() {
					done, err := r.exec.finish(ctx, turn, calls)
					select {
					case answers <- answered{agent, end.ResponseID, done, err}:
					case <-ctx.Done():
					}
				}()
			}
		case a := <-answers:
			if a.err != nil {
				return a.err
			}
			use(a.agent)
			outs := r.finished(a.calls)
			start := time.Now()
			n, err := conn.inject(ctx, a.agent, &protocol.AppendEvent{ResponseID: a.response, Input: outs, Inject: true})
			r.beginTurn(start, n)
			r.turn.Agent = a.agent
			turns[a.agent], last[a.agent] = len(r.res.Turns)-1, time.Time{}
			if err != nil {
				return err
			}
		}
	}
}

// waitedCalls are the calls a response.waiting names, from the items the
// step's output_item.done events brought; nil if one of them is missing.
func (r *run) waitedCalls(w *protocol.WaitingEvent) []protocol.Call {
	calls := make([]protocol.Call, 0, len(w.CallIDs))
	for _, id := range w.CallIDs {
		i := slices.IndexFunc(r.res.Output, func(it protocol.Item) bool {
			c, ok := protocol.CallOf(it)
			return ok && c.CallID == id
		})
		if i < 0 {
			return nil
		}
		c, _ := protocol.CallOf(r.res.Output[i])
		calls = append(calls, c)
	}
	return calls
}

// turns runs the rollout as WebSocket cached-state turns. A connection at
// its age limit (websocket_connection_limit_reached) is replaced by a new
// one, where the turn is sent again with the whole context: the cache of
// the old connection, and so previous_response_id, is gone with it (store
// is false), as OpenAI's guide for WebSocket mode says.
func (r *run) turns(ctx context.Context) error {
	keep := r.ro.filter()
	conn, err := r.c.dial(ctx, keep)
	if err != nil {
		return err
	}
	defer func() { conn.close() }()
	history := slices.Clone(r.ro.Request.Input)
	req := r.request(history)
	req.Store = ptr(false)
	for {
		start := time.Now()
		n, err := conn.send(ctx, &protocol.CreateEvent{Request: req})
		r.beginTurn(start, n)
		if err != nil {
			return err
		}
		end, err := r.readResponse(ctx, func() (protocol.Event, frameCost, error) { return conn.next(ctx) })
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.Code == protocol.CodeConnectionLimitReached {
			conn.close()
			if conn, err = r.c.dial(ctx, keep); err != nil {
				return err
			}
			r.res.Reconnects++
			req = r.request(history)
			req.Store = ptr(false)
			continue
		}
		if err != nil {
			return err
		}
		r.addUsage(end.Response)
		calls := openCalls(end.Response)
		if end.Response.Status != protocol.ResponseCompleted || len(calls) == 0 {
			return nil
		}
		outs, err := r.runCalls(ctx, calls)
		if err != nil {
			return err
		}
		history = append(append(history, end.Response.Output...), outs...)
		req = r.request(outs)
		req.Store, req.PreviousResponseID = ptr(false), end.Response.ID
	}
}

// http runs the rollout as HTTP turns, streamed: chained through the store
// (in the background or not), or stateless with the whole history. A
// multi-agent response's agents wait apart: each agent's calls run at
// once, and the next request goes as soon as one agent's calls are all in,
// with every agent's that are; the others' go in a later request, their
// agents waiting meanwhile, as the server lets an agent whose calls lack
// outputs wait on.
func (r *run) http(ctx context.Context) error {
	history := slices.Clone(r.ro.Request.Input)
	req := r.request(history)
	keep := r.ro.filter()
	type group struct {
		calls []Call
		err   error
	}
	ready := make(chan group)
	running := 0 // agents whose calls run
	chained := r.ro.Mode != ModeStateless
	for {
		req.Stream = ptr(true)
		req.Store = ptr(chained)
		if r.ro.Mode == ModeBackground {
			req.Background = ptr(true)
		}
		start := time.Now()
		st, n, err := r.c.post(ctx, req, keep)
		r.beginTurn(start, n)
		if err != nil {
			return err
		}
		end, err := r.readHTTP(ctx, st, keep)
		if err != nil {
			return err
		}
		r.addUsage(end.Response)
		if end.Response.Status != protocol.ResponseCompleted {
			return nil
		}
		turn := len(r.res.Turns) - 1
		for _, calls := range r.byAgent(openCalls(end.Response)) {
			for _, c := range calls {
				r.exec.start(ctx, turn, c, false)
			}
			running++
			go func() {
				done, err := r.exec.finish(ctx, turn, calls)
				select {
				case ready <- group{done, err}:
				case <-ctx.Done():
				}
			}()
		}
		if running == 0 {
			return nil
		}
		var done []Call
		for wait := true; running > 0; wait = false {
			var g group
			if wait {
				select {
				case g = <-ready:
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case g = <-ready:
				default:
				}
				if g.calls == nil && g.err == nil {
					break
				}
			}
			running--
			if g.err != nil {
				return g.err
			}
			done = append(done, g.calls...)
		}
		outs := r.finished(done)
		if chained {
			req = r.request(outs)
			req.PreviousResponseID = end.Response.ID
			continue
		}
		history = append(append(history, end.Response.Output...), outs...)
		req = r.request(history)
	}
}

// readHTTP reads an HTTP turn's response from st, its create's stream,
// which it closes: to the response's end, or in ModeBackground cut and
// resumed (backgroundStream).
func (r *run) readHTTP(ctx context.Context, st *sseStream, keep eventFilter) (*protocol.ResponseEvent, error) {
	if r.ro.Mode != ModeBackground {
		defer st.close()
		return r.readResponse(ctx, st.next)
	}
	bg := &backgroundStream{c: r.c, keep: keep, st: st}
	defer bg.close()
	end, err := r.readResponse(ctx, func() (protocol.Event, frameCost, error) { return bg.next(ctx) })
	r.res.Resumes += bg.resumes
	return end, err
}

// byAgent groups calls by the agent that made them, in the order of each
// agent's first call.
func (r *run) byAgent(calls []protocol.Call) [][]protocol.Call {
	var groups [][]protocol.Call
	at := map[string]int{}
	for _, c := range calls {
		agent := r.callAgents[c.CallID]
		i, ok := at[agent]
		if !ok {
			i = len(groups)
			at[agent] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}
