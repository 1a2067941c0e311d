package enginemodel

import (
	"container/heap"
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Job is one rollout as an engine sees it: its turns, each a sequence
// whose prompt is the previous turn's prompt and output with more
// appended.
type Job struct {
	Turns []Turn
}

// Turn is one model call of a Job.
type Turn struct {
	// Append is the prompt tokens added before the turn: the task for the
	// first (after the header every job shares), the tools' outputs for a
	// later one.
	Append int
	// Output is the tokens the turn generates: reasoning, text and calls.
	Output int
	// Hidden is the part of Output that the next turn's prompt does not
	// hold: the reasoning, which the API does not send back. It comes
	// first, so the output's cache is of no use to the next turn (its
	// text and calls sit at other positions there) and is not kept.
	Hidden int
	// Tools is the time its tools take after it (a last turn's is not
	// used).
	Tools time.Duration
}

// Design is what a client design changes in the engine: the time its API
// adds to each turn, and whether the engine learns that a rollout ended.
type Design struct {
	Name string
	// Overhead is the API's time between a turn's tools ending (or its
	// job starting) and the engine seeing it, and OverheadPerToken more
	// for each token of the turn's prompt (a design that sends and
	// processes the whole conversation every turn).
	Overhead, OverheadPerToken time.Duration
	// KnowsEnd: the engine learns that a rollout ended (a suspended
	// rollout's response completes), so its last turn's cache is released
	// unpinned (Policy.Unpin) and not swapped out, whatever the policy;
	// others cannot tell a last turn from one whose tools run.
	KnowsEnd bool
}

// Load is a closed-loop run: Clients clients, each running jobs back to
// back, the next of Jobs each time, from a start spread at random over
// Stagger until Duration has passed (the jobs started by then finish).
type Load struct {
	Profile  *Profile
	Header   int // prompt tokens every job begins with (instructions and tools), the same for all
	Jobs     []Job
	Clients  int
	Duration time.Duration
	Stagger  time.Duration
	// Starts, when set, are each client's first start from the run's
	// beginning (one a client), in place of Stagger's random ones: a live
	// run's, to simulate it alike.
	Starts []time.Duration
	Design Design
	Policy Policy // for a turn's cache while its tools run
	// ByProgram admits the turns of rollouts begun earlier first
	// (Request.Program), not in the order the turns arrive.
	ByProgram bool
	Seed      uint64 // of the starts
}

// LoadResult is what a Load measured, in simulated time.
type LoadResult struct {
	Jobs     int             // jobs done
	Refused  int             // jobs a turn of which the cache could never hold
	JobTimes []time.Duration // each done job's, from its start to its last turn's end
	TTFT     []time.Duration // each turn's, from its arrival at the engine to its first token
	Prompt   int             // prompt tokens of the turns served
	// Recomputed is the prompt tokens computed again: prefilled though
	// the conversation had them before the turn (its earlier turns'
	// prompts and outputs, to their last full block; the shared header).
	Recomputed int
	Span       time.Duration // from the start to the last job's end
	Stats      Stats
}

// HitRate is the share of the served prompts' tokens found in memory.
func (r LoadResult) HitRate() float64 {
	if r.Prompt == 0 {
		return 0
	}
	return float64(r.Stats.HitTokens) / float64(r.Prompt)
}

// HeldTokens is the mean cache held by sequences waiting on tools, in
// tokens.
func (r LoadResult) HeldTokens() float64 {
	if r.Span <= 0 {
		return 0
	}
	return r.Stats.HeldTokenTime / r.Span.Seconds()
}

// client is one of a Load's clients: the job it runs, and its
// conversation's tokens so far, named by block.
type client struct {
	id       int
	at       time.Time // its next turn's arrival
	job      *Job
	instance uint64 // the job's, unique to it: its tokens after the header
	turn     int
	start    time.Time
	chain    blockChain
	fresh    int // its turn's prompt tokens that no cache could hold: past the full blocks of what came before
}

// RunLoad runs l on an Engine. Every job's prompt after the shared
// header is its own (no two jobs share more than the header). It stops
// with ctx's error when ctx ends first.
func RunLoad(ctx context.Context, l Load) (LoadResult, error) {
	t0 := time.Unix(0, 0)
	e := NewEngine(l.Profile, t0)
	rng := rand.New(rand.NewPCG(l.Seed, 0x7e7e7))
	var res LoadResult
	var instances uint64
	clients := make([]*client, l.Clients)
	var due clientHeap
	header := make([]uint32, l.Header)
	for i := range header {
		header[i] = uint32(i)
	}
	// arrive queues c's next turn, to reach the engine after the API's
	// time from from.
	arrive := func(c *client, from time.Time) {
		prompt := c.chain.n + c.job.Turns[c.turn].Append
		c.at = from.Add(l.Design.Overhead + time.Duration(prompt)*l.Design.OverheadPerToken)
		heap.Push(&due, c)
	}
	start := func(c *client, at time.Time) {
		instances++
		c.job, c.instance, c.turn, c.start = &l.Jobs[int(instances-1)%len(l.Jobs)], instances, 0, at
		c.chain = blockChain{blockTokens: l.Profile.BlockTokens}
		c.chain.extend(header, 0, 0)
		arrive(c, at)
	}
	for i := range clients {
		clients[i] = &client{id: i}
		var off time.Duration
		switch {
		case i < len(l.Starts):
			off = l.Starts[i]
		case l.Stagger > 0:
			off = time.Duration(rng.Int64N(int64(l.Stagger)))
		}
		start(clients[i], t0.Add(off))
	}
	end := t0.Add(l.Duration)
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
		for len(due) > 0 && !due[0].at.After(e.Now()) {
			c := heap.Pop(&due).(*client)
			tr := c.job.Turns[c.turn]
			known := len(c.chain.hashes)
			c.chain.extend(nil, c.instance, tr.Append)
			prompt := c.chain.hashes
			tokens := c.chain.n
			c.fresh = tokens - known*l.Profile.BlockTokens
			c.chain.extend(nil, c.instance, tr.Output-tr.Hidden)
			policy := l.Policy.Ending(l.Design.KnowsEnd && c.turn == len(c.job.Turns)-1)
			r := Request{ID: c.id, Arrive: c.at, Prompt: prompt, PromptTokens: tokens, Output: tr.Output, Policy: policy}
			if tr.Hidden == 0 {
				r.OutputBlocks = c.chain.hashes[len(prompt):]
			}
			if l.ByProgram {
				r.Program = c.start
			}
			e.Submit(r)
		}
		ended, stepped := e.Step()
		for _, s := range ended {
			c := clients[s.ID]
			tr := c.job.Turns[c.turn]
			done := s.Finish
			if s.Finish.IsZero() { // refused: the job goes no further
				res.Refused++
				c.turn, done = len(c.job.Turns)-1, e.Now()
			} else {
				res.Prompt += s.Admission.Hit*l.Profile.BlockTokens + s.Recomputed + s.Admission.Swapped*l.Profile.BlockTokens
				res.Recomputed += max(s.Recomputed-c.fresh, 0)
				if !s.FirstToken.IsZero() {
					res.TTFT = append(res.TTFT, s.FirstToken.Sub(c.at))
				}
			}
			c.turn++
			if c.turn < len(c.job.Turns) {
				arrive(c, done.Add(tr.Tools))
				continue
			}
			if !s.Finish.IsZero() {
				res.Jobs++
				res.JobTimes = append(res.JobTimes, done.Sub(c.start))
			}
			res.Span = done.Sub(t0)
			if done.Before(end) {
				start(c, done)
			}
		}
		if stepped {
			continue
		}
		if len(due) == 0 && !e.Busy() {
			break
		}
		at, ok := e.NextExpiry()
		if len(due) > 0 && (!ok || due[0].at.Before(at)) {
			at, ok = due[0].at, true
		}
		if !ok {
			panic("enginemodel: a waiting sequence and nothing to wait for")
		}
		e.Wait(at)
	}
	res.Stats = e.Stats()
	return res, nil
}

