package runtime

import (
	"context"
	"slices"
	"sync"

	"github.com/tether-run/tether/protocol"
)

// This file is what any goroutine may use to reach a running rollout: its
// stopper (a cancel from the read loop, a timer, Shutdown) and its inbox (a
// steering message from response.append). Their locks are leaves.

// stopper ends a run from any goroutine, whether or not it has started. Its
// lock is a leaf: callers may hold any other.
type stopper struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc // set when run starts; guarded by mu
	cause  error                   // an abort that came before run; guarded by mu
}

// start derives run's context from ctx, cancelled at once if an abort came first.
func (s *stopper) start(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
	if s.cause != nil {
		cancel(s.cause)
	}
	return ctx, cancel
}

// abort ends the run with cause; the first cause wins.
func (s *stopper) abort(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel(cause)
	} else if s.cause == nil {
		s.cause = cause
	}
}

// inbox holds the messages steered into a running rollout (a suspended
// rollout's response.append carries them), which join the context after
// the current step. Its lock is a leaf.
type inbox struct {
	mu    sync.Mutex
	items protocol.Items // guarded by mu
}

func (in *inbox) add(items ...protocol.Item) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.items = append(in.items, items...)
}

// peek is what take would return, left in place.
func (in *inbox) peek() protocol.Items {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.items)
}

func (in *inbox) take() protocol.Items {
	in.mu.Lock()
	defer in.mu.Unlock()
	items := in.items
	in.items = nil
	return items
}
