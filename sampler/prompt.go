package sampler

// Prompt is an immutable, persistent list of rendered items: a linked list of
// segments, newest first, each holding one item's tokens and the running
// totals. Append returns a new head and never mutates the receiver, so any
// number of continuations may fork from the same Prompt, and a Prompt may be
// shared by goroutines without locking. The nil *Prompt is the empty prompt.
type Prompt struct {
	parent *Prompt // older items; nil at the oldest segment
	tokens []Token // this item's tokens; owned, never modified
	len    int     // tokens in the whole chain, this segment included
	items  int     // segments in the whole chain, this one included
}

// Append returns p followed by one more item rendered as tokens. It copies
// tokens (the caller may reuse the slice) and costs O(len(tokens)), whatever
// the length of p.
func (p *Prompt) Append(tokens []Token) *Prompt {
	var own []Token
	if len(tokens) > 0 {
		own = append([]Token(nil), tokens...) // no zeroing, unlike make+copy
	}
	return &Prompt{parent: p, tokens: own, len: p.Len() + len(tokens), items: p.Items() + 1}
}

// Len is the total number of tokens.
func (p *Prompt) Len() int {
	if p == nil {
		return 0
	}
	return p.len
}

// Items is the number of items (Append calls) in the chain.
func (p *Prompt) Items() int {
	if p == nil {
		return 0
	}
	return p.items
}

// All materializes the prompt, oldest token first, into a new slice. It costs
// O(Len()); it is meant for tests and for backends that send token ids.
func (p *Prompt) All() []Token {
	out := make([]Token, p.Len())
	end := len(out)
	for s := p; s != nil; s = s.parent {
		end -= len(s.tokens)
		copy(out[end:], s.tokens)
	}
	return out
}
