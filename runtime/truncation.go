package runtime

import (
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Truncation (a create's truncation): before each step, the prompt the
// model is to read (instructions, tools, then the context's items) is
// measured against its model's context window (WindowSampler). Past it,
// truncation "disabled" (the default) fails, as OpenAI's does: before the
// response begins, 400 context_length_exceeded; once it runs (its calls'
// results grew the context), response.failed with that code. Truncation
// "auto" leaves the oldest items out of what the model reads, as few as
// make the rest fit, and never an output without what it answers (opens):
// the model reads the newest items that fit, a prompt of their own, which
// no prefix cached before begins (a real engine reads it all again too).
// The items left out stay in the context, in the response's output and
// what the next turn continues from: each request's truncation applies to
// its own steps.

// truncated is what a step reads of a context truncated to its window:
// the items from index from of the rollout's items on, and their prompt.
type truncated struct {
	from   int
	prompt *sampler.Prompt
}

// fit fits the context to the model's window before a step: it sets r.cut
// to what the model is to read when that is not the whole context
// (truncation auto), or it returns context_length_exceeded.
func (r *rollout) fit() *protocol.Error {
	r.cut = nil
	window := contextWindow(r.model)
	r.renderPending()
	tokens := len(r.header) + r.prompt.Len()
	if window == 0 || tokens <= window {
		return nil
	}
	if r.req.Truncation != protocol.TruncationAuto {
		return protocol.Invalid(protocol.CodeContextLengthExceeded, "input",
			"Your input exceeds the context window of this model. Please adjust your input and try again: the prompt (instructions, tools and items) is %d tokens, and the model '%s' reads %d. With truncation 'auto' the oldest items are left out to fit.",
			tokens, r.req.Model, window)
	}
	if r.prompt.Shed() {
		// It let its tokens go at a pause (shed), and cutting it hashes
		// those it keeps again: render them all again, once, and keep
		// them while the context stays truncated.
		t0 := r.srv.now()
		r.prompt = r.srv.renderFrom(r.items, r.win)
		r.tm.RenderedTokens += r.prompt.Len()
		r.tm.RenderMicros += r.srv.now().Sub(t0).Microseconds()
	}
	// The prompt renders the items from the latest context compaction on,
	// one segment an item.
	start, segs := r.win.start(), r.prompt.Segments()
	answered := make(map[string]int) // a call's output, by its call_id: its index in segs
	for i, it := range r.items[start:] {
		if id, ok := answers(it); ok {
			answered[id] = i
		}
	}
	k, need := 0, 0 // items left out; those that must be, so that no output is read without its call
	for ; k < len(segs) && (tokens > window || k < need); k++ {
		tokens -= segs[k].Tokens
		for _, id := range opens(r.items[start+k]) {
			if i, ok := answered[id]; ok {
				need = max(need, i+1)
			}
		}
	}
	if k == len(segs) {
		return protocol.Invalid(protocol.CodeContextLengthExceeded, "input",
			"Your input exceeds the context window of this model. Please adjust your input and try again: the model '%s' reads %d tokens, and even truncated ('auto'), its newest item does not fit in them after the %d of the instructions and tools (an output counts with the call it answers).",
			r.req.Model, window, len(r.header))
	}
	r.cut = &truncated{from: start + k, prompt: r.prompt.Since(k)}
	return nil
}

// opens are the call_ids an item opens, which truncation keeps with their
// outputs: a call's, a multi-agent call's, or a program's (whose output
// follows the calls it made, kept or left out with it).
func opens(it protocol.Item) []string {
	switch it := it.(type) {
	case *protocol.Program:
		return []string{it.CallID}
	case *protocol.MultiAgentCall:
		return []string{it.CallID}
	}
	if c, ok := protocol.CallOf(it); ok {
		return c.Names()
	}
	return nil
}

// answers is the call_id an item answers: an output's (answerID), or a
// program's output's.
func answers(it protocol.Item) (string, bool) {
	if o, ok := it.(*protocol.ProgramOutput); ok {
		return o.CallID, true
	}
	return answerID(it)
}

// read is what the step reads: the context's items as the model sees them
// (modelItems), and their prompt, or the newest of them that fit its
// window (fit).
func (r *rollout) read() (protocol.Items, *sampler.Prompt) {
	if r.cut != nil {
		return r.items[r.cut.from:], r.cut.prompt
	}
	return r.modelItems(), r.prompt
}
