package sampler

import (
	"hash/fnv"
	"math"

	"github.com/tether-run/tether/protocol"
)

// The simulated models (Scripted, Replay) give their tokens' log
// probabilities when a request asks for them (include
// message.output_text.logprobs, top_logprobs). They are synthetic, made so
// that a client's handling of them can be tested and a run repeated:
//
//   - a sampled token's probability p is 0.55 + 0.45·u, where u in [0, 1)
//     comes from an FNV-1a hash of the token and its index in the message;
//     its logprob is ln p;
//   - its top_logprobs are the token itself, then tokens of a fixed list of
//     common ones (picked by the same hash, the sampled token skipped),
//     the j-th alternative getting (1 − p)/2^j, so that they decrease and
//     sum to less than 1.
//
// The same text gives the same figures on every run and server. They say
// nothing about any real model.

// Logprobs reports that the model gives (synthetic) logprobs.
func (*Scripted) Logprobs() bool { return true }

// Logprobs reports that the model gives (synthetic) logprobs.
func (*Replay) Logprobs() bool { return true }

// Logprobs reports that the upstream's logprobs are asked for and passed
// on; a server that sends none gives none.
func (*Upstream) Logprobs() bool { return true }

// Logprobs reports whether the wrapped backend gives logprobs.
func (f *Floored) Logprobs() bool {
	lb, ok := f.next.(interface{ Logprobs() bool })
	return ok && lb.Logprobs()
}

// alternatives are the tokens top_logprobs offers besides the sampled one.
var alternatives = []string{" the", ",", ".", " a", " and", " to", " of", " is", " in", " it", " that", " for",
	" you", " on", " with", " this", " be", " as", " not", " I", " can", " we", "\n", " or"}

// SyntheticLogprob is the logprob of token, the index-th of its message,
// with top alternatives (0 to 20).
func SyntheticLogprob(token string, index, top int) protocol.LogProb {
	h := fnv.New64a()
	h.Write([]byte(token))
	var ib [8]byte
	for i := range ib {
		ib[i] = byte(uint64(index) >> (8 * i))
	}
	h.Write(ib[:])
	sum := h.Sum64()
	p := 0.55 + 0.45*float64(sum>>11)/float64(1<<53)
	lp := protocol.LogProb{Token: token, Logprob: math.Log(p), Bytes: tokenBytes(token), TopLogprobs: []protocol.TopLogProb{}}
	if top <= 0 {
		return lp
	}
	lp.TopLogprobs = append(lp.TopLogprobs, protocol.TopLogProb{Token: token, Logprob: lp.Logprob, Bytes: lp.Bytes})
	rest := 1 - p
	for i, j := int(sum%uint64(len(alternatives))), 1; len(lp.TopLogprobs) < top; i = (i + 1) % len(alternatives) {
		if alternatives[i] == token {
			continue
		}
		alt := alternatives[i]
		lp.TopLogprobs = append(lp.TopLogprobs, protocol.TopLogProb{Token: alt, Logprob: math.Log(rest / math.Exp2(float64(j))), Bytes: tokenBytes(alt)})
		j++
	}
	return lp
}

func tokenBytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}
