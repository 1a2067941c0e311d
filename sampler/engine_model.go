package sampler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/sampler/enginemodel"
)

// EngineModel is a served engine: an Engine given one (Engine.SetModel)
// paces the local models' samples by a simulated inference engine
// (enginemodel.Engine) instead of each sample's Timing. Every sample is a
// sequence of that engine: it waits to be admitted while the KV cache has
// no room for it, its prompt costs prefill for the blocks the cache does
// not hold, and it gets a token at the end of each engine step, whose time
// grows with the batch of every sample running at once. As a sample ends
// its cache is released by the model's policy (discard, pin, swap) while
// its rollout's tools run, or at once when the server knows the rollout
// ended (Request.Suspended, enginemodel.Policy.Ending): the same function
// the simulator releases by. So a client sees the engine effect: a turn
// that comes back after its pin expired prefills its context again.
//
// Its clock runs Speed times faster than the real one, so that a live run
// of engine-bound turns finishes in minutes; what it reports
// (Result.Engine) is in its own, simulated time. Everything it does is
// simulated: Label says so, and so do the server's /v1/models and every
// response's timings.
//
// One goroutine steps the engine while it has sequences; the emits it
// calls must not wait, as Engine's. Safe for concurrent use.
type EngineModel struct {
	opts  EngineModelOptions
	label string

	mu      sync.Mutex
	eng     *enginemodel.Engine
	origin  time.Time // when the model was made: its clock read the same then
	seqs    map[int]*modelSeq
	ids     int
	outputs map[uint64]int       // tokens each served prompt's turn made, by the prompt's hash (modelPrompt.last)
	started map[string]time.Time // when each rollout (Request.Session, else CacheKey) was first seen: ByRollout's order
	aborted []*modelSeq          // cancelled by their callers, for the stepping goroutine to abort
	running bool                 // the stepping goroutine is live
	busy    bool                 // and its last turn stepped: the engine's clock runs on its own, steps back to back
	kick    chan struct{}
}

// EngineModelOptions configure an EngineModel.
type EngineModelOptions struct {
	Profile *enginemodel.Profile
	// Policy is what becomes of a sequence's cache while its rollout
	// waits on tools.
	Policy enginemodel.Policy
	// ByRollout admits the turns of rollouts begun earlier first (the
	// simulator's Load.ByProgram), a rollout being a Request's Session or,
	// without one, its CacheKey; a request with neither is a rollout of
	// its own, begun as it arrives.
	ByRollout bool
	// Speed is how many simulated seconds pass in a real one; 0 is 1.
	Speed float64
}

// modelSeq is a sample in the engine model.
type modelSeq struct {
	id      int
	seq     *sequence
	arrived time.Time // simulated
	served  enginemodel.Served
	over    bool // the engine ended it, or it was aborted: its sequence ends, once
}

// NewEngineModel is an idle served engine; its profile must pass Check.
func NewEngineModel(o EngineModelOptions) (*EngineModel, error) {
	if o.Profile == nil {
		return nil, errors.New("sampler: an engine model needs a profile")
	}
	if err := o.Profile.Check(); err != nil {
		return nil, err
	}
	switch {
	case o.Speed < 0:
		return nil, fmt.Errorf("sampler: engine model speed %v is negative", o.Speed)
	case o.Speed == 0:
		o.Speed = 1
	}
	if o.Policy.Kind == enginemodel.Pin && o.Policy.TTL <= 0 {
		return nil, errors.New("sampler: the pin policy needs a TTL above 0")
	}
	now := time.Now()
	m := &EngineModel{opts: o, eng: enginemodel.NewEngine(o.Profile, now), origin: now,
		seqs: make(map[int]*modelSeq), outputs: make(map[uint64]int), started: make(map[string]time.Time),
		kick: make(chan struct{}, 1)}
	m.label = fmt.Sprintf("simulated engine %s, %s", o.Profile.Name, PolicyName(o.Policy, o.ByRollout))
	if o.Speed != 1 {
		m.label += fmt.Sprintf(", time ×%g", o.Speed)
	}
	return m, nil
}

// PolicyName names a policy as tether ablate --engine does: discard, pin
// 10s, swap; ", by rollout" when rollouts begun earlier go first.
func PolicyName(p enginemodel.Policy, byRollout bool) string {
	name := "discard"
	switch p.Kind {
	case enginemodel.Pin:
		name = "pin " + p.TTL.String()
	case enginemodel.Swap:
		name = "swap"
	}
	if byRollout {
		name += ", by rollout"
	}
	return name
}

// Label says what the model is: "simulated engine PROFILE, POLICY", and
// its speed when it is not 1.
func (m *EngineModel) Label() string { return m.label }

// Stats reports what the simulated engine did so far.
func (m *EngineModel) Stats() enginemodel.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.eng.Stats()
}

