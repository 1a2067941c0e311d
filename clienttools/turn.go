package clienttools

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a turn as the client reads it: its events, one by one, up
// to the pause, wait or end that ends it, and what it cost (usage, server
// timings, bytes, the client's own time).

// beginTurn starts timing a request sent at start.
func (r *run) beginTurn(start time.Time, sent frameCost) {
	r.res.Turns = append(r.res.Turns, Turn{Start: start, BytesSent: sent.bytes, Encode: sent.codec})
	r.turn = &r.res.Turns[len(r.res.Turns)-1]
}

// readTurn reads the current turn's events from next up to a pause or the
// end of a response, which it returns: a *protocol.ResponseEvent, or a
// multi-agent response's *protocol.WaitingEvent.
func (r *run) readTurn(ctx context.Context, next func() (protocol.Event, frameCost, error)) (protocol.Event, error) {
	for {
		ev, cost, err := next()
		if err != nil {
			r.turn.BytesReceived += cost.bytes
			r.turn.Decode += cost.codec
			return nil, err
		}
		if end, err := r.see(ctx, ev, cost); end != nil || err != nil {
			return end, err
		}
	}
}

// see takes one event of the current turn: it passes it to OnEvent, keeps
// the output items, with Eager starts client calls as their items are
// done, and returns it if it ends the turn (a pause, a wait, the end of
// the response), or the error an error event is.
func (r *run) see(ctx context.Context, ev protocol.Event, cost frameCost) (protocol.Event, error) {
	r.turn.BytesReceived += cost.bytes
	r.turn.Decode += cost.codec
	r.turn.Events++
	now := time.Now()
	if r.turn.Events == 1 {
		r.turn.FirstEvent = now.Sub(r.turn.Start)
	}
	r.last = now
	r.turn.Stream = now.Sub(r.turn.Start) - r.turn.FirstEvent
	if r.ro.shows(ev) {
		r.ro.OnEvent(ev)
	}
	switch ev := ev.(type) {
	case *protocol.OutputItemEvent:
		if ev.Type != protocol.EventOutputItemDone {
			return nil, nil
		}
		r.res.Output = append(r.res.Output, ev.Item)
		c, ok := protocol.CallOf(ev.Item)
		if a := protocol.AgentOf(ev.Item); ok && a != nil {
			if r.callAgents == nil {
				r.callAgents = map[string]string{}
			}
			r.callAgents[c.CallID] = a.AgentName
		}
		if ok && r.c.Eager && c.Status != protocol.StatusIncomplete {
			r.exec.start(ctx, len(r.res.Turns)-1, c, true)
		}
	case *protocol.ResponseEvent:
		switch ev.Type {
		case protocol.EventDone, protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
			r.res.Response = ev.Response
			r.turnUsage(ev.Response.Usage, ev.Response.Timings, ended(ev))
			return ev, nil
		}
	case *protocol.WaitingEvent:
		if ev.Agent != nil {
			r.agentUsage(ev.Agent.AgentName, ev.Usage, ev.Timings)
		} else {
			r.turnUsage(&ev.Usage, ev.Timings, false)
		}
		return ev, nil
	case *protocol.StepRestartedEvent:
		// A durable rollout taken over mid-step runs the step again:
		// what its first run made is void.
		if ev.OutputIndex < len(r.res.Output) {
			r.res.Output = r.res.Output[:ev.OutputIndex]
		}
	case *protocol.ErrorEvent:
		return nil, errorOf(ev)
	}
	return nil, nil
}

// readResponse is readTurn for a response that is not multi-agent, which
// a wait does not end.
func (r *run) readResponse(ctx context.Context, next func() (protocol.Event, frameCost, error)) (*protocol.ResponseEvent, error) {
	ev, err := r.readTurn(ctx, next)
	if err != nil {
		return nil, err
	}
	end, ok := ev.(*protocol.ResponseEvent)
	if !ok {
		return nil, fmt.Errorf("the server sent %s for a response that is not multi-agent", protocol.Type(ev))
	}
	return end, nil
}

// turnUsage sets the turn's usage and server timings from the event that
// ends it: a pause, a wait and the end of a response carry the response's
// so far (usage and timings, nil when not sent).
func (r *run) turnUsage(usage *protocol.Usage, timings *protocol.Timings, ended bool) {
	if timings != nil {
		r.turn.Server = timings.Minus(r.paidTime)
	}
	if ended { // the response's usage: every agent's
		if usage != nil {
			r.turn.Usage = usage.Minus(r.paid)
		}
		r.paid, r.rootPaid, r.paidTime, r.agents = protocol.Usage{}, protocol.Usage{}, protocol.Timings{}, nil
		return
	}
	if usage != nil { // the root's
		r.turn.Usage = usage.Minus(r.rootPaid)
		r.paid.Add(r.turn.Usage)
		r.rootPaid = *usage
	}
	if timings != nil {
		r.paidTime = *timings
	}
}

// spent is what an agent's steps had read, written and taken at its
// last wait.
type spent struct {
	usage   protocol.Usage
	timings protocol.Timings
}

// agentUsage sets the turn's usage and server timings from a sub-agent's
// wait, which carries that agent's so far.
func (r *run) agentUsage(agent string, usage protocol.Usage, timings *protocol.Timings) {
	last := r.agents[agent]
	r.turn.Usage = usage.Minus(last.usage)
	r.paid.Add(r.turn.Usage)
	last.usage = usage
	if timings != nil {
		r.turn.Server = timings.Minus(last.timings)
		last.timings = *timings
	}
	if r.agents == nil {
		r.agents = map[string]spent{}
	}
	r.agents[agent] = last
}
