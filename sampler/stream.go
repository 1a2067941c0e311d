package sampler

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
)

// sampleParts is the body every local backend (Scripted, Replay) shares: it
// times the sample from its start, looks the prompt up in the prefix cache
// (the lookup is part of the model's time), asks choose for the parts to
// emit and the unsent tokens to pace first, and streams them: on the
// caller's goroutine when the Timing is unpaced, else stepped by e's
// engine.
func sampleParts(ctx context.Context, e *engineRef, r *Renderer, t Timing, cache *PrefixCache, req *Request,
	choose func(*Request) (parts []part, skip int), emit func(Delta)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if req == nil {
		req = &Request{}
	}
	var start time.Time
	if m := e.model(); m != nil {
		return m.sample(ctx, r, cache, req, choose, emit)
	}
	if t.Paced() {
		if start = req.Start; start.IsZero() {
			start = time.Now()
		}
	}
	prompt, cached := cache.Prefill(req)
	parts, skip := choose(req)
	seq := newSequence(ctx, r, t, start, prompt-cached, skip, parts, req.MaxOutputTokens, emit)
	if req.Logprobs {
		seq.logprobs, seq.top = true, req.TopLogprobs
	}
	if t.Paced() && len(parts) > 0 {
		e.get().run(ctx, seq)
	} else {
		seq.step(time.Time{})
	}
	res := seq.res
	res.PromptTokens, res.CachedPromptTokens, res.ReasoningTokens = prompt, cached, skip
	return res, seq.err
}

// sequence is one sample being streamed: its parts, token by token, after
// skip tokens that are paced but not sent (reasoning), and a cursor into
// them that step advances. A Start delta is emitted when its part's first
// token is due, right before it; a citation once the text it cites has
// streamed. Every part is tokenized when the sequence is made, during the
// time to first token, so that the work does not make the first token late.
type sequence struct {
	ctx      context.Context
	emit     func(Delta)
	t        Timing
	start    time.Time // zero when unpaced
	uncached int
	skip     int
	limit    int  // MaxOutputTokens; 0 = none
	logprobs bool // give each text token its (synthetic) logprob, with top alternatives
	top      int
	parts    []part
	toks     [][]string

	// The cursor: part k, of which n tokens are out (started: its Start
	// delta is out), and the citations of k not yet emitted.
	k       int
	started bool
	n       int
	runes   int
	cites   []protocol.Annotation

	res      Result
	err      error
	finished bool
	due      time.Time // when the next token is due (paced)
	released time.Time // when the step that releases it began, for PacerLate

	// modelled: a served engine (EngineModel) paces it, not t: a token
	// may go once the engine has made it, granted being how many it made
	// (its skip counted).
	modelled bool
	granted  int

	index    int           // in its shard's heap; -1 when not there
	done     chan struct{} // closed by end; made by Engine.run (an unpaced sample has none)
	panicked any           // what emit panicked with
}

func newSequence(ctx context.Context, r *Renderer, t Timing, start time.Time, uncached, skip int, parts []part, limit int, emit func(Delta)) *sequence {
	s := &sequence{ctx: ctx, emit: emit, t: t, start: start, uncached: uncached, skip: skip, limit: limit,
		parts: parts, toks: make([][]string, len(parts)), index: -1}
	for i, p := range parts {
		if s.toks[i] = p.toks; s.toks[i] == nil {
			s.toks[i] = r.Tokens(p.text)
		}
	}
	if len(parts) > 0 {
		s.cites = parts[0].cites
	}
	s.due = s.dueAt()
	return s
}

// dueAt is when the sequence's next token is due.
func (s *sequence) dueAt() time.Time {
	if s.start.IsZero() {
		return time.Time{}
	}
	return s.start.Add(s.t.Due(s.uncached, s.skip+s.res.OutputTokens))
}

