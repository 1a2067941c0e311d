package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/safety"
)

// Cost is the per-request work a production Responses API does around
// inference, beyond what tether does anyway (decode, validate, tokenize,
// store): each piece is a knob, so that an ablation can measure what it
// costs in each design. The zero value is tether's default: the safety
// classifier on, no simulated hops, post-inference work as OpenAI
// described it (see PostInference).
//
// Where each piece runs, by design (OpenAI's descriptions of its own):
//
//   - Stateless HTTP: every request pays all of it: the route hop, the
//     classifier over the whole input (the full history) and its hop,
//     rendering all of it, and the billing hop before the response ends.
//   - Chained HTTP: the same, but the classifier reads only the new input;
//     the parent's state is loaded from the store and rendered again.
//   - WebSocket turns: the connection caches the route per model; the
//     classifier and its hop run on new input only; billing overlaps the
//     next request (PostAuto).
//   - Suspended rollout: pre-inference work once, at the create; post-
//     inference once, at the end. Appended tool outputs join the context as
//     a hosted tool's results do, unclassified.
type Cost struct {
	// NoSafety turns the lexical safety classifier off, and with it the
	// safety service's hop.
	NoSafety bool
	// HopLatency is how long each simulated service call takes: the model
	// router (route), the safety service (safety) and billing (billing). It
	// is a deliberate wait standing for a network call, reported as hop_us
	// and labelled simulated wherever it shows; 0 makes none.
	HopLatency time.Duration
	// PostInference says when the billing hop runs: PostSync before the
	// terminal event, PostAsync after it (overlapping the next request),
	// PostAuto (the zero value) sync over HTTP and async on a connection (WebSocket, WebTransport),
	// as OpenAI's WebSocket mode overlaps it.
	PostInference PostMode
	// StoreTokens keeps each stored response's rendered tokens with it, so
	// that a previous_response_id the connection has not cached (every
	// chained HTTP request) loads them instead of rendering the whole
	// chain again.
	StoreTokens bool
}

// PostMode is when post-inference work runs.
type PostMode int

const (
	PostAuto  PostMode = iota // sync over HTTP, async on a connection
	PostSync                  // before the terminal event
	PostAsync                 // after it
)

func (m PostMode) String() string {
	switch m {
	case PostSync:
		return "sync"
	case PostAsync:
		return "async"
	}
	return "auto"
}

// ParsePostMode parses "auto", "sync" or "async".
func ParsePostMode(s string) (PostMode, error) {
	for _, m := range []PostMode{PostAuto, PostSync, PostAsync} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("post-inference mode %q: want auto, sync or async", s)
}

// The simulated service calls.
const (
	hopRoute   = "route"
	hopSafety  = "safety"
	hopBilling = "billing"
)

// hop makes one simulated service call: it waits HopLatency, or until ctx
// ends, and returns how long it waited.
func (s *Server) hop(ctx context.Context, name string) time.Duration {
	d := s.opts.Cost.HopLatency
	if d <= 0 {
		return 0
	}
	s.obs.Hop(name)
	t0 := s.now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return s.now().Sub(t0)
}

// hopAsync makes a simulated service call off the response's path: it
// overlaps whatever comes next, and ends with the server.
func (s *Server) hopAsync(name string) {
	if s.opts.Cost.HopLatency <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.hop(s.ctx, name)
	}()
}

// asyncPost reports whether a response on path runs its post-inference work
// after its terminal event.
func (s *Server) asyncPost(p ServePath) bool {
	switch s.opts.Cost.PostInference {
	case PostSync:
		return false
	case PostAsync:
		return true
	}
	return p.Transport != transportHTTP
}

// classify runs the safety classifier over the text of items, into tm.
func (s *Server) classify(items protocol.Items, tm *protocol.Timings) {
	if s.safety == nil || len(items) == 0 {
		return
	}
	t0 := s.now()
	var buf []byte
	for _, it := range items {
		switch it := it.(type) {
		case *protocol.Message:
			for _, c := range it.Content {
				buf = safety.AppendText(buf, c.PlainText())
			}
		case *protocol.FunctionCallOutput:
			buf = safety.AppendText(buf, it.Output.String())
		case *protocol.CustomToolCallOutput:
			buf = safety.AppendText(buf, it.Output.String())
		default:
			if c, ok := protocol.CallOf(it); ok {
				buf = safety.AppendText(buf, c.Input)
			}
		}
	}
	r := s.safety.Scan(buf)
	tm.SafetyBytes += r.Bytes
	tm.SafetyFlags += r.Flags()
	tm.SafetyMicros += s.now().Sub(t0).Microseconds()
}
