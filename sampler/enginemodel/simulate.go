package enginemodel

import (
	"slices"
	"time"
)

// Request is one sequence for Simulate: its prompt (the hashes of its full
// blocks, BlockHashes, and its length in tokens), how many tokens it
// generates, when it arrives, and what becomes of its cache when it ends
// (its rollout then waits on tools).
type Request struct {
	ID           int
	Arrive       time.Time
	Prompt       []uint64
	PromptTokens int
	Output       int
	Policy       Policy
	// OutputBlocks are the hashes of the full blocks its output completes
	// (BlockHashes of its prompt and output, past its prompt's full
	// blocks), cached when it ends (Seq.Name); nil: its output is not
	// cached.
	OutputBlocks []uint64
	// Program is when the rollout it is a turn of began; set, the engine
	// admits the turns of earlier programs first (Continuum's
	// first come, first served by program), not in their turns' order.
	Program time.Time
}

// Served is what became of a Request.
type Served struct {
	ID                           int
	Admitted, FirstToken, Finish time.Time
	Admission                    Admission // what its prompt found in the cache
	Recomputed                   int       // prompt tokens prefilled
}

// Simulate serves reqs as an Engine does, each submitted when it
// arrives. A sequence larger than the cache is never served (its Served
// has a zero Finish); one of no Output ends with the step that prefills
// it, with no first token. Served is in the order of reqs.
func Simulate(p *Profile, reqs []Request) []Served {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return reqs[a].Arrive.Compare(reqs[b].Arrive) })
	out := make([]Served, len(reqs))
	if len(reqs) == 0 {
		return out
	}
	e := NewEngine(p, reqs[order[0]].Arrive)
	next, left := 0, len(reqs)
	for left > 0 {
		for next < len(order) && !reqs[order[next]].Arrive.After(e.Now()) {
			r := reqs[order[next]]
			r.ID = order[next] // its index, while in the engine
			e.Submit(r)
			next++
		}
		ended, stepped := e.Step()
		for _, s := range ended {
			i := s.ID
			s.ID = reqs[i].ID
			out[i] = s
			left--
		}
		if stepped || left == 0 {
			continue
		}
		// Nothing runs: on to the next arrival, or the next pin's expiry
		// if sooner, which may make room.
		at, ok := e.NextExpiry()
		if next < len(order) && (!ok || reqs[order[next]].Arrive.Before(at)) {
			at, ok = reqs[order[next]].Arrive, true
		}
		if !ok { // cannot happen: a sequence that fits an empty cache is admitted once the cache empties
			panic("enginemodel: a waiting sequence and nothing to wait for")
		}
		e.Wait(at)
	}
	return out
}