// ready reports whether the next token may go out at now: the context has
// not ended and the token is due. It records how late the token is.
func (s *sequence) ready(now time.Time) bool {
	if err := s.ctx.Err(); err != nil {
		s.err, s.finished = err, true
		return false
	}
	if s.modelled {
		return s.skip+s.res.OutputTokens < s.granted
	}
	if s.start.IsZero() {
		return true
	}
	s.due = s.dueAt()
	if s.due.After(now) {
		return false
	}
	s.res.PacerLate = s.released.Sub(s.due)
	return true
}

// stepGuarded steps s at now, catching a panic of its emit so that the
// shard's goroutine survives it; run raises it again on the caller's
// goroutine. It returns how many tokens went out.
func (s *sequence) stepGuarded(now time.Time) (tokens int) {
	before := s.res.OutputTokens
	// How late a token is counts from when its own sample's step began, not
	// the batch's: the samples stepped before it in the batch (their emits'
	// work) made it later, which is the engine's time, as the model's.
	s.released = time.Now()
	defer func() {
		if p := recover(); p != nil {
			s.panicked, s.finished = p, true
		}
		tokens = s.res.OutputTokens - before
	}()
	s.step(now)
	return
}

// step emits everything due at now (everything, unpaced), and sets finished
// when the sequence has ended.
func (s *sequence) step(now time.Time) {
	for ; s.k < len(s.parts); s.k++ {
		p := &s.parts[s.k]
		start := Delta{Kind: TextStart}
		tok := Delta{Kind: TextDelta}
		if p.call {
			start = Delta{Kind: CallStart, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType}
			tok = Delta{Kind: ArgsDelta, CallID: p.callID, Name: p.name, Namespace: p.namespace, CallType: p.callType}
		}
		if !s.started {
			if s.limit > 0 && s.res.OutputTokens >= s.limit {
				s.res.Incomplete, s.finished = true, true
				return
			}
			if !s.ready(now) {
				return
			}
			s.emit(start)
			s.started, s.n, s.runes, s.cites = true, 0, 0, p.cites
		}
		end := Delta{Kind: PartEnd, CallID: start.CallID, Name: start.Name, Namespace: start.Namespace, CallType: start.CallType}
		for ; s.n < len(s.toks[s.k]); s.n++ {
			if s.limit > 0 && s.res.OutputTokens >= s.limit {
				end.Incomplete = true
				s.emit(end)
				s.res.Incomplete, s.finished = true, true
				return
			}
			if s.n > 0 && !s.ready(now) {
				return
			}
			tok.Text = s.toks[s.k][s.n]
			if s.logprobs && !p.call {
				tok.Logprobs = []protocol.LogProb{SyntheticLogprob(tok.Text, s.n, s.top)}
			}
			s.runes += utf8.RuneCountInString(tok.Text)
			tok.More = s.moreDue(now)
			s.emit(tok)
			s.res.OutputTokens++
			for len(s.cites) > 0 && s.cites[0].EndIndex <= s.runes {
				s.emit(Delta{Kind: Citation, Annotation: &s.cites[0]})
				s.cites = s.cites[1:]
			}
		}
		s.emit(end)
		s.started = false
	}
	s.finished = true
}

// moreDue reports whether the token after the one going out now (the
// cursor's) belongs to the same part, with no citation between them, and
// is due at now too: a paced sample's tokens that a late step releases
// together. Unpaced, a sample releases every token at once, each its own
// delta, as its consumer takes them.
func (s *sequence) moreDue(now time.Time) bool {
	switch {
	case s.start.IsZero(),
		s.n+1 >= len(s.toks[s.k]),
		s.limit > 0 && s.res.OutputTokens+1 >= s.limit,
		len(s.cites) > 0 && s.cites[0].EndIndex <= s.runes:
		return false
	case s.modelled:
		return s.skip+s.res.OutputTokens+1 < s.granted
	}
	return !s.start.Add(s.t.Due(s.uncached, s.skip+s.res.OutputTokens+1)).After(now)
}

// end closes the sequence with err; called once, by the shard that held it.
func (s *sequence) end(err error) {
	if s.err == nil {
		s.err = err
	}
	s.finished = true
	close(s.done)
}