// EngineResult is what a served engine did with a sample, in its simulated
// time.
type EngineResult struct {
	Label string
	// Queued is from the sample's arrival to its admission; FirstToken to
	// its first token (its prefill included).
	Queued, FirstToken time.Duration
	// The prompt's tokens found in memory (Hit), brought back from host
	// memory (Swapped), and prefilled (Recomputed).
	Hit, Swapped, Recomputed int
}

// errTooLarge is a sample whose prompt and output the whole cache could not
// hold.
var errTooLarge = errors.New("sampler: the prompt and output are larger than the simulated engine's KV cache")

// sim is the model's time at real time t.
func (m *EngineModel) sim(t time.Time) time.Time {
	return m.origin.Add(time.Duration(float64(t.Sub(m.origin)) * m.opts.Speed))
}

// real is the real time at the model's time t.
func (m *EngineModel) real(t time.Time) time.Time {
	return m.origin.Add(time.Duration(float64(t.Sub(m.origin)) / m.opts.Speed))
}

// sample is sampleParts for a backend whose engine has a model.
func (m *EngineModel) sample(ctx context.Context, r *Renderer, cache *PrefixCache, req *Request,
	choose func(*Request) (parts []part, skip int), emit func(Delta)) (Result, error) {
	start := req.Start
	if start.IsZero() {
		start = time.Now()
	}
	hdr, n := cache.headerOf(req)
	p := req.Prompt
	if p == nil {
		for _, it := range req.Items {
			p = p.Append(r.Item(it))
		}
	}
	mp := newModelPrompt(hdr, n, p)
	parts, skip := choose(req)
	seq := newSequence(ctx, r, Timing{}, start, 0, skip, parts, req.MaxOutputTokens, emit)
	seq.modelled = true
	if req.Logprobs {
		seq.logprobs, seq.top = true, req.TopLogprobs
	}
	visible, calls := 0, false
	for i, pt := range parts {
		visible += len(seq.toks[i])
		calls = calls || pt.call
	}
	if req.MaxOutputTokens > 0 {
		visible = min(visible, req.MaxOutputTokens)
	}
	ms := m.submit(seq, mp, skip, visible, m.opts.Policy.Ending(req.Suspended && !calls), cmp.Or(req.Session, req.CacheKey))
	select {
	case <-seq.done:
	case <-ctx.Done():
		m.abort(ms)
		<-seq.done
	}
	if seq.panicked != nil {
		panic(seq.panicked)
	}
	res := seq.res
	s := ms.served // the stepping goroutine wrote it before it ended seq
	res.PromptTokens, res.ReasoningTokens = mp.tokens(), skip
	res.CachedPromptTokens = (s.Admission.Hit + s.Admission.Swapped) * m.opts.Profile.BlockTokens
	res.Engine = &EngineResult{Label: m.label, Hit: s.Admission.Hit * m.opts.Profile.BlockTokens,
		Swapped: s.Admission.Swapped * m.opts.Profile.BlockTokens, Recomputed: s.Recomputed}
	if !s.Admitted.IsZero() {
		res.Engine.Queued = s.Admitted.Sub(ms.arrived)
	}
	if !s.FirstToken.IsZero() {
		res.Engine.FirstToken = s.FirstToken.Sub(ms.arrived)
	}
	return res, seq.err
}

// submit queues seq with the engine, as a request of hidden then visible
// output tokens whose cache policy releases, and starts the stepping
// goroutine if it is idle. The output's blocks are named for the next
// turn to find unless some of it is hidden (reasoning: the next prompt
// holds the rest at other positions; enginemodel.Turn.Hidden).
func (m *EngineModel) submit(seq *sequence, mp modelPrompt, hidden, visible int, policy enginemodel.Policy, rollout string) *modelSeq {
	seq.done = make(chan struct{})
	b := m.opts.Profile.BlockTokens
	m.mu.Lock()
	now := m.sim(time.Now())
	switch {
	case !m.running:
		m.eng.Wait(now) // idle until now
	case m.busy && m.eng.Now().Before(now):
		now = m.eng.Now() // the steps run late of the real clock: it arrives as the engine sees it
	}
	m.ids++
	ms := &modelSeq{id: m.ids, seq: seq, arrived: now}
	m.seqs[ms.id] = ms
	req := enginemodel.Request{ID: ms.id, Arrive: now, Prompt: mp.blocks(b, m.outputLocked), PromptTokens: mp.tokens(),
		Output: hidden + visible, Policy: policy}
	if hidden == 0 {
		req.OutputBlocks = mp.outputBlocks(b, visible)
		if len(m.outputs) >= maxModelPrompts {
			clear(m.outputs)
		}
		m.outputs[mp.last()] = visible
	}
	if m.opts.ByRollout {
		at, ok := m.started[rollout]
		if rollout == "" { // a rollout the server cannot name: it begins here
			at, ok = now, true
		}
		if !ok {
			if len(m.started) >= maxModelPrompts {
				clear(m.started)
			}
			at = now
			m.started[rollout] = at
		}
		req.Program = at
	}
	m.eng.Submit(req)
	start := !m.running
	m.running = true
	m.mu.Unlock()
	if start {
		go m.loop()
	} else {
		m.wake()
	}
	return ms
}

