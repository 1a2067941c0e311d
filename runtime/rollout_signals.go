package runtime

import (
	"context"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// This file is what any goroutine may use to reach a running rollout: its
// stopper (a cancel from the read loop, a timer, Shutdown), its inbox (a
// steering message from response.append). Their locks are leaves.

// stopper ends a run from any goroutine, whether or not it has started. Its
// lock is a leaf: callers may hold any other.
type stopper struct {
	mu     lockrank.Mutex[lockrank.Stopper]
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
// rollout's response.append carries them; response.steer, in either
// design), which join the context after the current step. Its lock is a
// leaf.
type inbox struct {
	mu     lockrank.Mutex[lockrank.Inbox]
	items  protocol.Items // guarded by mu
	steers []steerSub     // the response.steer submissions among items, in order; guarded by mu
}

// steerSub is a response.steer submission waiting in an inbox.
type steerSub struct {
	ev     *protocol.SteerEvent
	id     string
	pended bool // its response.steer.pending is out
}

func (in *inbox) add(items ...protocol.Item) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.items = append(in.items, items...)
}

// addSteer queues a response.steer's input under id.
func (in *inbox) addSteer(id string, ev *protocol.SteerEvent) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.items = append(in.items, ev.Input...)
	in.steers = append(in.steers, steerSub{ev: ev, id: id})
}

// steerCount is the number of submissions waiting.
func (in *inbox) steerCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.steers)
}

// pend marks the submissions whose response.steer.pending is not out yet,
// and returns them.
func (in *inbox) pend() []steerSub {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []steerSub
	for i := range in.steers {
		if !in.steers[i].pended {
			in.steers[i].pended = true
			out = append(out, in.steers[i])
		}
	}
	return out
}

// peek is what drain would return, left in place.
func (in *inbox) peek() protocol.Items {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.items)
}

// drain empties the inbox: its items join the context.
func (in *inbox) drain() protocol.Items {
	items, _ := in.drainAll()
	return items
}

// drainAll empties the inbox and returns its items and the submissions
// among them.
func (in *inbox) drainAll() (protocol.Items, []steerSub) {
	in.mu.Lock()
	defer in.mu.Unlock()
	items, steers := in.items, in.steers
	in.items, in.steers = nil, nil
	return items, steers
}
