package sampler

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Prompt is an immutable, persistent list of rendered items: a linked list of
// segments, newest first, each holding one item's tokens and the running
// totals, among them the hash of every token so far that a PrefixCache
// matches prompts by. Append returns a new head and never mutates the
// receiver, so any number of continuations may fork from the same Prompt, and
// a Prompt may be shared by goroutines without locking. The nil *Prompt is
// the empty prompt.
//
// A segment keeps its tokens packed as unsigned varints, 1 to 3 bytes a
// token (o200k_base's ids are below 2^18) instead of 4, and only All
// unpacks them. A prompt may also let its tokens go (Bare): what is left,
// each item's count and the hash through it, is all a PrefixCache reads,
// and all a suspended rollout's next step needs of its context's older
// items; the ids are rendered again from the items when something needs
// them.
type Prompt struct {
	parent *Prompt // older items; nil at the oldest segment
	tokens []byte  // this item's tokens, packed (binary.AppendUvarint); owned, never modified; nil when bare
	len    int     // tokens in the whole chain, this segment included
	items  int     // segments in the whole chain, this one included
	sum    uint64  // tokenHash of the whole chain's tokens, oldest first
	bare   bool    // this segment let its tokens go, and so did every older one (Bare)
	shed   bool    // this segment or an older one is bare
}

// Append returns p followed by one more item rendered as tokens. It copies
// tokens (the caller may reuse the slice) and costs O(len(tokens)), whatever
// the length of p.
func (p *Prompt) Append(tokens []Token) *Prompt {
	var packed []byte
	if len(tokens) > 0 {
		n := 0
		for _, t := range tokens {
			n += uvarintLen(t)
		}
		packed = make([]byte, 0, n)
		for _, t := range tokens {
			packed = binary.AppendUvarint(packed, uint64(t))
		}
	}
	return &Prompt{parent: p, tokens: packed, len: p.Len() + len(tokens), items: p.Items() + 1, sum: tokenHash(p.hash(), tokens), shed: p.Shed()}
}

// appendBare is Append(tokens).Bare() without the copy: one more item of
// tokens, of which it keeps the count and the hash through them.
func (p *Prompt) appendBare(tokens []Token) *Prompt {
	return &Prompt{parent: p, len: p.Len() + len(tokens), items: p.Items() + 1, sum: tokenHash(p.hash(), tokens),
		bare: p == nil || p.bare, shed: true}
}

// Bare returns p without its tokens: the same items, each with its count
// and the hash through it, so that Len, Items, a PrefixCache and Append
// read it as they read p, and Segments count it; but All, Since, Equal
// and Segments' Packed, which need the ids, cannot (HasTokens). It shares
// the segments p let go already, and allocates one small segment for
// each item that still held its tokens; p is unchanged.
func (p *Prompt) Bare() *Prompt {
	var held []*Prompt // the segments that hold their tokens, newest first
	s := p
	for ; s != nil && !s.bare; s = s.parent {
		held = append(held, s)
	}
	for i := len(held) - 1; i >= 0; i-- {
		h := held[i]
		s = &Prompt{parent: s, len: h.len, items: h.items, sum: h.sum, bare: true, shed: true}
	}
	return s
}

// HasTokens reports whether p holds every one of its tokens: whether no
// segment of it is bare.
func (p *Prompt) HasTokens() bool { return !p.Shed() }

// Shed reports whether some item of p let its tokens go (Bare).
func (p *Prompt) Shed() bool { return p != nil && p.shed }

// Segment is one item of a Prompt, as Segments gives it: its tokens,
// packed as Append packs them, their count, and the prompt's hash through
// them, so that AppendSegment takes it back without unpacking it.
type Segment struct {
	Packed []byte
	Tokens int
	Sum    uint64
}

// Segments are the prompt's items, oldest first: what AppendSegment
// rebuilds the prompt from, in another process of the same RenderVersion.
// They share the prompt's memory, which nothing writes. A bare item's
// Packed is nil (its Tokens count it still): only a prompt that
// HasTokens rebuilds from its Segments.
func (p *Prompt) Segments() []Segment {
	out := make([]Segment, p.Items())
	i := len(out)
	for s := p; s != nil; s = s.parent {
		i--
		out[i] = Segment{Packed: s.tokens, Tokens: s.len - s.parent.Len(), Sum: s.sum}
	}
	return out
}

// AppendSegment returns p followed by seg's item, or an error when its
// bytes are not seg.Tokens uvarints of tokens. Its count and hash are
// taken as given, not computed again: a wake rebuilds a long prompt in a
// pass that checks each byte, not one that decodes and hashes each token.
// A wrong Sum, from a store that kept another, only makes the prefix
// cache count tokens as cached or not (tokenHash); it never changes what
// is sampled. It keeps seg.Packed.
func (p *Prompt) AppendSegment(seg Segment) (*Prompt, error) {
	if n, ok := countPacked(seg.Packed); !ok || n != seg.Tokens {
		return nil, errors.New("sampler: packed tokens do not read back")
	}
	packed := seg.Packed
	if len(packed) == 0 {
		packed = nil
	}
	return &Prompt{parent: p, tokens: packed, len: p.Len() + seg.Tokens, items: p.Items() + 1, sum: seg.Sum, shed: p.Shed()}, nil
}

