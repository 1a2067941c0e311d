package sampler_test

import (
	"math"
	"testing"

	"github.com/tether-run/tether/sampler"
)

// TestSyntheticLogprob: the figures are as documented: the same for the
// same token and index, p in [0.55, 1), top alternatives that start with
// the token, decrease, never repeat it and sum to at most 1.
func TestSyntheticLogprob(t *testing.T) {
	for i, tok := range []string{"Hello", " the", ",", "\n", "é"} {
		a, b := sampler.SyntheticLogprob(tok, i, 5), sampler.SyntheticLogprob(tok, i, 5)
		if a.Logprob != b.Logprob || len(a.TopLogprobs) != 5 {
			t.Fatalf("%q: %+v then %+v", tok, a, b)
		}
		if p := math.Exp(a.Logprob); p < 0.55 || p >= 1 {
			t.Errorf("%q: p = %v", tok, p)
		}
		if len(a.Bytes) != len(tok) {
			t.Errorf("%q: bytes %v", tok, a.Bytes)
		}
		total := 0.0
		seen := map[string]bool{}
		for j, alt := range a.TopLogprobs {
			total += math.Exp(alt.Logprob)
			if j == 0 && (alt.Token != tok || alt.Logprob != a.Logprob) {
				t.Errorf("%q: first alternative %+v", tok, alt)
			}
			if j > 0 && (alt.Logprob >= a.TopLogprobs[j-1].Logprob || seen[alt.Token]) {
				t.Errorf("%q: alternative %d %+v after %+v", tok, j, alt, a.TopLogprobs[j-1])
			}
			seen[alt.Token] = true
		}
		if total > 1+1e-9 {
			t.Errorf("%q: top_logprobs sum to %v", tok, total)
		}
		if c := sampler.SyntheticLogprob(tok, i+1, 0); c.Logprob == a.Logprob || len(c.TopLogprobs) != 0 {
			t.Errorf("%q at the next index: %+v (want another figure, no alternatives)", tok, c)
		}
	}
}
