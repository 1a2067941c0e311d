package runtime

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is background responses shared by servers (Options.Backgrounds):
// the server that runs one mirrors its log to the store, which every other
// server reads to answer a poll, a stream again or a cancel; and a server
// that finds one whose owner's lease ran out takes it over (takeOver).
//
// The mirror writes what the log has not yet given the store, one write at
// a time, so that the events that came during a write go together in the
// next: the rollout never waits on the store. A write also renews the
// owner's lease; while nothing changes, the mirror writes nothing every
// third of the lease's TTL to renew it.

// share records e, counted by enqueue, in the store, then queues it and
// starts its mirror; or says why the store did not take it.
func (b *backgrounds) share(e *bgResponse) *protocol.Error {
	st := b.srv.opts.Backgrounds
	req, err := protocol.Marshal(e.ro.req)
	if err != nil {
		return protocol.AsError(err)
	}
	frames, version, _, _ := e.log.unsent(0)
	resp, err := e.log.responseJSON()
	if err != nil {
		return protocol.AsError(err)
	}
	ctx, cancel := context.WithTimeout(b.srv.ctx, checkpointTimeout)
	defer cancel()
	rec := &BackgroundRecord{Tenant: e.tenant, ID: e.id, Request: req, Response: resp, Stream: e.log.events}
	if err := st.CreateBackground(ctx, rec, frames, b.lease()); err != nil {
		return storeUnavailable(err)
	}
	e.epoch = 1
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queueUpLocked(e)
	b.goMirrorLocked(e, len(frames), version)
	return nil
}

// lease is what the server's writes lease a background response for.
func (b *backgrounds) lease() Lease {
	return Lease{Owner: b.srv.leases.lease.Owner, TTL: b.srv.opts.Suspension.LeaseTTL}
}

func (b *backgrounds) goMirrorLocked(e *bgResponse, at, version int) {
	b.srv.wg.Add(1)
	go b.mirror(e, at, version)
}

// mirror writes e's log to the store from event at (and the response, when
// its version is not version) until its end is written, or another server
// has taken it over (the run here then stops without a word more). A
// cancel asked on another server comes back with a write.
func (b *backgrounds) mirror(e *bgResponse, at, version int) {
	defer b.srv.wg.Done()
	st, lease := b.srv.opts.Backgrounds, b.lease()
	renew := time.NewTimer(lease.TTL / 3)
	defer renew.Stop()
	wrote := b.srv.now()
	for {
		changed := e.log.wait()
		frames, v, final, let := e.log.unsent(at)
		if len(frames) > 0 || v != version || final || b.srv.now().Sub(wrote) >= lease.TTL/3 {
			w := &BackgroundWrite{Tenant: e.tenant, ID: e.id, Epoch: e.epoch, Lease: lease, At: at,
				Events: frames, Ended: final && !let, Keep: b.opts.Retention}
			if let {
				// Left for another server (handed over at shutdown): what
				// it made goes, and the lease ends with it, so that the
				// next to ask for it takes it over at once.
				w.Lease.TTL = time.Nanosecond
			}
			if v != version {
				w.Response, _ = e.log.responseJSON() // nil, as it was, should it not encode
			}
			ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
			cancelAsked, err := st.WriteBackground(ctx, w)
			cancel()
			switch {
			case let:
				if err != nil {
					b.srv.log.Warn("background response left: the store did not take its last events", "response", e.id, "err", err)
				}
				return
			case err == nil:
				at, version, wrote = at+len(frames), v, b.srv.now()
				if cancelAsked {
					b.abort(e, errCancelled)
				}
				if final && !let {
					return
				}
			case errors.Is(err, ErrFenced) || errors.Is(err, ErrNotStored) || errors.Is(err, ErrJournalGap):
				b.abort(e, errFenced) // another server runs it now
				return
			case b.srv.now().Sub(wrote) >= lease.TTL-lease.TTL/10:
				// The store has not answered for as long as the lease may
				// last there: another server may take it over by now.
				b.srv.log.Warn("background response let go: the store did not answer", "response", e.id, "err", err)
				b.abort(e, errFenced)
				return
			default:
				changed = nil // tried again at the next renewal
			}
		}
		renew.Reset(lease.TTL / 3)
		select {
		case <-changed:
		case <-renew.C:
		}
	}
}

