package sampler

import (
	"container/heap"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Engine steps the paced samples of the local backends (Scripted, Replay)
// as one batch, the way an inference engine's continuous batching makes one
// decode step for every running sequence: one timer heap holds every active
// sequence by the time its next token is due, and one goroutine per shard
// (a shard per core) wakes when the earliest is due and hands every due
// sequence its due tokens, in the goroutine it is stepping on. The goroutine
// that called Sample is woken once, when its sample ends, not per token.
//
// The pacing is the Timing's, exactly: a token is never released before it
// is due (start + Timing.Due), tokens already due go out at once, and a late
// wake-up makes no later token later. What a wake-up finds due is the batch;
// its size grows with the load, which is what makes stepping cheap at 500
// streams (one timer and one wake-up for many tokens).
//
// SetStep sets a least time between two steps of a shard, as a real
// engine's decode step takes its time: the tokens that fall due meanwhile go
// out together at the next step (never before they are due, at most the
// step after). Fewer, larger steps cost less a token (fewer wake-ups,
// frames and writes), and under load that can shorten the queue more than
// the step delays a token (docs/measuring.md); the default, 0, releases
// each token as it falls due.
//
// A shard's goroutine runs only while the shard has sequences: an idle
// Engine holds no goroutine. The emit functions it calls must not wait, on
// the network or anything else (runtime's only queue): an emit that blocks
// holds up every sample of its shard, as a slow kernel holds up a real
// engine's step. An Engine is safe for concurrent use; the zero Engine is
// not usable, use NewEngine. Under testing/synctest, an engine must be made
// in the bubble that uses it (a shard's goroutine and channels belong to
// the bubble they were made in).
type Engine struct {
	shards []*shard
	next   atomic.Uint64 // round robin over shards

	active   atomic.Int64  // sequences in the engine now
	wakes    atomic.Uint64 // wake-ups that stepped at least one sequence
	stepped  atomic.Uint64 // sequences stepped, summed over wake-ups
	tokens   atomic.Uint64 // tokens handed out
	maxBatch atomic.Int64  // the largest batch one wake-up stepped
	step     atomic.Int64  // SetStep's, in nanoseconds

	served atomic.Pointer[EngineModel] // SetModel's
}

// SetModel makes m, a served engine, pace the samples of the backends e
// steps, instead of their Timing and SetStep's least step: each sample
// gets its tokens as m's simulated engine makes them (see EngineModel).
// Nil turns it off. Set it before the backends sample.
func (e *Engine) SetModel(m *EngineModel) { e.served.Store(m) }

// Model is the served engine SetModel gave e, or nil.
func (e *Engine) Model() *EngineModel { return e.served.Load() }

// Late reports how late the engine's busiest shard has woken, the least of
// its last four steps (one late wake-up is not saturation): each past the
// earliest token it found due, or past the least time between steps
// (SetStep) when that came later; 0 when no shard steps. An engine
// that wakes late is one whose goroutines wait for the CPU: a server
// saturated. It loads an atomic a shard, for a caller that asks often (a
// connection's writer, once a batch).
func (e *Engine) Late() time.Duration {
	var late int64
	for _, sh := range e.shards {
		late = max(late, sh.late.Load())
	}
	return time.Duration(late)
}

// SetStep sets the least time between two steps of a shard (see Engine); 0
// or less: none.
func (e *Engine) SetStep(d time.Duration) { e.step.Store(int64(max(d, 0))) }

// NewEngine returns an engine with a shard per core (GOMAXPROCS).
func NewEngine() *Engine { return NewEngineShards(runtime.GOMAXPROCS(0)) }

// NewEngineShards returns an engine of n shards (at least one): n
// goroutines step its samples at most, each its share of them.
func NewEngineShards(n int) *Engine {
	n = max(n, 1)
	e := &Engine{shards: make([]*shard, n)}
	for i := range e.shards {
		e.shards[i] = &shard{e: e, kick: make(chan struct{}, 1)}
	}
	return e
}

// engineRef is a backend's engine: the one SetEngine gave it, or its own,
// made when its first paced sample needs it (an unpaced backend has none).
type engineRef struct {
	once sync.Once
	e    *Engine
}

// model is the served engine of the backend's engine, if it has one.
func (r *engineRef) model() *EngineModel { return r.get().Model() }

func (r *engineRef) get() *Engine {
	r.once.Do(func() {
		if r.e == nil {
			r.e = NewEngine()
		}
	})
	return r.e
}

// EngineStats is what an Engine has done, and what it holds now.
type EngineStats struct {
	Active   int    // sequences being stepped or waiting for their next token
	Wakes    uint64 // wake-ups that stepped at least one sequence
	Stepped  uint64 // sequences stepped, over all wake-ups: Stepped/Wakes is the mean batch
	Tokens   uint64 // output tokens handed to their samples (not the reasoning a replayed step paces unsent)
	MaxBatch int    // the most sequences one wake-up stepped
	// Late is how late the latest step woke (see Engine.Late).
	Late time.Duration
}

// Stats returns the engine's counters: the batch's composition, as an
// inference server's metrics show it.
func (e *Engine) Stats() EngineStats {
	return EngineStats{
		Active:   int(e.active.Load()),
		Wakes:    e.wakes.Load(),
		Stepped:  e.stepped.Load(),
		Tokens:   e.tokens.Load(),
		MaxBatch: int(e.maxBatch.Load()),
		Late:     e.Late(),
	}
}

// run steps seq to its end on one of the engine's shards and returns when it
// has ended: all its tokens emitted, ctx ended, or its emit panicked (the
// panic is raised again here, on the caller's goroutine, as if emit had been
// called on it). No emit of seq runs after run returns.
func (e *Engine) run(ctx context.Context, seq *sequence) {
	sh := e.shards[e.next.Add(1)%uint64(len(e.shards))]
	seq.done = make(chan struct{})
	e.active.Add(1)
	defer e.active.Add(-1)
	sh.add(seq)
	select {
	case <-seq.done:
	case <-ctx.Done():
		sh.cancel(seq)
		<-seq.done
	}
	if seq.panicked != nil {
		panic(seq.panicked)
	}
}

// shard is one stepping goroutine's heap of sequences.
type shard struct {
	e       *Engine
	mu      sync.Mutex
	seqs    seqHeap // waiting for their next token, earliest first
	running bool    // the stepping goroutine is live
	kick    chan struct{}
	late    atomic.Int64     // the least lateness of its last lateSteps steps, in nanoseconds; 0 while it is idle
	lates   [lateSteps]int64 // its last steps' lateness, a ring the stepping goroutine owns
	lateAt  int              // the ring's next slot
}

// lateSteps is how many steps in a row a shard must wake late for Late to
// say so: one late wake-up (a collection's pause, a timer that fired a
// millisecond late on an idle machine) is not an engine that waits for
// the CPU.
const lateSteps = 4

// noteLate records a step's lateness: Late is then the least of the last
// lateSteps.
func (sh *shard) noteLate(d time.Duration) {
	sh.lates[sh.lateAt] = int64(d)
	sh.lateAt = (sh.lateAt + 1) % lateSteps
	sh.late.Store(slices.Min(sh.lates[:]))
}

// resetLate forgets the shard's lateness: it is idle.
func (sh *shard) resetLate() {
	sh.lates, sh.lateAt = [lateSteps]int64{}, 0
	sh.late.Store(0)
}

// add queues seq and makes sure the stepping goroutine will see it in time.
func (sh *shard) add(seq *sequence) {
	sh.mu.Lock()
	heap.Push(&sh.seqs, seq)
	first := sh.seqs[0] == seq
	start := !sh.running
	sh.running = true
	sh.mu.Unlock()
	switch {
	case start:
		go sh.loop()
	case first: // due before what the goroutine waits for
		sh.wake()
	}
}

// cancel ends seq with its context's error if it is waiting in the heap; if
// it is being stepped, the stepping goroutine ends it (it checks the context
// before each token and before it queues the sequence again).
func (sh *shard) cancel(seq *sequence) {
	sh.mu.Lock()
	removed := seq.index >= 0
	if removed {
		heap.Remove(&sh.seqs, seq.index)
		seq.end(seq.ctx.Err())
	}
	sh.mu.Unlock()
	if removed { // the goroutine may be waiting for it: let it wait for the next, or end
		sh.wake()
	}
}

// wake makes the stepping goroutine look at the heap again.
func (sh *shard) wake() {
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// loop is the shard's stepping goroutine: it wakes when the earliest
// sequence is due, steps every due sequence, queues again the ones with
// tokens left, and ends when the heap is empty.
func (sh *shard) loop() {
	var timer *time.Timer
	var batch []*sequence
	stepping := -1     // the batch's sequence being stepped
	var next time.Time // no step before it (Engine.SetStep)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if stepping >= 0 { // an emit ended the goroutine (runtime.Goexit)
			sh.afterExit(batch, stepping)
		}
	}()
	for {
		sh.mu.Lock()
		now := time.Now()
		if len(sh.seqs) == 0 {
			sh.running = false
			sh.resetLate()
			sh.mu.Unlock()
			return
		}
		// The next step: when the earliest token is due, and not before
		// the step after the last.
		if at := sh.seqs[0].due; now.Before(at) || now.Before(next) {
			if at.Before(next) {
				at = next
			}
			sh.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(at.Sub(now))
			} else {
				timer.Reset(at.Sub(now))
			}
			select {
			case <-timer.C:
			case <-sh.kick:
			}
			continue
		}
		sh.noteLate(now.Sub(laterOf(sh.seqs[0].due, next)))
		batch = batch[:0]
		for len(sh.seqs) > 0 && !sh.seqs[0].due.After(now) {
			batch = append(batch, heap.Pop(&sh.seqs).(*sequence))
		}
		sh.mu.Unlock()

		tokens := 0
		for i, seq := range batch {
			stepping = i
			tokens += seq.stepGuarded(now)
		}
		stepping = -1
		next = now.Add(time.Duration(sh.e.step.Load()))
		sh.e.wakes.Add(1)
		sh.e.stepped.Add(uint64(len(batch)))
		sh.e.tokens.Add(uint64(tokens))
		raiseTo(&sh.e.maxBatch, int64(len(batch)))

		sh.mu.Lock()
		sh.requeueLocked(batch)
		sh.mu.Unlock()
	}
}

