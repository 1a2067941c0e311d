package enginemodel

import (
	"slices"
	"time"
)

// Engine is the engine Simulate runs, driven a step at a time, for a
// caller whose requests depend on what the engine did: a rollout's next
// turn arrives once its tools have run after its last turn ended
// (RunLoad). At each step's start the waiting sequences are admitted,
// first come first served, as long as the cache has room (the first that
// does not fit holds the rest back); a step decodes one token for every
// sequence past its prefill, prefills what the sequences admitted need
// (their prompt less the blocks the cache holds; swapped blocks come back
// at the swap bandwidth), first come first served within
// Profile.MaxBatchedTokens (a longer prompt takes more steps, and its
// first token comes with the step that ends its prefill), and takes
// Profile.StepTime of them, with the time to read the decoding sequences'
// contexts (Profile.AttentionTime) and to swap back what the sequences
// admitted need. A sequence holds its prompt's blocks and
// private blocks for the rest of its prompt and its output until it ends,
// then releases them as its Policy says.
//
// Not safe for concurrent use.
type Engine struct {
	p       *Profile
	cache   *Cache
	now     time.Time
	waiting []*sequence // arrived, not admitted: first come, first served
	run     []*sequence // admitted, in the order they were
	made    []int       // the IDs of the sequences that made a token in the last step
	stats   Stats

	// The head of waiting found no room when the cache had seen these
	// releases, and no pin expired before retry: until one of these
	// changes, it finds none again (a long prompt's admission reads every
	// block of it).
	blocked  *sequence
	releases int
	retry    time.Time
}

// sequence is a request in the engine.
type sequence struct {
	req      Request
	served   Served
	seq      *Seq
	produced int // tokens decoded
	prefill  int // prompt tokens still to prefill
	swap     int // tokens to swap in with its first step
}

// Stats are what an engine did since it started.
type Stats struct {
	Steps      int
	Busy       time.Duration // steps' time
	Decoded    int           // tokens generated
	Prefilled  int           // prompt tokens computed
	HitTokens  int           // prompt tokens found in memory
	SwapTokens int           // prompt tokens swapped back in
	Refused    int           // sequences larger than the cache: never served
	// HeldTokenTime is the integral over time of the cache that sequences
	// waiting on tools hold: pinned unused blocks and swapped-out ones,
	// in token-seconds (divide by a span for the mean).
	HeldTokenTime float64
}

// NewEngine is an idle engine for p (which must pass Check) whose clock
// reads start.
func NewEngine(p *Profile, start time.Time) *Engine {
	return &Engine{p: p, cache: NewCache(p), now: start}
}

// Now is the engine's clock: the end of its last step, or the time it
// was last moved to.
func (e *Engine) Now() time.Time { return e.now }

// Stats reports what the engine did so far.
func (e *Engine) Stats() Stats { return e.stats }

// Busy reports whether a sequence runs or waits to be admitted.
func (e *Engine) Busy() bool { return len(e.run)+len(e.waiting) > 0 }

// Submit queues r, which has arrived (by Now), behind the sequences
// submitted before it, or, when r names its Program, ahead of those of
// later programs: first come, first served by program.
func (e *Engine) Submit(r Request) {
	s := &sequence{req: r}
	i := len(e.waiting)
	for i > 0 && s.before(e.waiting[i-1]) {
		i--
	}
	e.waiting = slices.Insert(e.waiting, i, s)
}

// before reports whether s goes ahead of o, submitted before it.
func (s *sequence) before(o *sequence) bool {
	return !s.req.Program.IsZero() && !o.req.Program.IsZero() && s.req.Program.Before(o.req.Program)
}