// remote is background response id of tenant as the store has it, taken
// over first when its owner's lease has run out before its end; nil when
// the store has none (or there is no store).
func (s *Server) remote(ctx context.Context, tenant, id string) (*BackgroundRecord, *protocol.Error) {
	st := s.opts.Backgrounds
	if st == nil {
		return nil, nil
	}
	for range 2 {
		rec, err := st.GetBackground(ctx, tenant, id)
		switch {
		case errors.Is(err, ErrNotStored):
			return nil, nil
		case err != nil:
			return nil, storeUnavailable(err)
		case rec.Ended || rec.Leased:
			return rec, nil
		}
		s.takeOver(ctx, rec)
	}
	rec, err := st.GetBackground(ctx, tenant, id)
	if errors.Is(err, ErrNotStored) {
		return nil, nil
	} else if err != nil {
		return nil, storeUnavailable(err)
	}
	return rec, nil
}

// takeOver runs background response rec here, its owner gone (its lease run
// out): again from its request, when it had not begun or its model says the
// same whenever it is asked (the run again makes the events the store has,
// which are not sent again, and goes on); else it ends it failed,
// background_server_lost (cancelled, when a cancel was asked), for nothing
// can go on from where it was. A server that took it first wins; this one
// then leaves it.
func (s *Server) takeOver(ctx context.Context, rec *BackgroundRecord) {
	st := s.opts.Backgrounds
	if err := st.TakeBackground(ctx, rec.Tenant, rec.ID, rec.Epoch, s.bg.lease()); err != nil {
		return
	}
	rec.Epoch++
	var was protocol.Response
	if err := protocol.Unmarshal(rec.Response, &was); err != nil {
		s.log.Warn("background response taken over: its response does not decode", "response", rec.ID, "err", err)
	}
	req, perr := protocol.DecodeCreateRequest(rec.Request)
	if perr == nil {
		model := s.models[req.Model]
		if was.Status == protocol.ResponseQueued || deterministic(model) {
			if perr = s.runAgain(ctx, rec, req, &was); perr == nil {
				return
			}
		}
	}
	s.endLost(ctx, rec, &was)
}

// runAgain runs background response rec again here, from its request, as
// it was created: the same id and creation time, so that a model that says
// the same makes the same events.
func (s *Server) runAgain(ctx context.Context, rec *BackgroundRecord, req *protocol.CreateRequest, was *protocol.Response) *protocol.Error {
	var frames [][]byte
	if rec.Stream {
		var err error
		if frames, err = s.opts.Backgrounds.BackgroundEvents(ctx, rec.Tenant, rec.ID, -1, 0); err != nil {
			return storeUnavailable(err)
		}
	}
	ctx = WithTenant(ctx, rec.Tenant)
	parent, perr := s.parentOf(ctx, req)
	if perr != nil {
		return perr
	}
	ro, perr := s.prepare(ctx, req, parent, s.now(), protocol.Timings{})
	if perr != nil {
		return perr
	}
	ro.resp.ID, ro.resp.CreatedAt = rec.ID, was.CreatedAt
	ro.tenant = rec.Tenant
	ro.path = ServePath{Transport: transportHTTP, Design: designStateless, State: stateNone}
	if parent != nil {
		ro.path.Design, ro.path.State = designChained, stateStore
	}
	log := newBGLog(s.mem, rec.Stream)
	log.seed(frames, rec.Response)
	ro.announceQueued(log)
	if rec.Cancel {
		ro.abort(errCancelled)
	}
	held := requestCost(len(rec.Request))
	s.mem.Add(held) // it is running already, as far as its client knows
	e, perr := s.bg.enqueue(ro, log, held, req.BackgroundOptions, true)
	if perr != nil {
		s.mem.Refund(held)
		return perr
	}
	e.epoch = rec.Epoch
	s.log.Info("background response taken over", "response", rec.ID, "events", len(frames), "epoch", rec.Epoch)
	s.bg.mu.Lock()
	defer s.bg.mu.Unlock()
	s.bg.queueUpLocked(e)
	s.bg.goMirrorLocked(e, len(frames), -1)
	return nil
}

