package runtime

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// Hooks is the work a production Responses API does around inference that
// tether's core does not: a safety classifier over each request's new text,
// calls to the services a request passes through (routing, billing). It is
// the seam through which an ablation adds that work, to measure what it
// costs in each design (package runtime/cost). Options.Hooks nil does none.
//
// Its methods run on the goroutine serving the response, concurrently for
// many responses; each adds what it spent and found to tm, the response's
// timings, and returns when ctx ends.
type Hooks interface {
	// Admit runs over a request's new input as the server takes it,
	// before its response starts: the whole input over stateless HTTP,
	// the items after the parent's when the state is cached or stored. A
	// suspended rollout runs it once, at its create: outputs appended later
	// join the context as a hosted tool's results do.
	Admit(input protocol.Items, tm *protocol.Timings)
	// PreInference runs as a response starts, before its first step (once
	// for a whole suspended rollout). routed reports that the response's
	// connection has resolved its model before.
	PreInference(ctx context.Context, path ServePath, routed bool, tm *protocol.Timings)
	// PostInference runs after a response's last step, before its
	// terminal event, which waits for it. What it returns, when not nil,
	// runs after the terminal event has been queued, overlapping whatever
	// comes next, on a goroutine that Shutdown waits for, with a context
	// that Shutdown cancels.
	PostInference(ctx context.Context, path ServePath, tm *protocol.Timings) (later func(context.Context))
}

// noHooks is a Server without Hooks.
type noHooks struct{}

func (noHooks) Admit(protocol.Items, *protocol.Timings)                          {}
func (noHooks) PreInference(context.Context, ServePath, bool, *protocol.Timings) {}
func (noHooks) PostInference(context.Context, ServePath, *protocol.Timings) func(context.Context) {
	return nil
}

// goLater runs f off the response's path (Hooks.PostInference's later), on
// a goroutine Shutdown waits for; not at all once Shutdown has begun.
func (s *Server) goLater(f func(context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}