// blockChain is a conversation's tokens named by block as BlockHashes
// names them, extended as the conversation grows.
type blockChain struct {
	blockTokens int
	hashes      []uint64
	tail        []uint32 // the tokens past the last full block
	n           int      // tokens
	prev        uint64
}

// extend adds toks, then n tokens made of instance and their position
// (unique to the instance).
func (c *blockChain) extend(toks []uint32, instance uint64, n int) {
	add := func(t uint32) {
		c.tail = append(c.tail, t)
		c.n++
		if len(c.tail) < c.blockTokens {
			return
		}
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], c.prev)
		h.Write(b[:])
		for _, t := range c.tail {
			binary.LittleEndian.PutUint32(b[:4], t)
			h.Write(b[:4])
		}
		c.prev = h.Sum64()
		c.hashes = append(c.hashes, c.prev)
		c.tail = c.tail[:0]
	}
	for _, t := range toks {
		add(t)
	}
	for range n {
		add(uint32(mix(instance<<32 | uint64(c.n))))
	}
}

// mix is splitmix64's finalizer: distinct inputs, scattered outputs.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// clientHeap orders clients by their next turn's arrival.
type clientHeap []*client

func (h clientHeap) Len() int { return len(h) }
func (h clientHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].id < h[j].id
}
func (h clientHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *clientHeap) Push(x any)   { *h = append(*h, x.(*client)) }
func (h *clientHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
