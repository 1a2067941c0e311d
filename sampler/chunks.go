package sampler

import (
	goruntime "runtime"
	"sync"
)

// Tokenizing is the largest part of a tool round trip's API overhead: a
// 10 KB tool output takes milliseconds, nearly all of it in the tokenizer's
// pre-tokenizing regular expression (and the garbage it makes). A long text is therefore cut into
// chunks at places where the pre-tokenizer always ends a piece, and the
// chunks are tokenized at once on the cores there are; BPE never merges
// across pieces, so the tokens are exactly those of the whole text.

// parallelMin is the text length from which encode tokenizes in chunks
// (a typical tool output is 4–8 KB).
const parallelMin = 2 << 10

// chunkMin is the least length of a chunk. A kilobyte takes the tokenizer
// about 400 µs here (2–3 MB/s on code, much of it allocation in its
// regexp engine), a goroutine a microsecond to start.
const chunkMin = 1 << 10

// cutsBefore reports whether o200k_base's pre-tokenizer ends a piece
// before s[i], whatever comes before and after: s[i-1] is a line feed, and
// s[i] is an ASCII letter, or the start of a run of spaces and tabs that
// ends in a printable ASCII character (an indented line). No piece of its
// expression spans that place: the letter alternatives take no line break;
// the punctuation one ends with line breaks and slashes; a whitespace run
// holding line breaks is one piece that ends with its last one (the
// "\s*[\r\n]+" alternative comes before the others that could match it).
// TestChunkedEncode and FuzzChunkedEncode hold the claim to the tokenizer.
func cutsBefore(s string, i int) bool {
	if i <= 0 || i >= len(s) || s[i-1] != '\n' {
		return false
	}
	c := s[i]
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return true
	}
	j := i
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j > i && j < len(s) && s[j] > ' ' && s[j] < 0x7f
}

// chunks cuts s into at most n pieces of at least min bytes, each ending
// where the pre-tokenizer ends a piece; fewer when s has no such places.
func chunks(s string, n, min int) []string {
	var out []string
	for n > 1 && len(s) >= 2*min {
		at := max(len(s)/n, min)
		cut := -1
		for i := at; i < len(s)-min/2; i++ {
			if cutsBefore(s, i) {
				cut = i
				break
			}
		}
		if cut < 0 {
			break
		}
		out = append(out, s[:cut])
		s, n = s[cut:], n-1
	}
	return append(out, s)
}

// encodeParallel tokenizes s, which the codec tokenizes faithfully, in
// chunks of at least min bytes on up to GOMAXPROCS goroutines.
func (r *Renderer) encodeParallel(out []Token, s string, min int) []Token {
	return r.encodeParallelN(out, s, goruntime.GOMAXPROCS(0), min)
}

// encodeParallelN is encodeParallel in at most n chunks.
func (r *Renderer) encodeParallelN(out []Token, s string, n, min int) []Token {
	parts := chunks(s, n, min)
	if len(parts) == 1 {
		return toTokens(out, s, r)
	}
	toks := make([][]Token, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts[1:] {
		wg.Go(func() { toks[i+1] = toTokens(nil, p, r) })
	}
	toks[0] = toTokens(nil, parts[0], r)
	wg.Wait()
	for _, t := range toks {
		out = append(out, t...)
	}
	return out
}
