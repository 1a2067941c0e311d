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
}

// Served is what became of a Request.
type Served struct {
	ID                           int
	Admitted, FirstToken, Finish time.Time
	Admission                    Admission // what its prompt found in the cache
	Recomputed                   int       // prompt tokens prefilled
}

// Simulate serves reqs as a continuous-batching engine would: at each step
// boundary the waiting sequences are admitted first come, first served, as
// long as the cache has room (the first that does not fit holds the rest
// back); a step decodes one token for every sequence past its prefill,
// prefills what the sequences admitted need (their prompt less the blocks
// the cache holds; swapped blocks come back at the swap bandwidth), first
// come first served within Profile.MaxBatchedTokens (a longer prompt takes
// more steps, and its first token comes with the step that ends its
// prefill), and takes Profile.StepTime of them. A sequence holds its prompt's blocks and
// private blocks for the rest of its prompt and its output until it ends,
// then releases them as its Policy says. A sequence larger than the cache
// is never served (its Served has a zero Finish); one of no Output ends
// with the step that prefills it, with no first token. Served is in the
// order of reqs.
func Simulate(p *Profile, reqs []Request) []Served {
	c := NewCache(p)
	type running struct {
		i        int
		seq      *Seq
		produced int
		prefill  int
		swap     int
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return reqs[a].Arrive.Compare(reqs[b].Arrive) })
	out := make([]Served, len(reqs))
	var waiting []int
	var run []*running
	next, left := 0, len(reqs)
	var t time.Time
	if len(order) > 0 {
		t = reqs[order[0]].Arrive
	}
	for left > 0 {
		for next < len(order) && !reqs[order[next]].Arrive.After(t) {
			waiting = append(waiting, order[next])
			next++
		}
		for len(waiting) > 0 {
			r := &reqs[waiting[0]]
			tail := r.PromptTokens - len(r.Prompt)*p.BlockTokens + max(r.Output, 0)
			private := (tail + p.BlockTokens - 1) / p.BlockTokens
			if len(r.Prompt)+private > c.capacity { // it can never fit: not served
				out[waiting[0]] = Served{ID: r.ID}
				waiting = waiting[1:]
				left--
				continue
			}
			s, a, ok := c.Admit(r.Prompt, private, t)
			if !ok {
				break
			}
			i := waiting[0]
			waiting = waiting[1:]
			prefill := r.PromptTokens - (a.Hit+a.Swapped)*p.BlockTokens
			out[i] = Served{ID: r.ID, Admitted: t, Admission: a, Recomputed: prefill}
			run = append(run, &running{i: i, seq: s, prefill: prefill, swap: a.Swapped * p.BlockTokens})
		}
		if len(run) == 0 {
			// Nothing runs: on to the next arrival, or the next pin's
			// expiry if sooner, which may make room.
			at, ok := c.NextExpiry(t)
			if next < len(order) && (!ok || reqs[order[next]].Arrive.Before(at)) {
				at, ok = reqs[order[next]].Arrive, true
			}
			if !ok { // cannot happen: a sequence that fits an empty cache is admitted once the cache empties
				panic("enginemodel: a waiting sequence and nothing to wait for")
			}
			t = at
			continue
		}
		// The step's tokens: a token for each sequence past its prefill,
		// then prefill, first come first served, within MaxBatchedTokens.
		budget := p.MaxBatchedTokens
		if budget == 0 {
			budget = int(^uint(0) >> 1)
		}
		prefill, swap, decoding := 0, 0, 0
		for _, r := range run {
			if r.prefill == 0 && reqs[r.i].Output > 0 {
				decoding++
			}
		}
		budget -= decoding
		stepping := make(map[*running]bool, len(run)) // those that produce a token (or end) this step
		for _, r := range run {
			if r.prefill > 0 {
				n := min(r.prefill, max(budget, 0))
				r.prefill -= n
				budget -= n
				prefill += n
				if r.prefill > 0 {
					continue // prefilled over more steps: no token yet
				}
				if reqs[r.i].Output > 0 {
					decoding++
				}
			}
			swap += r.swap
			r.swap = 0
			stepping[r] = true
		}
		t = t.Add(p.StepTime(decoding, prefill) + p.SwapTime(swap))
		kept := run[:0]
		for _, r := range run {
			if !stepping[r] {
				kept = append(kept, r)
				continue
			}
			if reqs[r.i].Output > 0 { // a sequence of no output ends with its prefill, no token
				r.produced++
			}
			if r.produced == 1 {
				out[r.i].FirstToken = t
			}
			if r.produced < reqs[r.i].Output {
				kept = append(kept, r)
				continue
			}
			out[r.i].Finish = t
			c.Release(r.seq, reqs[r.i].Policy, t)
			left--
		}
		run = kept
	}
	return out
}
