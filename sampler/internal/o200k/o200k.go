// Package o200k tokenizes text with OpenAI's o200k_base encoding: exactly
// the tokens of github.com/tiktoken-go/tokenizer, whose vocabulary and codec
// it uses, several times faster on the text agents send, which is mostly ASCII.
//
// The codec splits text into pieces with a backtracking regular expression
// and byte-pair merges each piece; on source code most of its time goes to
// the expression engine and its garbage, enough to make tokenizing a tool's
// output the largest part of a tool round trip. Here
// ASCII text is split by a hand-written scanner that takes, at each place,
// the piece the expression would (ascii.go says how, alternative by
// alternative), and looks the piece up in the vocabulary or merges it; a
// stretch holding anything else (and every piece too long for the simple
// merge) goes to the codec. FuzzEncoder and TestEncoder hold the tokens to
// the codec's.
package o200k

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Encoder tokenizes text. It is safe for concurrent use.
type Encoder struct {
	codec  tokenizer.Codec
	ranks  *vocab      // piece → token id, every token of the vocabulary
	merges *mergeCache // the merges of pieces lately seen that are no token
}

var (
	shared     *Encoder
	sharedErr  error
	sharedOnce sync.Once
)

// New returns the process's Encoder. The first call builds the vocabulary
// table, on top of the codec's own; later calls share it.
func New() (*Encoder, error) {
	sharedOnce.Do(func() { shared, sharedErr = build() })
	return shared, sharedErr
}

// vocabSize bounds o200k_base's token ids (199,998 ordinary tokens; the
// special tokens above them are never produced from text).
const vocabSize = 200_000

func build() (*Encoder, error) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("o200k: codec: %w", err)
	}
	pieces := make([]string, vocabSize)
	id, n := make([]uint, 1), 0
	for i := range uint(vocabSize) {
		id[0] = i
		if piece, err := c.Decode(id); err == nil {
			pieces[i] = piece
			n++
		}
	}
	if n < vocabSize/2 {
		return nil, fmt.Errorf("o200k: vocabulary has %d tokens", n)
	}
	return &Encoder{codec: c, ranks: newVocab(pieces), merges: new(mergeCache)}, nil
}

// Each calls yield with each token of s, in order: its id and its text.
// The texts concatenate to s, except where the codec itself drops bytes
// (U+007F DELETE; callers that must keep every byte split it out first).
func (e *Encoder) Each(s string, yield func(id uint32, piece string)) {
	for len(s) > 0 {
		i := indexNonASCII(s)
		if i < 0 {
			e.eachASCII(s, yield)
			return
		}
		// The ASCII stretch up to the last cut before the first other
		// byte is the scanner's; from there to the next cut, the codec's.
		if cut := lastCut(s, i); cut > 0 {
			e.eachASCII(s[:cut], yield)
			s = s[cut:]
			continue
		}
		end := nextCut(s, i)
		e.eachCodec(s[:end], yield)
		s = s[end:]
	}
}

// Append appends the ids of s's tokens to dst.
func (e *Encoder) Append(dst []uint32, s string) []uint32 {
	e.Each(s, func(id uint32, _ string) { dst = append(dst, id) })
	return dst
}

// Count is the number of s's tokens.
func (e *Encoder) Count(s string) int {
	n := 0
	e.Each(s, func(uint32, string) { n++ })
	return n
}

// maxCodecRun bounds the text given to the codec at once. Its expression
// engine and merge take memory many times the text's size (dozens of times
// on a long run of one letter), so a longer run (a piece of 16 KB without a
// space, a digit or punctuation, or as much non-ASCII text with no place
// to cut it: only made-up text has one) is split at that length, on a
// character boundary. Only there can the tokens differ from the codec's.
const maxCodecRun = 16 << 10

func (e *Encoder) eachCodec(s string, yield func(uint32, string)) {
	for len(s) > 0 {
		n := len(s)
		if n > maxCodecRun {
			n = maxCodecRun
			for n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
		}
		ids, toks, _ := e.codec.Encode(s[:n])
		for i, id := range ids {
			yield(uint32(id), toks[i])
		}
		s = s[n:]
	}
}

func (e *Encoder) eachASCII(s string, yield func(uint32, string)) {
	var parts []part
	for i := 0; i < len(s); {
		end := pieceEnd(s, i)
		piece := s[i:end]
		i = end
		h := e.ranks.hash(piece)
		if id, ok := e.ranks.lookupHashed(piece, h); ok {
			yield(id, piece)
			continue
		}
		if len(piece) >= maxScanMerge {
			e.eachCodec(piece, yield)
			continue
		}
		m := e.merges.get(piece, h)
		if m == nil {
			parts = e.merge(parts[:0], piece)
			m = e.merges.put(piece, h, parts, e.ranks)
		}
		at := 0
		for k, id := range m.ids {
			tok := piece[at:m.ends[k]]
			at = int(m.ends[k])
			yield(id, tok)
		}
	}
}

// maxScanMerge is the piece length from which merge's quadratic scan gives
// way to the codec (whose merge is O(n log n)), as the codec itself does.
const maxScanMerge = 96

type part struct {
	offset int
	rank   uint32
}

const noRank = math.MaxUint32

// merge is byte-pair encoding of a piece that is not a token: repeatedly
// merge the leftmost adjacent pair whose merge has the lowest rank, until
// no pair merges into a token. It returns the part boundaries, piece's
// length last.
func (e *Encoder) merge(parts []part, piece string) []part {
	for i := range len(piece) + 1 {
		parts = append(parts, part{i, noRank})
	}
	rank := func(i, skip int) uint32 {
		if i+skip+2 < len(parts) {
			if r, ok := e.ranks.lookup(piece[parts[i].offset:parts[i+skip+2].offset]); ok {
				return r
			}
		}
		return noRank
	}
	for i := range len(parts) - 2 {
		parts[i].rank = rank(i, 0)
	}
	for len(parts) > 1 {
		best, at := uint32(noRank), 0
		for i, p := range parts[:len(parts)-1] {
			if p.rank < best {
				best, at = p.rank, i
			}
		}
		if best == noRank {
			break
		}
		parts[at].rank = rank(at, 1)
		if at > 0 {
			parts[at-1].rank = rank(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return parts
}

// Decode is the text of tokens.
func (e *Encoder) Decode(tokens []uint32) (string, error) {
	ids := make([]uint, len(tokens))
	for i, t := range tokens {
		ids[i] = uint(t)
	}
	return e.codec.Decode(ids)
}
