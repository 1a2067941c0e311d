// Package cost is the work a production Responses API does around inference,
// beyond what tether does anyway (decode, validate, tokenize, store): a
// lexical safety classifier over each request's new text, and simulated
// calls to the services a request passes through (model routing, the safety
// service, billing). Each piece is a knob, so that an ablation can measure
// what it costs in each design. A Model plugs into a server as its
// runtime.Hooks; a server without one does none of it.
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
package cost

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost/internal/safety"
)

// Options choose the pieces of a Model. The zero value does nothing.
type Options struct {
	// Safety runs the lexical safety classifier over each request's new
	// text, and with it the safety service's hop.
	Safety bool
	// HopLatency is how long each simulated service call takes: the model
	// router (route), the safety service (safety) and billing (billing). It
	// is a deliberate wait standing for a network call, reported as hop_us
	// and labelled simulated wherever it shows; 0 makes none.
	HopLatency time.Duration
	// PostInference says when the billing hop runs: PostSync before the
	// terminal event, PostAsync after it (overlapping the next request),
	// PostAuto (the zero value) sync over HTTP and async on a connection
	// (WebSocket, WebTransport), as OpenAI's WebSocket mode overlaps it.
	PostInference PostMode
	// OnHop, when set, is told of each simulated call by name
	// (prommetrics.Metrics.Hop counts them). It must not block.
	OnHop func(name string)
	// Now is the clock the work is timed by: the server's
	// (runtime.Options.Now), when it has one. Nil is time.Now.
	Now func() time.Time
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

// Model is the work around inference that its Options choose, as a
// server's runtime.Hooks. It is safe for concurrent use.
type Model struct {
	opts   Options
	safety *safety.Classifier // nil without Options.Safety
}

var _ runtime.Hooks = (*Model)(nil)

// New returns the Model opts choose; it builds the safety classifier's
// matchers when opts.Safety asks for them.
func New(opts Options) (*Model, error) {
	if opts.HopLatency < 0 {
		return nil, fmt.Errorf("cost: HopLatency %v: want 0 or more", opts.HopLatency)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Model{opts: opts}
	if opts.Safety {
		var err error
		if m.safety, err = safety.New(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Options are the options m was made with.
func (m *Model) Options() Options { return m.opts }

// Admit runs the safety classifier over the text of input, into tm.
func (m *Model) Admit(input protocol.Items, tm *protocol.Timings) {
	if m.safety == nil || len(input) == 0 {
		return
	}
	t0 := m.opts.Now()
	var buf []byte
	for _, it := range input {
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
	r := m.safety.Scan(buf)
	tm.SafetyBytes += r.Bytes
	tm.SafetyFlags += r.Flags()
	tm.SafetyMicros += m.opts.Now().Sub(t0).Microseconds()
}

// PreInference makes the simulated service calls before sampling: the
// model router, unless the connection has routed this model already, and
// the safety service, when there was new text to classify.
func (m *Model) PreInference(ctx context.Context, _ runtime.ServePath, routed bool, tm *protocol.Timings) {
	if !routed {
		tm.HopMicros += m.hop(ctx, hopRoute).Microseconds()
	}
	if tm.SafetyBytes > 0 {
		tm.HopMicros += m.hop(ctx, hopSafety).Microseconds()
	}
}

// PostInference makes the billing hop, before the terminal event or after
// it (PostMode).
func (m *Model) PostInference(ctx context.Context, path runtime.ServePath, tm *protocol.Timings) func(context.Context) {
	if m.opts.HopLatency <= 0 {
		return nil
	}
	if m.async(path) {
		return func(ctx context.Context) { m.hop(ctx, hopBilling) }
	}
	tm.HopMicros += m.hop(ctx, hopBilling).Microseconds()
	return nil
}

// async reports whether a response on path runs its post-inference work
// after its terminal event: over a connection, unless the mode says.
func (m *Model) async(p runtime.ServePath) bool {
	switch m.opts.PostInference {
	case PostSync:
		return false
	case PostAsync:
		return true
	}
	return p.Transport != "http" // see runtime.ServePath
}

// hop makes one simulated service call: it waits HopLatency, or until ctx
// ends, and returns how long it waited.
func (m *Model) hop(ctx context.Context, name string) time.Duration {
	d := m.opts.HopLatency
	if d <= 0 {
		return 0
	}
	if m.opts.OnHop != nil {
		m.opts.OnHop(name)
	}
	t0 := m.opts.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return m.opts.Now().Sub(t0)
}
