package clienttools

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is how a rollout runs in each design: one suspended response
// (in tether's dialect or the multi-agent beta's), WebSocket turns, HTTP
// turns. What they share (reading a turn, running its calls, its usage)
// is client.go's.

// suspended runs the rollout as one suspended response, which survives a
// dropped connection (see resumingConn): in tether's dialect, each pause's
// response.done answered with response.append; in the multi-agent beta's,
// each response.waiting with response.inject.
func (r *run) suspended(ctx context.Context) error {
	conn, err := r.c.dialResuming(ctx, r.ro.filter())
	if err != nil {
		return err
	}
	defer func() { r.res.Reconnects = conn.reconnects }()
	defer conn.close()
	req := r.request(r.ro.Request.Input)
	inject := r.ro.Mode == ModeInject
	if inject {
		req.MultiAgent = &protocol.MultiAgent{Enabled: ptr(true)}
		if !req.Includes(protocol.IncludeWaits) {
			req.Include = append(slices.Clip(req.Include), protocol.IncludeWaits)
		}
	} else {
		req.Suspend = ptr(true)
	}
	req.Store = ptr(false)
	var ev any = &protocol.CreateEvent{Request: req}
	for {
		start := time.Now()
		n, err := conn.send(ctx, ev)
		r.beginTurn(start, n)
		if err != nil {
			return err
		}
		end, err := r.readTurn(ctx, func() (protocol.Event, frameCost, error) { return conn.next(ctx) })
		if err != nil {
			return err
		}
		var id string
		var calls []protocol.Call
		switch end := end.(type) {
		case *protocol.ResponseEvent:
			if ended(end) {
				r.addUsage(end.Response)
				// Read: the server may let go of the rollout's tail, kept
				// for a resume in case this connection was dying (as
				// Codex does).
				conn.send(ctx, &protocol.ProcessedEvent{ResponseID: end.Response.ID})
				return nil
			}
			id, calls = end.Response.ID, pausedCalls(ModeSuspend, end)
		case *protocol.WaitingEvent:
			id, calls = end.ResponseID, r.waitedCalls(end)
		}
		if len(calls) == 0 {
			return errors.New("the server paused the response with no pending call")
		}
		outs, err := r.runCalls(ctx, calls)
		if err != nil {
			return err
		}
		ev = &protocol.AppendEvent{ResponseID: id, Input: outs, Inject: inject}
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

// http runs the rollout as HTTP turns, streamed: chained through the store,
// or stateless with the whole history.
func (r *run) http(ctx context.Context) error {
	history := slices.Clone(r.ro.Request.Input)
	req := r.request(history)
	keep := r.ro.filter()
	for {
		req.Stream = ptr(true)
		req.Store = ptr(r.ro.Mode == ModeChained)
		start := time.Now()
		st, n, err := r.c.post(ctx, req, keep)
		r.beginTurn(start, n)
		if err != nil {
			return err
		}
		end, err := r.readResponse(ctx, st.next)
		st.close()
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
		if r.ro.Mode == ModeChained {
			req = r.request(outs)
			req.PreviousResponseID = end.Response.ID
			continue
		}
		history = append(append(history, end.Response.Output...), outs...)
		req = r.request(history)
	}
}