// countPacked is the count of tokens packed in b, or false when b is not
// uvarints of tokens below maxToken: each of at most four bytes, whose
// last has its high bit clear.
func countPacked(b []byte) (n int, ok bool) {
	more := 0 // bytes of the token so far with their high bit set
	for _, c := range b {
		switch {
		case c >= 0x80 && more == 3:
			return 0, false
		case c >= 0x80:
			more++
		case more == 3 && c >= maxToken>>21:
			return 0, false
		default:
			n, more = n+1, 0
		}
	}
	return n, more == 0
}

// AppendPacked returns p followed by one more item whose tokens are packed
// as Append packs them, or an error when they are not: uvarints of
// tokens (countPacked's), nothing else. Its count and hash are computed; an earlier
// build's journal keeps only the tokens (AppendSegment takes a Segment
// whole). It keeps packed.
func (p *Prompt) AppendPacked(packed []byte) (*Prompt, error) {
	sum, n, ok := hashPacked(p.hash(), packed)
	if !ok {
		return nil, errors.New("sampler: packed tokens do not read back")
	}
	if len(packed) == 0 {
		packed = nil
	}
	return &Prompt{parent: p, tokens: packed, len: p.Len() + n, items: p.Items() + 1, sum: sum, shed: p.Shed()}, nil
}

// hashPacked continues the hash h over the tokens packed, and counts them;
// ok is false when packed is not uvarints of tokens.
func hashPacked(h uint64, packed []byte) (sum uint64, n int, ok bool) {
	for b := packed; len(b) > 0; n++ {
		t, k := binary.Uvarint(b)
		if k <= 0 || k > 4 || t >= maxToken {
			return 0, 0, false
		}
		h = tokenHash(h, []Token{Token(t)})
		b = b[k:]
	}
	return h, n, true
}

// Since is the prompt of p's items from the n-th (from 0) on: the same
// tokens, hashed from the start as a prompt rendered from those items alone
// is, so that a PrefixCache finds it by content. It shares p's tokens and
// costs a pass over them; n at or past p's items is the empty prompt.
// Those items must hold their tokens (HasTokens of p.Since's part): Since
// panics on a bare one, whose ids it cannot hash again.
func (p *Prompt) Since(n int) *Prompt {
	if n <= 0 {
		return p
	}
	var q *Prompt
	for _, seg := range p.Segments()[min(n, p.Items()):] {
		if seg.Packed == nil && seg.Tokens > 0 {
			panic("sampler: Since over an item whose tokens were let go (Bare)")
		}
		sum, _, _ := hashPacked(q.hash(), seg.Packed) // packed by Append: it reads back
		q = &Prompt{parent: q, tokens: seg.Packed, len: q.Len() + seg.Tokens, items: q.Items() + 1, sum: sum}
	}
	return q
}

// maxToken bounds a token id read back, past any vocabulary's: ids are
// below it.
const maxToken = 1 << 24

// RenderVersion says how Renderer renders items and headers into tokens:
// a prompt's Segments rebuild it with AppendPacked under the same version
// only. It changes whenever rendering does.
const RenderVersion = 1

// uvarintLen is the bytes binary.AppendUvarint takes for t.
func uvarintLen(t Token) int {
	switch {
	case t < 1<<7:
		return 1
	case t < 1<<14:
		return 2
	case t < 1<<21:
		return 3
	case t < 1<<28:
		return 4
	}
	return 5
}

// hash is the tokenHash of the whole prompt. It depends on the tokens only,
// not on how they were split into items, nor on which Prompt holds them: a
// history re-rendered from scratch hashes as the Prompt it was extended into.
func (p *Prompt) hash() uint64 {
	if p == nil {
		return tokenHashSeed
	}
	return p.sum
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

// Equal reports whether p and q hold the same tokens in as many items,
// hashed the same: whether a prompt rebuilt from its Segments is its
// original, as the prefix cache sees it. Both must hold their tokens
// (All).
func (p *Prompt) Equal(q *Prompt) bool {
	return p.Len() == q.Len() && p.Items() == q.Items() && p.hash() == q.hash() && slices.Equal(p.All(), q.All())
}

// All materializes the prompt, oldest token first, into a new slice. It costs
// O(Len()); it is meant for tests and for backends that send token ids.
// It panics when p does not hold its tokens (HasTokens).
func (p *Prompt) All() []Token {
	if p.Shed() {
		panic("sampler: All of a prompt whose tokens were let go (Bare)")
	}
	out := make([]Token, p.Len())
	end := len(out)
	for s := p; s != nil; s = s.parent {
		end -= s.len - s.parent.Len()
		for i, b := end, s.tokens; len(b) > 0; i++ {
			t, n := binary.Uvarint(b)
			out[i], b = Token(t), b[n:]
		}
	}
	return out
}

// tokenHashSeed is the hash of no tokens.
const tokenHashSeed uint64 = 0xcbf29ce484222325

// tokenHash continues h over toks. Each step (xor, multiply by an odd
// constant, xorshift) is a bijection of the state, so two sequences that share
// a prefix diverge at their first different token, and the state after n
// tokens is a function of those n tokens only. It is not a defence against
// chosen collisions; a collision would only make the prefix cache count a
// prompt as cached, never change what is sampled.
func tokenHash(h uint64, toks []Token) uint64 {
	for _, t := range toks {
		h ^= uint64(t)
		h *= 0x9e3779b97f4a7c15
		h ^= h >> 29
	}
	return h
}