// requeueLocked ends the stepped sequences that are over and queues the
// others again.
func (sh *shard) requeueLocked(batch []*sequence) {
	for i, seq := range batch {
		switch {
		case seq.finished:
			seq.end(seq.err)
		case seq.ctx.Err() != nil:
			seq.end(seq.ctx.Err())
		default:
			heap.Push(&sh.seqs, seq)
		}
		batch[i] = nil
	}
}

// errEmitExited is what a sample whose emit ended the engine's goroutine
// (runtime.Goexit, as testing's FailNow does off its test's goroutine)
// panics with on its caller's goroutine.
var errEmitExited = errors.New("sampler: a sample's emit ended the engine's goroutine (runtime.Goexit)")

// afterExit keeps the shard going after an emit of batch[culprit] ended its
// goroutine: that sample fails (run panics with errEmitExited), the rest of
// the batch is queued again, and a new goroutine steps the shard.
func (sh *shard) afterExit(batch []*sequence, culprit int) {
	batch[culprit].panicked, batch[culprit].finished = errEmitExited, true
	sh.mu.Lock()
	sh.requeueLocked(batch)
	sh.running = len(sh.seqs) > 0
	restart := sh.running
	if !restart {
		sh.resetLate()
	}
	sh.mu.Unlock()
	if restart {
		go sh.loop()
	}
}

// laterOf is the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// raiseTo sets m to v if v is larger.
func raiseTo(m *atomic.Int64, v int64) {
	for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
	}
}

// seqHeap orders sequences by when their next token is due.
type seqHeap []*sequence

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h seqHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *seqHeap) Push(x any) {
	seq := x.(*sequence)
	seq.index = len(*h)
	*h = append(*h, seq)
}
func (h *seqHeap) Pop() any {
	old := *h
	seq := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	seq.index = -1
	return seq
}
