package ablate

import (
	"math"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// lagRecorder turns one client's delta events into token delivery lags.
// A sampling step's tokens are due 1/TPS apart; the step's schedule is the
// earliest that no token beat: t0 = min over deltas of (arrival − i/TPS),
// i the index in the step of the delta's last token. Each token i of a delta
// that arrived at a lags arrival − (t0 + i/TPS): a merged delta's earlier
// tokens lag more. A late first token therefore counts too (against the
// schedule the later ones kept), while the model's time to its first token
// does not. Tokens are counted with o200k_base on each delta's text.
type lagRecorder struct {
	tps   float64
	r     *sampler.Renderer
	out   *lagWindows
	start time.Time
	now   func() time.Time // time.Now; a test's clock

	at     []time.Time // the step's deltas: arrival
	last   []int       // and index of their last token
	n      int         // tokens in the step so far
	tokens int64       // in all
	frames int64
	steps  int64 // ended: pauses and turns' responses

	callTurn int // the turn of the calls call last saw; -1 at a rollout's start
}

// lagEvents are the events a lagRecorder reads: the deltas, and each
// turn's end. A load client decodes no others past their header, and a
// suspended rollout's pauses without their output: their steps end at
// their calls (lagRecorder.call).
var lagEvents = []protocol.EventType{
	protocol.EventOutputTextDelta, protocol.EventFunctionArgsDelta, protocol.EventCustomToolInputDelta,
	protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled,
}

// call ends the step of a suspended rollout's pause, at the first of its
// calls the client has run (Rollout.OnCall): they run after the pause is
// read and before the next step streams.
func (l *lagRecorder) call(c clienttools.Call) {
	if c.Turn != l.callTurn {
		l.callTurn = c.Turn
		l.steps++
		l.endStep()
	}
}

func (l *lagRecorder) event(ev protocol.Event) {
	var delta string
	switch e := ev.(type) {
	case *protocol.TextDeltaEvent:
		delta = e.Delta
	case *protocol.FunctionArgsDeltaEvent:
		delta = e.Delta
	case *protocol.CustomToolInputDeltaEvent:
		delta = e.Delta
	case *protocol.ResponseEvent:
		switch e.Type {
		case protocol.EventCreated, protocol.EventInProgress: // start none
		default: // a pause or an end
			l.steps++
			l.endStep()
			l.callTurn = -1
		}
		return
	default:
		return
	}
	n := max(l.r.Count(delta), 1)
	l.n += n
	l.at, l.last = append(l.at, l.now()), append(l.last, l.n-1)
	l.tokens += int64(n)
	l.frames++
}

// drop forgets the step in progress, and the rollout's turns: it was cut
// off.
func (l *lagRecorder) drop() {
	l.clear()
	l.callTurn = -1
}

// clear forgets the step's deltas.
func (l *lagRecorder) clear() { l.at, l.last, l.n = l.at[:0], l.last[:0], 0 }

func (l *lagRecorder) endStep() {
	if len(l.at) == 0 {
		return
	}
	per := float64(time.Second) / l.tps
	t0 := math.Inf(1)
	for i, at := range l.at {
		t0 = min(t0, float64(at.Sub(l.start))-float64(l.last[i])*per)
	}
	var h histogram
	first := 0
	for i, at := range l.at {
		a := float64(at.Sub(l.start))
		for tok := first; tok <= l.last[i]; tok++ {
			h.add((a - t0 - float64(tok)*per) / 1e3)
		}
		first = l.last[i] + 1
	}
	l.out.add(int(l.at[len(l.at)-1].Sub(l.start)/time.Second), &h, int64(l.n))
	l.clear()
}

// lagWindows gathers the clients' lags by the second their step ended in.
type lagWindows struct {
	mu     sync.Mutex
	secs   []*histogram
	tokens int64
}

func (w *lagWindows) add(sec int, h *histogram, tokens int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.secs) <= sec {
		w.secs = append(w.secs, &histogram{})
	}
	w.secs[sec].merge(h)
	w.tokens += tokens
}

// window is second sec's histogram, and the tokens recorded so far.
func (w *lagWindows) window(sec int) (*histogram, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &histogram{}
	if sec >= 0 && sec < len(w.secs) {
		h.merge(w.secs[sec])
	}
	return h, w.tokens
}

func (w *lagWindows) all() *histogram {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &histogram{}
	for _, s := range w.secs {
		h.merge(s)
	}
	return h
}

// histogram counts values (microseconds, ≥ 0) in buckets 1% wide, so that
// any quantile of millions of lags is read to within 1% in a few KB.
type histogram struct {
	counts []int64
	n      int64
}

const histGrowth = 1.01

func (h *histogram) add(us float64) {
	i := 0
	if us > 1 {
		i = int(math.Ceil(math.Log(us) / math.Log(histGrowth)))
	}
	for len(h.counts) <= i {
		h.counts = append(h.counts, 0)
	}
	h.counts[i]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for len(h.counts) < len(o.counts) {
		h.counts = append(h.counts, 0)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile is the upper bound of the bucket that holds quantile q; 0 for
// no values.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= max(rank, 1) {
			if i == 0 {
				return 1
			}
			return math.Pow(histGrowth, float64(i))
		}
	}
	return math.Pow(histGrowth, float64(len(h.counts)-1))
}
