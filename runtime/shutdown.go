package runtime

import (
	"context"
	"errors"
	"maps"
	"time"
)

// errShuttingDown ends the rollouts still running when the drain is over:
// they fail with server_shutting_down, and their clients are told.
var errShuttingDown = errors.New("runtime: the server is shutting down")

// Shutdown stops taking work and lets the work in hand end, in three
// steps, each told to the clients concerned:
//
//  1. New connections and new responses are refused (server_shutting_down),
//     those queued on a lane too;
//     the responses running get Timeouts.Drain to finish (tool outputs that
//     clients append meanwhile are taken: their rollouts run on). With
//     Options.Checkpoints, a suspended rollout parked at a pause that is
//     in the store is handed over instead, at once or when it comes to
//     its next such pause: it ends here without a frame more, its
//     checkpoint kept, for its client to resume on another server
//     (suspension_durable.go). The drain then lasts a step, not a rollout.
//  2. What else still runs or waits, parked or detached, fails with
//     server_shutting_down: a response.failed (an error event on SSE
//     streams cut later than that) for every client that is connected.
//     Background responses shared by servers (Options.Backgrounds) are
//     left instead, queued ones at once, for another server to take over
//     once this one's lease runs out (background_shared.go).
//  3. Every WebSocket session writes what it has queued, then its close
//     frame (1001; 1012, service restart, with Options.Checkpoints: resume
//     elsewhere), and waits for the client's.
//
// Shutdown returns when every goroutine of the server's has ended, or when
// ctx does. Call it before http.Server.Shutdown, which neither waits for
// hijacked connections nor ends running handlers.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.bg.close()

	handed := s.handOver()
	s.drain(ctx)
	maps.Copy(handed, s.handOver())
	s.mu.Lock()
	s.aborting = true
	for r := range s.rollouts {
		switch {
		case handed[r]:
		case r.bg != nil && s.opts.Backgrounds != nil:
			r.abortBackground(errHandedOver) // a shared background response: another server takes it over
		default:
			r.abort(errShuttingDown)
		}
	}
	s.mu.Unlock()
	for _, sp := range s.suspended.close() {
		sp.shutdown()
	}
	s.awaitRollouts(ctx)
	// The leases of the rollouts handed over are released before their
	// clients are told to resume elsewhere: another server takes them at
	// once.
	s.leases.flush(ctx)

	// Cancelled once the rollouts have had their say: a session torn down
	// from now on starts no resume window, and an HTTP stream still open
	// ends.
	s.cancel()
	s.mu.Lock()
	for sess := range s.sessions {
		go sess.goAway(ctx)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closing reports whether Shutdown has begun.
func (s *Server) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// drain waits until no rollout is busy (running rather than parked on its
// client), for Timeouts.Drain at most.
func (s *Server) drain(ctx context.Context) {
	t := time.NewTimer(s.opts.Timeouts.Drain)
	defer t.Stop()
	for s.busy() > 0 {
		select {
		case <-s.changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// awaitRollouts waits until every rollout has returned, or ctx ends.
func (s *Server) awaitRollouts(ctx context.Context) {
	for {
		s.mu.Lock()
		n := len(s.rollouts)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return
		}
	}
}

// busy counts the rollouts running, not parked on their clients (as their
// suspensions say).
func (s *Server) busy() int {
	parked := s.suspended.parked()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.rollouts)
	for _, r := range parked {
		if _, running := s.rollouts[r]; running {
			n--
		}
	}
	return n
}

// began and ended keep the registry of running rollouts that Shutdown
// drains, and their tenants' counts of responses in progress: a rollout
// admitted by admission.Response is counted already.
func (s *Server) began(r *rollout) {
	s.mu.Lock()
	s.rollouts[r] = struct{}{}
	if !r.inFlightHeld {
		s.admission.Counted(r.tenant)
	}
	if s.aborting { // it slipped past every check for closing
		r.abort(errShuttingDown)
	}
	s.mu.Unlock()
}

func (s *Server) ended(r *rollout) {
	s.mu.Lock()
	delete(s.rollouts, r)
	s.mu.Unlock()
	s.admission.ResponseDone(r.tenant)
	s.notify()
}

// notify tells a draining Shutdown that a rollout ended or parked.
func (s *Server) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// goAway ends a session at shutdown, in order: its lanes finish the job in
// hand and answer the ones queued with server_shutting_down, the writer
// writes everything queued, then the close frame goes out (1001).
func (sess *session) goAway(ctx context.Context) {
	sess.quitOnce.Do(func() {
		sess.mu.Lock() // push starts no worker once it is closed
		close(sess.quit)
		sess.mu.Unlock()
	})
	lanes := make(chan struct{})
	go func() { sess.wg.Wait(); close(lanes) }()
	select {
	case <-lanes:
	case <-ctx.Done():
	}
	sess.out.End()
	select {
	case <-sess.out.Done():
	case <-ctx.Done():
	}
	if sess.srv.opts.Checkpoints != nil {
		// Its suspended rollouts are in the store: resume them elsewhere.
		sess.stop(CloseServiceRestart, "server restarting: resume elsewhere")
		return
	}
	sess.stop(CloseGoingAway, "server shutting down")
}
