package runtime

import (
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
)

// ServePath is the way a response was served: its transport, the design, and
// where its parent state came from. Observers label what they record with
// it, and an ablation checks by it that each mode took its own path.
type ServePath struct {
	Transport string `json:"transport"` // "http", "ws" or "wt" (WebTransport)
	Design    string `json:"design"`    // "stateless", "chained", "turns" or "suspend"
	State     string `json:"state"`     // "none" (no parent), "cache" (the connection's), "store", "fork"
}

// The values of ServePath's fields.
const (
	transportHTTP   = "http"
	transportWS     = "ws"
	designStateless = "stateless"
	designChained   = "chained"
	designTurns     = "turns"
	designSuspend   = "suspend"
	stateNone       = "none"
	stateCache      = "cache"
	stateStore      = "store"
	stateFork       = "fork" // a fork of a parked rollout (response.fork)
)

// StatusAbandoned is the status an Observer is given for a response that
// ended with nobody to tell: its client went away, the server shut down, or
// nobody resumed it.
const StatusAbandoned protocol.ResponseStatus = "abandoned"

// StatusReleased is the status an Observer is given for a suspended
// rollout that left this server at a checkpointed pause, to go on from its
// checkpoint: handed over at Shutdown, hibernated, or taken over by
// another server.
const StatusReleased protocol.ResponseStatus = "released"

// Observer receives what a Server measures, as it happens: the seam through
// which an embedder exports metrics (package runtime/prommetrics serves
// them to Prometheus), as quic-go's Tracer and go-redis's Hook are. Its
// methods are called on the goroutines that serve (FrameWritten once per
// frame written, StepSampled once per sampling step), concurrently: they
// must be safe for concurrent use and must not block. Options.Observer nil
// observes nothing.
type Observer interface {
	// ResponseEnded: a response served along path ended with status
	// (StatusAbandoned: with nobody to tell); tm is its phases' times
	// and its counts (rendered and cached tokens, safety flags).
	ResponseEnded(path ServePath, status protocol.ResponseStatus, tm protocol.Timings)
	// StepSampled: one sampling step's model time, to its first token and
	// in all.
	StepSampled(firstToken, sample time.Duration)
	// StepDispatched: one step's tool calls took d, hosted and client
	// alike (a suspended rollout's pause included).
	StepDispatched(d time.Duration)
	// Paused: a suspended rollout paused for client tool outputs.
	Paused()
	// FrameWritten: a frame waited queued in its connection's outbox, then
	// took write to be written.
	FrameWritten(queued, write time.Duration)
}

// nopObserver observes nothing: a Server without an Observer.
type nopObserver struct{}

func (nopObserver) ResponseEnded(ServePath, protocol.ResponseStatus, protocol.Timings) {}
func (nopObserver) StepSampled(time.Duration, time.Duration)                           {}
func (nopObserver) StepDispatched(time.Duration)                                       {}
func (nopObserver) Paused()                                                            {}
func (nopObserver) FrameWritten(time.Duration, time.Duration)                          {}
func (nopObserver) Hop(string)                                                         {}

// FlushHolds is how many times a connection's writer held its flush, the
// server being saturated, to take the next frames with it (see
// Options.EngineLate). Safe to call from any goroutine; a metrics exporter
// reads it (runtime/prommetrics, WatchFlushHolds).
func (s *Server) FlushHolds() uint64 { return s.holds.Holds() }

// wrote counts one frame the writer took at start and wrote in write, its
// share of its batch's write: to its response's account and the observer.
func (s *Server) wrote(q outbox.Frame, start time.Time, write time.Duration) {
	wait := max(start.Sub(q.At), 0) // one queued during its batch's write waited for none of it
	if q.Acct != nil {
		q.Acct.Wrote(wait, write)
	}
	s.obs.FrameWritten(wait, write)
}
