package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// This file is a rollout's end: its terminal response, what it stores and
// leaves for the next turn.

func (r *rollout) finish(ctx context.Context, res sampler.Result, serr error) (*conversation, error) {
	if r.agent != nil {
		return r.endAgent(serr)
	}
	var subUsage protocol.Usage
	if r.tree != nil {
		// Before the lock: they take it as they end.
		subUsage, r.tm.AgentSampleMicros = r.tree.end(r.leftOpen)
	}
	if err := r.sinkErr(); err != nil {
		r.srv.obs.ResponseEnded(r.path, StatusAbandoned, r.timings())
		return nil, err
	}
	now := r.srv.now()
	// The status is read by other goroutines (a draining Shutdown asks
	// whether the rollout is parked): written under mu.
	r.mu.Lock()
	// A copy: the response outlives the rollout (stored, cached), and a
	// pointer into the rollout would keep all of it alive with it.
	usage := r.usage
	usage.Add(subUsage)
	r.resp.Usage = &usage
	r.resp.RequiredAction = nil
	r.resp.DropEcho() // the response is kept (stored, cached) without it: its last event is encoded whole
	// Ended, it says which tier served it, as OpenAI's does: its model's
	// when it said (an upstream's), else standard processing, which is how
	// tether serves every tier asked for.
	r.resp.ServiceTier = cmp.Or(r.tier, protocol.ServiceTierDefault)
	terminal := protocol.EventCompleted
	switch cause := context.Cause(ctx); {
	case cause == errCancelled:
		r.resp.Status = protocol.ResponseCancelled
		terminal = protocol.EventCancelled
	case cause == errToolTimeout:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = &protocol.ResponseError{Code: protocol.CodeClientToolTimeout,
			Message: fmt.Sprintf("No output arrived for the pending tool calls within %s.", r.srv.opts.Suspension.Timeout)}
		terminal = protocol.EventFailed
	case cause == errShuttingDown:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = errShutdown().ResponseError()
		terminal = protocol.EventFailed
	case cause == errCheckpointBehind:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = &protocol.ResponseError{Code: protocol.CodeStoreUnavailable,
			Message: "This rollout's last checkpoint is older than what you have seen of it (the store did not take a later pause), so it cannot go on from where you are. Start it again."}
		terminal = protocol.EventFailed
	case cause == errTooManyCalls:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = &protocol.ResponseError{Code: protocol.CodeTooManyToolCalls,
			Message: fmt.Sprintf("A sampling step made more than %d tool calls, this server's limit per step (Limits.MaxCallsPerStep).", r.srv.opts.Limits.MaxCallsPerStep)}
		terminal = protocol.EventFailed
	case cause == errFenced || cause == errHandedOver || cause == errHibernated:
		r.mu.Unlock()
		r.srv.obs.ResponseEnded(r.path, StatusReleased, r.timings())
		return nil, ctx.Err()
	case serr != nil && ctx.Err() != nil:
		// The client went away, the server is shutting down, or nobody
		// resumed a detached rollout: nobody to tell.
		r.mu.Unlock()
		r.srv.obs.ResponseEnded(r.path, StatusAbandoned, r.timings())
		return nil, ctx.Err()
	case serr != nil:
		r.resp.Status = protocol.ResponseFailed
		r.resp.Error = protocol.AsError(serr).ResponseError()
		terminal = protocol.EventFailed
	case res.Incomplete || r.capped != "":
		r.resp.Status = protocol.ResponseIncomplete
		reason := "max_output_tokens"
		switch {
		case r.capped != "":
			reason = r.capped
		case r.steps >= maxSteps:
			reason = "max_steps"
		}
		r.resp.IncompleteDetails = &protocol.IncompleteDetails{Reason: reason}
		terminal = protocol.EventIncomplete
	default:
		r.resp.Status = protocol.ResponseCompleted
		r.resp.CompletedAt = ptr(now.Unix())
	}
	r.mu.Unlock()
	var conv *conversation
	if r.resp.Status == protocol.ResponseCompleted || r.resp.Status == protocol.ResponseIncomplete {
		conv = r.publish()
	}
	var rec *Record // what the store took, if it did
	if r.resp.Store {
		t0 := r.srv.now()
		// A copy: what the response gets after this (its timings, a
		// failure below) is not written into what a reader of the store
		// may be encoding meanwhile.
		stored := *r.resp
		rec = &Record{Response: &stored, Input: r.req.Input, Items: slices.Clip(r.transcript()[r.base:]), Chain: r.chain}
		if conv != nil && r.srv.opts.StoreTokens {
			rec.Prompt = conv.prompt
		}
		sctx, cancel := context.WithTimeout(WithTenant(context.WithoutCancel(ctx), r.tenant), storeTimeout)
		err := r.srv.store.Put(sctx, rec)
		cancel()
		var perr *protocol.Error
		switch {
		case errors.As(err, &perr) && perr.Code == protocol.CodeStoreUnavailable:
			// The client asked for the response kept and it was not: it
			// fails, so that nobody continues from an id no store holds.
			r.mu.Lock()
			r.resp.Status, r.resp.Error, r.resp.CompletedAt = protocol.ResponseFailed, perr.ResponseError(), nil
			r.mu.Unlock()
			terminal, conv, rec = protocol.EventFailed, nil, nil
		case err != nil:
			r.srv.log.Warn("store write failed", "response", r.resp.ID, "err", err)
			rec = nil
		}
		r.tm.StoreMicros = r.srv.now().Sub(t0).Microseconds()
	}
	if conv != nil && r.req.Conversation != nil {
		// After the store: a response that failed there adds nothing.
		if perr := r.addToConversation(ctx); perr != nil {
			// Nothing of it joined the conversation (deleted meanwhile, or
			// the store did not answer): the response fails, so that the
			// client does not go on from items the conversation lacks.
			r.mu.Lock()
			r.resp.Status, r.resp.Error, r.resp.CompletedAt = protocol.ResponseFailed, perr.ResponseError(), nil
			r.mu.Unlock()
			terminal, conv = protocol.EventFailed, nil
			if rec != nil { // the store has it as it ended before: it has it failed now
				failed, again := *r.resp, *rec
				again.Response = &failed
				sctx, cancel := context.WithTimeout(WithTenant(context.WithoutCancel(ctx), r.tenant), storeTimeout)
				if err := r.srv.store.Put(sctx, &again); err != nil {
					r.srv.log.Warn("store write failed", "response", r.resp.ID, "err", err)
				}
				cancel()
			}
		}
	}
	later := r.srv.hooks.PostInference(r.srv.ctx, r.path, &r.tm)
	tm := r.timings()
	r.srv.obs.ResponseEnded(r.path, r.resp.Status, tm)
	if r.req.Includes(protocol.IncludeTimings) {
		r.resp.Timings = &tm
	}
	after := r.closeSteers(conv)
	r.mu.Lock()
	r.flushDoneLocked()
	r.mu.Unlock()
	r.emitResponse(terminal)
	for _, ev := range after {
		r.emit(ev)
	}
	if later != nil {
		r.srv.goLater(later)
	}
	return conv, r.sinkErr()
}