// endLost ends background response rec, taken over by this server, failed
// (background_server_lost): its owner died and it cannot be run again to
// the same events. A cancel asked meanwhile ends it cancelled instead.
func (s *Server) endLost(ctx context.Context, rec *BackgroundRecord, was *protocol.Response) {
	terminal := protocol.EventFailed
	if rec.Cancel {
		was.Status, terminal = protocol.ResponseCancelled, protocol.EventCancelled
	} else {
		was.Status = protocol.ResponseFailed
		was.Error = &protocol.ResponseError{Code: protocol.CodeBackgroundLost,
			Message: "The server running this background response stopped, and its model cannot run it again to the same events. Create it again."}
	}
	resp, err := protocol.Marshal(was)
	if err != nil {
		s.log.Warn("background response lost: its response does not encode", "response", rec.ID, "err", err)
		return
	}
	w := &BackgroundWrite{Tenant: rec.Tenant, ID: rec.ID, Epoch: rec.Epoch, Lease: s.bg.lease(), At: rec.Events,
		Response: resp, Ended: true, Keep: s.opts.Background.Retention}
	if rec.Stream {
		ev := &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: terminal, SequenceNumber: rec.Events}, Response: was}
		frame, err := sseFrame(ev)
		if err != nil {
			return
		}
		w.Events = [][]byte{frame}
	}
	if _, err := s.opts.Backgrounds.WriteBackground(ctx, w); err != nil {
		s.log.Warn("background response lost: the store did not take its end", "response", rec.ID, "err", err)
		return
	}
	if was.Store {
		req, _ := protocol.DecodeCreateRequest(rec.Request)
		record := &Record{Response: was}
		if req != nil {
			record.Input = req.Input
		}
		if err := s.store.Put(WithTenant(ctx, rec.Tenant), record); err != nil {
			s.log.Warn("store write failed", "response", rec.ID, "err", err)
		}
	}
}

// followRemote streams background response rec, run by another server,
// from the store: its events after sequence number after, then as they are
// logged, to its end. While none come it looks at the record every third
// of a lease: one whose owner's lease ran out is taken over (remote).
func (s *Server) followRemote(w http.ResponseWriter, r *http.Request, rec *BackgroundRecord, after int) {
	st := s.opts.Backgrounds
	startSSE(w)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	ctx, cancel := s.requestContext(r)
	defer cancel()
	for {
		events, err := st.BackgroundEvents(ctx, rec.Tenant, rec.ID, after, s.opts.Suspension.LeaseTTL/3)
		if err != nil {
			return
		}
		rc.SetWriteDeadline(time.Now().Add(s.opts.Timeouts.Write))
		ended := false
		for _, f := range events {
			if _, err := w.Write(f); err != nil {
				return
			}
			ended = ended || terminalFrame(f)
		}
		if rc.Flush() != nil || ended {
			return
		}
		after += len(events)
		if len(events) == 0 {
			now, perr := s.remote(ctx, rec.Tenant, rec.ID)
			if perr != nil || now == nil || now.Ended && after >= now.Events-1 {
				return
			}
		}
	}
}

// terminalFrame reports whether an SSE frame is a response's terminal
// event.
func terminalFrame(f []byte) bool {
	for _, t := range []protocol.EventType{protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled} {
		if bytes.HasPrefix(f, []byte("event: "+string(t)+"\n")) {
			return true
		}
	}
	return false
}

// cancelRemote cancels background response rec, run by another server, and
// waits for it to end (the owner hears of the cancel at its next write, or
// this server takes it over when the owner is gone), or for ctx; it
// returns the record as it stands then.
func (s *Server) cancelRemote(ctx context.Context, rec *BackgroundRecord) (*BackgroundRecord, *protocol.Error) {
	st := s.opts.Backgrounds
	if rec.Ended {
		return rec, nil
	}
	if err := st.CancelBackground(ctx, rec.Tenant, rec.ID); err != nil {
		return nil, storeUnavailable(err)
	}
	for {
		now, perr := s.remote(ctx, rec.Tenant, rec.ID)
		switch {
		case perr != nil:
			return nil, perr
		case now == nil:
			return rec, nil
		case now.Ended:
			return now, nil
		}
		// The owner's next write, or a renewal, ends it: wait for events,
		// or a tenth of a lease.
		if _, err := st.BackgroundEvents(ctx, rec.Tenant, rec.ID, now.Events-1, s.opts.Suspension.LeaseTTL/10); err != nil {
			if ctx.Err() != nil {
				return now, nil
			}
			return nil, storeUnavailable(err)
		}
	}
}

// storeUnavailable is err from a BackgroundStore, as its client reads it.
func storeUnavailable(err error) *protocol.Error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeStoreUnavailable, "",
		"The store of background responses did not answer: %v. Retry shortly.", err)
}

// writeRecord answers with a background response as the store has it.
func writeRecord(w http.ResponseWriter, rec *BackgroundRecord) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(rec.Response)
}