// Step admits the waiting sequences the cache has room for, then, if any
// sequence runs, makes one step and moves the clock to its end. It returns
// the sequences that ended: those the step finished, and those too large
// for the cache ever to hold (never served: a zero Finish); and whether
// it stepped. An engine that did not step waits for an arrival or a pin's
// expiry (NextExpiry): the caller moves its clock (Wait).
func (e *Engine) Step() (ended []Served, stepped bool) {
	p, t := e.p, e.now
	for len(e.waiting) > 0 {
		s := e.waiting[0]
		r := &s.req
		tail := r.PromptTokens - len(r.Prompt)*p.BlockTokens + max(r.Output, 0)
		private := (tail + p.BlockTokens - 1) / p.BlockTokens
		if len(r.Prompt)+private > e.cache.capacity { // it can never fit: not served
			e.waiting = e.waiting[1:]
			e.stats.Refused++
			ended = append(ended, Served{ID: r.ID})
			continue
		}
		if s == e.blocked && e.releases == e.cache.releases && (e.retry.IsZero() || t.Before(e.retry)) {
			break
		}
		seq, a, ok := e.cache.Admit(r.Prompt, private, t)
		if !ok {
			e.blocked, e.releases = s, e.cache.releases
			e.retry, _ = e.cache.NextExpiry(t)
			break
		}
		e.waiting = e.waiting[1:]
		s.seq, s.swap = seq, a.Swapped*p.BlockTokens
		s.prefill = r.PromptTokens - (a.Hit+a.Swapped)*p.BlockTokens
		s.served = Served{ID: r.ID, Admitted: t, Admission: a, Recomputed: s.prefill}
		e.stats.HitTokens += a.Hit * p.BlockTokens
		e.stats.SwapTokens += s.swap
		e.run = append(e.run, s)
	}
	if len(e.run) == 0 {
		return ended, false
	}
	// The step's tokens: a token for each sequence past its prefill, then
	// prefill, first come first served, within MaxBatchedTokens.
	budget := p.MaxBatchedTokens
	if budget == 0 {
		budget = int(^uint(0) >> 1)
	}
	prefill, swap, decoding, context := 0, 0, 0, 0
	for _, s := range e.run {
		if s.prefill == 0 && s.req.Output > 0 {
			decoding++
			context += s.req.PromptTokens + s.produced
		}
	}
	budget -= decoding
	stepping := make([]bool, len(e.run)) // those that produce a token (or end) this step
	for i, s := range e.run {
		if s.prefill > 0 {
			n := min(s.prefill, max(budget, 0))
			s.prefill -= n
			budget -= n
			prefill += n
			if s.prefill > 0 {
				continue // prefilled over more steps: no token yet
			}
			if s.req.Output > 0 {
				decoding++
				context += s.req.PromptTokens
			}
		}
		swap += s.swap
		s.swap = 0
		stepping[i] = true
	}
	d := p.StepTime(decoding, prefill) + p.AttentionTime(context) + p.SwapTime(swap)
	e.hold(d)
	t = t.Add(d)
	e.now = t
	e.stats.Steps++
	e.stats.Busy += d
	e.stats.Decoded += decoding
	e.stats.Prefilled += prefill
	kept := e.run[:0]
	e.made = e.made[:0]
	for i, s := range e.run {
		if !stepping[i] {
			kept = append(kept, s)
			continue
		}
		if s.req.Output > 0 { // a sequence of no output ends with its prefill, no token
			s.produced++
			e.made = append(e.made, s.req.ID)
		}
		if s.produced == 1 {
			s.served.FirstToken = t
		}
		if s.produced < s.req.Output {
			kept = append(kept, s)
			continue
		}
		s.served.Finish = t
		s.seq.Name(s.req.OutputBlocks)
		e.cache.Release(s.seq, s.req.Policy, t)
		ended = append(ended, s.served)
	}
	clear(e.run[len(kept):])
	e.run = kept
	return ended, true
}

// Made reports the IDs of the sequences that made a token in the last
// step, in the order they run; the slice is the engine's until its next
// step.
func (e *Engine) Made() []int { return e.made }

// Abort ends the sequence of that ID, waiting or running, before its
// end: its blocks are released as Discard releases them (a request its
// client cancelled). It reports whether the engine had it.
func (e *Engine) Abort(id int) bool {
	for i, s := range e.waiting {
		if s.req.ID == id {
			e.waiting = slices.Delete(e.waiting, i, i+1)
			if e.blocked == s {
				e.blocked = nil
			}
			return true
		}
	}
	for i, s := range e.run {
		if s.req.ID == id {
			e.run = slices.Delete(e.run, i, i+1)
			e.cache.Release(s.seq, Policy{Kind: Discard}, e.now)
			return true
		}
	}
	return false
}

// NextExpiry is the earliest time after Now at which a pinned unused
// block may go, and false when none is pinned past Now.
func (e *Engine) NextExpiry() (time.Time, bool) { return e.cache.NextExpiry(e.now) }

// Wait moves the clock of an engine that did not step to t (not before
// Now): an arrival, or a pin's expiry.
func (e *Engine) Wait(t time.Time) {
	if t.After(e.now) {
		e.hold(t.Sub(e.now))
		e.now = t
	}
}

// hold counts the cache held for sequences waiting on tools over the d
// from Now: as it is at Now (pins that expire within d count to its end:
// the engine looks again only at its next step).
func (e *Engine) hold(d time.Duration) {
	held := e.cache.Held(e.now)
	e.stats.HeldTokenTime += float64(held*e.p.BlockTokens) * d.Seconds()
}