// maxModelPrompts bounds the prompts (and rollouts) the model remembers:
// past it, it forgets them all, and their next turns find their output's
// blocks no more than a restarted engine would.
const maxModelPrompts = 1 << 16

func (m *EngineModel) outputLocked(hash uint64) (int, bool) {
	n, ok := m.outputs[hash]
	return n, ok
}

// abort has the stepping goroutine end ms before the engine does: its
// caller's context ended.
func (m *EngineModel) abort(ms *modelSeq) {
	m.mu.Lock()
	m.aborted = append(m.aborted, ms)
	m.mu.Unlock()
	m.wake()
}

func (m *EngineModel) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// loop is the stepping goroutine: it makes the engine's steps, each taking
// its time (on the model's clock), and gives each sequence that made a
// token in it that token; it ends when the engine has nothing to do.
func (m *EngineModel) loop() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var made, ended []*modelSeq
	var stepping *modelSeq
	defer func() {
		if stepping != nil { // its emit ended the goroutine (runtime.Goexit): as Engine's shards do
			stepping.seq.panicked, stepping.seq.finished = errEmitExited, true
			go m.loop()
			m.finish(ended)
		}
	}()
	for {
		m.mu.Lock()
		m.abortLocked()
		if !m.busy { // it waited for an arrival or for room: its clock is the real one's
			m.eng.Wait(m.sim(time.Now()))
		}
		endedNow, stepped := m.eng.Step()
		m.busy = stepped
		ended = m.endedLocked(ended[:0], endedNow)
		if !stepped {
			waiting := m.eng.Busy() // a sequence waits for room
			next, pinned := m.eng.NextExpiry()
			if !waiting {
				m.running = false
			}
			m.mu.Unlock()
			m.finish(ended)
			if !waiting {
				return
			}
			// A sequence waits for room: a release, an abort, or a pin's end.
			if pinned {
				timer.Reset(time.Until(m.real(next)))
			}
			select {
			case <-timer.C:
			case <-m.kick:
				timer.Stop()
			}
			continue
		}
		made = made[:0]
		for _, id := range m.eng.Made() {
			if ms := m.seqs[id]; ms != nil {
				made = append(made, ms)
			}
		}
		at := m.real(m.eng.Now())
		m.mu.Unlock()
		// The step's time, on the model's clock: steps follow each other
		// on it, each released at its end's real time, so that a late
		// wake-up (a timer's, the goroutine's wait for a CPU) makes no
		// later step later, as Timing's schedule (a step of 10 ms at
		// speed 20 is a sleep of 0.5 ms, a timer's lateness tens of
		// microseconds: counted on, the lateness would be the engine's
		// time twenty times over).
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			<-timer.C
		}
		now := time.Now()
		for _, ms := range made {
			ms.seq.granted++
			if !ms.seq.finished {
				stepping = ms
				ms.seq.stepGuarded(now)
			}
		}
		stepping = nil
		m.finish(ended)
	}
}

// abortLocked aborts the sequences whose callers' contexts ended, and ends
// them.
func (m *EngineModel) abortLocked() {
	for _, ms := range m.aborted {
		if !ms.over {
			m.eng.Abort(ms.id)
			delete(m.seqs, ms.id)
			ms.over = true
			ms.seq.end(ms.seq.ctx.Err())
		}
	}
	clear(m.aborted)
	m.aborted = m.aborted[:0]
}

// endedLocked takes the sequences the engine ended, appended to out, with
// what it did with them.
func (m *EngineModel) endedLocked(out []*modelSeq, served []enginemodel.Served) []*modelSeq {
	for _, s := range served {
		ms := m.seqs[s.ID]
		if ms == nil || ms.over {
			continue
		}
		delete(m.seqs, s.ID)
		ms.over, ms.served = true, s
		out = append(out, ms)
	}
	return out
}

// finish ends the sequences the engine ended, once their last step's
// tokens are out: every token they have left goes with it (the count the
// engine ran is theirs, this only guards a mismatch), and one the cache
// could never hold fails.
func (m *EngineModel) finish(ended []*modelSeq) {
	now := time.Now()
	for _, ms := range ended {
		seq := ms.seq
		switch {
		case ms.served.Finish.IsZero():
			seq.end(errTooLarge)
			continue
		case !seq.finished:
			seq.granted = int(^uint(0) >> 1)
			seq.stepGuarded(now)
		}
		seq.end(seq.err)
	}
}