// timings are the response's timings so far, with what its frames have
// cost on the way out until now.
func (r *rollout) timings() protocol.Timings {
	tm := r.tm
	tm.TotalMicros = r.srv.now().Sub(r.start).Microseconds()
	tm.EncodeMicros = r.out.Encode.Load() / 1e3
	tm.OutboxMicros = r.out.Wait.Load() / 1e3
	tm.WriteMicros = r.out.Write.Load() / 1e3
	tm.Frames = int(r.out.Frames.Load())
	tm.JournalMicros = r.journalWait.Load() / 1e3
	return tm
}

// publish renders the output onto the prompt and returns the state the next
// turn continues from. A tree's is every agent's items (transcript), from
// which the next turn builds the tree again (agents_http.go): an open
// tree's unrendered (its next request is served by another response's
// hydrate, which renders), a waiting one's rendered whole, for a
// continuation on its connection.
func (r *rollout) publish() *conversation {
	items, prompt := r.items, r.prompt
	switch {
	case r.openTree():
		items, prompt = r.transcript(), nil
	case r.tree != nil && r.tree.spawned():
		items = r.transcript()
		prompt = r.srv.renderFrom(items, window{})
	default:
		r.renderPending()
		prompt = r.prompt
	}
	chain := r.chain
	if r.resp.Store {
		chain = append(slices.Clip(chain), r.resp.ID)
	}
	return &conversation{
		response: r.resp, items: items, prompt: prompt, chain: chain, win: r.win,
		instructions: derefString(r.req.Instructions), tools: r.req.Tools, header: r.header,
	}
}
