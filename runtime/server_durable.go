package runtime

import "time"

// This file is the server's side of durable rollouts: how long a checkpoint
// lives, and the rollouts handed over at Shutdown.

// checkpointTTL is how long a checkpoint is kept: a pause's whole timeout,
// then a resume window for a client that dropped at its end.
func (s *Server) checkpointTTL() time.Duration {
	return s.opts.Suspension.Timeout + s.opts.Suspension.ResumeWindow
}

// handOver releases, at Shutdown, the rollouts parked at a pause that is in
// the store: each ends here without a frame more, its checkpoint kept, and
// its client, whose connection closes with 1012 (service restart), resumes
// it on any server that shares the store. It returns their rollouts, which
// Shutdown does not fail. A rollout that comes to such a pause while the
// server drains is handed over as its checkpoint is written
// (writeCheckpoint).
func (s *Server) handOver() map[*rollout]bool {
	if s.opts.Checkpoints == nil {
		return nil
	}
	handed := map[*rollout]bool{}
	for _, sp := range s.suspended.all() {
		if sp.handOver() {
			handed[sp.ro] = true
		}
	}
	return handed
}

// handingOver reports whether the server, shutting down with checkpoints,
// has handed its parked rollouts over: what their clients send now is
// answered on the server they resume on.
func (s *Server) handingOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborting && s.opts.Checkpoints != nil
}
