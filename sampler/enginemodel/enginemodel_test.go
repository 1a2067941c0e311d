package enginemodel

import (
	"os"
	"strings"
	"testing"
	"time"
)

// testProfile is a Llama-3-8B-shaped KV cache (32 layers, 8 KV heads of
// 128 dims, fp16: 2·32·8·128·2 = 131,072 bytes a token) of 4 blocks of 16
// tokens (64 tokens: 8,388,608 bytes), with round step figures.
func testProfile() *Profile {
	p := &Profile{Name: "test", Layers: 32, KVHeads: 8, HeadDim: 128, BytesPerValue: 2, KVBytesPerToken: 131072,
		KVMemoryBytes: 64 * 131072, CapacityTokens: 64, BlockTokens: 16,
		DecodeBase: 20 * time.Millisecond, DecodePerSeq: 500 * time.Microsecond, PrefillTokensPerSec: 16000,
		SwapBytesPerSec: 16e9, Sources: map[string]string{}}
	for _, f := range sourced {
		p.Sources[f] = "the test's own figure"
	}
	return p
}

func TestStepAndSwapTime(t *testing.T) {
	p := testProfile()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	// 20 ms + 8 · 0.5 ms + 2,048 / 16,000 s (128 ms) = 152 ms.
	if got := p.StepTime(8, 2048); got != 152*time.Millisecond {
		t.Errorf("step of 8 with 2,048 prefill: %v, want 152ms", got)
	}
	if got := p.StepTime(1, 0); got != 20500*time.Microsecond {
		t.Errorf("step of 1: %v, want 20.5ms", got)
	}
	// 1,000 tokens · 131,072 bytes / 16 GB/s = 8.192 ms.
	if got := p.SwapTime(1000); got != 8192*time.Microsecond {
		t.Errorf("swap of 1,000 tokens: %v, want 8.192ms", got)
	}
}

func TestProfileRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Profile)
		says   string
	}{
		"KV bytes":   {func(p *Profile) { p.KVBytesPerToken = 65536 }, "2 · 32 layers · 8 KV heads · 128 head dim · 2 bytes = 131072"},
		"capacity":   {func(p *Profile) { p.CapacityTokens = 100 }, "is 64"},
		"no source":  {func(p *Profile) { delete(p.Sources, "DecodePerSeq") }, "DecodePerSeq has no source"},
		"no decode":  {func(p *Profile) { p.DecodeBase, p.DecodePerSeq = 0, 0 }, "must take time"},
		"no prefill": {func(p *Profile) { p.PrefillTokensPerSec = 0 }, "rates must be positive"},
	} {
		p := testProfile()
		tc.change(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want it refused saying %q", name, err, tc.says)
		}
	}
}

// seqOf is a prompt of n blocks, the i-th token of which is base+i.
func seqOf(base uint32, blocks int) []uint64 {
	toks := make([]uint32, blocks*16)
	for i := range toks {
		toks[i] = base + uint32(i)
	}
	return BlockHashes(toks, 16)
}

func TestPrefixReuse(t *testing.T) {
	c := NewCache(testProfile())
	t0 := time.Unix(0, 0)
	a, ad, ok := c.Admit(seqOf(0, 2), 0, t0)
	if !ok || ad.Miss != 2 || ad.Hit != 0 {
		t.Fatalf("%+v %v", ad, ok)
	}
	c.Release(a, Policy{Kind: Discard}, t0)
	// The same two blocks and one more: two hits (the prefix), one miss.
	_, ad, ok = c.Admit(seqOf(0, 3), 1, t0)
	if !ok || ad.Hit != 2 || ad.Miss != 1 || ad.Private != 1 || c.Resident() != 4 {
		t.Fatalf("%+v %v, %d resident", ad, ok, c.Resident())
	}
	// A prompt that differs in its first token shares nothing.
	if h := seqOf(1, 2); h[0] == seqOf(0, 2)[0] || h[1] == seqOf(0, 2)[1] {
		t.Error("blocks after a different first token share a hash")
	}
}

func TestEvictionOrder(t *testing.T) {
	c := NewCache(testProfile())
	t0 := time.Unix(0, 0)
	a, _, _ := c.Admit(seqOf(0, 2), 0, t0)
	b, _, _ := c.Admit(seqOf(1000, 2), 0, t0)
	c.Release(a, Policy{Kind: Discard}, t0)
	c.Release(b, Policy{Kind: Discard}, t0.Add(time.Second))
	// Full (4 of 4); C needs 2: A's go, released first.
	if _, ad, ok := c.Admit(seqOf(2000, 2), 0, t0.Add(2*time.Second)); !ok || ad.Miss != 2 {
		t.Fatalf("%+v %v", ad, ok)
	}
	if _, ad, _ := c.Admit(seqOf(1000, 2), 0, t0.Add(3*time.Second)); ad.Hit != 2 {
		t.Errorf("B's blocks: %+v, want both still cached", ad)
	}
	// All four in use: a fifth block has no room, and nothing changes.
	if _, ad, ok := c.Admit(seqOf(3000, 1), 0, t0.Add(4*time.Second)); ok || c.Resident() != 4 {
		t.Errorf("a block with every block in use: %+v %v", ad, ok)
	}
}

func TestPinExpiry(t *testing.T) {
	c := NewCache(testProfile())
	t0 := time.Unix(0, 0)
	a, _, _ := c.Admit(seqOf(0, 2), 0, t0)
	b, _, _ := c.Admit(seqOf(1000, 2), 0, t0)
	c.Release(a, Policy{Kind: Pin, TTL: 10 * time.Second}, t0)
	c.Release(b, Policy{Kind: Discard}, t0.Add(time.Second)) // released after A, but unpinned
	// At 5 s, C's 2 blocks push out B's, not the pinned A's.
	cs, ad, ok := c.Admit(seqOf(2000, 2), 0, t0.Add(5*time.Second))
	if !ok || ad.Miss != 2 {
		t.Fatalf("%+v %v", ad, ok)
	}
	// D's 2 more: only A's could go, and they are pinned until 10 s.
	if _, _, ok := c.Admit(seqOf(3000, 2), 0, t0.Add(9*time.Second)); ok {
		t.Error("evicted a pinned block")
	}
	if _, ad, _ := c.Admit(seqOf(0, 2), 0, t0.Add(9*time.Second)); ad.Hit != 2 {
		t.Errorf("A's pinned blocks at 9 s: %+v", ad)
	}
	_ = cs
}

func TestPinExpires(t *testing.T) {
	c := NewCache(testProfile())
	t0 := time.Unix(0, 0)
	a, _, _ := c.Admit(seqOf(0, 4), 0, t0)
	c.Release(a, Policy{Kind: Pin, TTL: 10 * time.Second}, t0)
	if _, _, ok := c.Admit(seqOf(1000, 1), 0, t0.Add(10*time.Second-1)); ok {
		t.Error("room before the pin expired")
	}
	if _, ad, ok := c.Admit(seqOf(1000, 1), 0, t0.Add(10*time.Second)); !ok || ad.Miss != 1 {
		t.Errorf("at the pin's expiry: %+v %v", ad, ok)
	}
}

func TestSwap(t *testing.T) {
	p := testProfile()
	c := NewCache(p)
	t0 := time.Unix(0, 0)
	a, _, _ := c.Admit(seqOf(0, 3), 1, t0)
	shared, _, _ := c.Admit(seqOf(0, 1), 0, t0) // holds A's first block too
	c.Release(a, Policy{Kind: Swap}, t0)
	// A's two blocks only it held left memory, with its private one; the shared one stayed.
	if c.Resident() != 1 {
		t.Fatalf("%d resident after the swap, want 1", c.Resident())
	}
	_, ad, ok := c.Admit(seqOf(0, 3), 0, t0.Add(time.Second))
	if !ok || ad.Hit != 1 || ad.Swapped != 2 || ad.Miss != 0 {
		t.Fatalf("back: %+v %v", ad, ok)
	}
	// Its swap-in: 2 blocks of 16 tokens · 131,072 bytes / 16 GB/s = 262.144 µs.
	if got := p.SwapTime(ad.Swapped * p.BlockTokens); got != 262144*time.Nanosecond {
		t.Errorf("swap-in %v", got)
	}
	_ = shared
}

// TestSimulate: by hand, on testProfile's 4 blocks. A (32 prompt tokens, 2
// blocks, 3 out: one private block) and B (likewise, 2 out) arrive at 0;
// both need 3 blocks, so B waits for A:
//
//	step 1: A prefills 32 (2 ms) + decodes 1 (20.5 ms) = 22.5 ms: A's first token
//	step 2: 20.5 ms → 43 ms
//	step 3: 20.5 ms → 63.5 ms: A done, its 3 blocks released (2 kept unused)
//	step 4: B admitted (needing 3 of the 2 free: A's last block evicted,
//	        released first), prefills 32: 22.5 ms → 86 ms
//	step 5: 20.5 ms → 106.5 ms: B done
//
// Then A again at 200 ms: its first block hits, its second is computed
// again (16 tokens: 1 ms + 20.5 ms); C, with A's two blocks and 8 tokens
// more, at 300 ms after A released with Pin: both hit, 8 tokens prefilled
// (0.5 ms + 20.5 ms).
func TestSimulate(t *testing.T) {
	p := testProfile()
	t0 := time.Unix(0, 0)
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	reqs := []Request{
		{ID: 1, Arrive: t0, Prompt: seqOf(0, 2), PromptTokens: 32, Output: 3},
		{ID: 2, Arrive: t0, Prompt: seqOf(1000, 2), PromptTokens: 32, Output: 2},
		{ID: 3, Arrive: ms(200), Prompt: seqOf(0, 2), PromptTokens: 32, Output: 1, Policy: Policy{Kind: Pin, TTL: time.Second}},
		{ID: 4, Arrive: ms(300), Prompt: seqOf(0, 2), PromptTokens: 40, Output: 1},
	}
	got := Simulate(p, reqs)
	want := []struct {
		admitted, first, finish float64
		hit, recomputed         int
	}{
		{0, 22.5, 63.5, 0, 32},
		{63.5, 86, 106.5, 0, 32},
		{200, 221.5, 221.5, 1, 16},
		{300, 321, 321, 2, 8},
	}
	for i, w := range want {
		g := got[i]
		if !g.Admitted.Equal(ms(w.admitted)) || !g.FirstToken.Equal(ms(w.first)) || !g.Finish.Equal(ms(w.finish)) ||
			g.Admission.Hit != w.hit || g.Recomputed != w.recomputed {
			t.Errorf("request %d: admitted %v, first %v, finish %v, %+v, recomputed %d; want %v %v %v, %d hits, %d recomputed",
				g.ID, g.Admitted.Sub(t0), g.FirstToken.Sub(t0), g.Finish.Sub(t0), g.Admission, g.Recomputed, w.admitted, w.first, w.finish, w.hit, w.recomputed)
		}
	}
}

// TestPrefixOnly: a prompt reuses only its cached prefix: with its first
// block gone, its second, though in memory, is computed again.
func TestPrefixOnly(t *testing.T) {
	c := NewCache(testProfile())
	t0 := time.Unix(0, 0)
	h := seqOf(0, 2)
	a, _, _ := c.Admit(h, 0, t0)
	keep, _, _ := c.Admit(h[1:], 0, t0) // holds the second block alone
	c.Release(a, Policy{Kind: Discard}, t0)
	filler, _, _ := c.Admit(seqOf(1000, 3), 0, t0) // evicts the first block, the only one unused
	c.Release(filler, Policy{Kind: Discard}, t0)
	if _, ad, ok := c.Admit(h, 0, t0); !ok || ad.Hit != 0 || ad.Miss != 2 || c.Resident() != 4 {
		t.Errorf("%+v %v: want 2 misses", ad, ok)
	}
	_ = keep
}

// TestSimulateTooLarge: a sequence the cache can never hold (5 blocks of
// 4) is not served; the one behind it is, at once (at 100 ms, not at the
// next arrival); one of no output ends with its prefill, with no token.
func TestSimulateTooLarge(t *testing.T) {
	t0 := time.Unix(0, 0)
	got := Simulate(testProfile(), []Request{
		{ID: 1, Arrive: t0, Prompt: seqOf(0, 5), PromptTokens: 80, Output: 1},
		{ID: 2, Arrive: t0.Add(100 * time.Millisecond), Prompt: seqOf(1000, 1), PromptTokens: 16, Output: 1},
		{ID: 3, Arrive: t0.Add(10 * time.Second), Prompt: seqOf(2000, 1), PromptTokens: 16},
	})
	// 2: 16 tokens of prefill (1 ms) + a step of 1 (20.5 ms). 3: the
	// prefill and the step's base (20 ms), no sequence decoding.
	if got[0].ID != 1 || !got[0].Finish.IsZero() || got[1].Finish.Sub(t0) != 121500*time.Microsecond ||
		!got[2].FirstToken.IsZero() || got[2].Finish.Sub(t0) != 10021*time.Millisecond {
		t.Errorf("%+v", got)
	}
}

// TestChunkedPrefill: with 24 tokens a step, A's 32-token prompt takes two
// steps (24, then 8 with its first token), and B, which comes during A's
// decode, is prefilled beside A's tokens, within what is left:
//
//	step 1: A prefills 24: 20 ms + 1.5 ms = 21.5 ms (no token)
//	step 2: A prefills 8 and decodes: 20 + 0.5 + 0.5 = 21 ms → 42.5 ms, A's first token
//	step 3: A decodes (1 token) and B prefills 23 of 32: 20 + 0.5 + 1.4375 = 21.9375 ms → 64.4375 ms
//	step 4: A decodes, B prefills 9 and decodes: 20 + 1 + 0.5625 = 21.5625 ms → 86 ms: both done
func TestChunkedPrefill(t *testing.T) {
	p := testProfile()
	p.MaxBatchedTokens = 24
	p.KVMemoryBytes, p.CapacityTokens = 128*131072, 128 // room for both
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	got := Simulate(p, []Request{
		{ID: 1, Arrive: t0, Prompt: seqOf(0, 2), PromptTokens: 32, Output: 3},
		{ID: 2, Arrive: t0.Add(30 * time.Millisecond), Prompt: seqOf(1000, 2), PromptTokens: 32, Output: 1},
	})
	at := func(d time.Time) time.Duration { return d.Sub(t0) }
	if at(got[0].FirstToken) != 42500*time.Microsecond || at(got[0].Finish) != 86*time.Millisecond ||
		at(got[1].Admitted) != 42500*time.Microsecond || at(got[1].Finish) != 86*time.Millisecond {
		t.Errorf("A first %v done %v; B admitted %v done %v", at(got[0].FirstToken), at(got[0].Finish), at(got[1].Admitted), at(got[1].Finish))
	}
}

// TestRepeatedHash: a prompt naming one block twice (a hash collision)
// holds it once: one block in memory, the second counted a miss.
func TestRepeatedHash(t *testing.T) {
	c := NewCache(testProfile())
	h := seqOf(0, 1)[0]
	s, ad, ok := c.Admit([]uint64{h, h}, 0, time.Unix(0, 0))
	if !ok || ad.Miss != 2 || c.Resident() != 1 {
		t.Fatalf("%+v %v, %d resident", ad, ok, c.Resident())
	}
	c.Release(s, Policy{Kind: Discard}, time.Unix(0, 0))
	if _, ad, _ := c.Admit([]uint64{h}, 0, time.Unix(0, 0)); ad.Hit != 1 {
		t.Errorf("after the release: %+v", ad)
	}
}

func TestBuiltinProfiles(t *testing.T) {
	for _, name := range BuiltinProfiles() {
		p, err := LoadProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Check(); err != nil {
			t.Error(err)
		}
	}
	// 55.94 GB / 131,072 bytes a token = 426,788, in blocks of 16: 426,784.
	if p := Llama3_8B_A100(); p.CapacityTokens != 426784 || p.KVBytesPerToken != 131072 {
		t.Errorf("llama3-8b-a100: %d tokens of %d bytes", p.CapacityTokens, p.KVBytesPerToken)
	}
}

func TestLoadProfileFile(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		path := dir + "/p.json"
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	src := `{"Name":"tiny","Layers":32,"KVHeads":8,"HeadDim":128,"BytesPerValue":2,"KVBytesPerToken":131072,
		"KVMemoryBytes":8388608,"CapacityTokens":64,"BlockTokens":16,"DecodeBase":"20ms","DecodePerSeq":"500us",
		"PrefillTokensPerSec":16000,"SwapBytesPerSec":16e9,"Sources":{"Layers":"a","KVHeads":"a","HeadDim":"a","BytesPerValue":"a",
		"KVMemoryBytes":"a","DecodeBase":"a","DecodePerSeq":"a","PrefillTokensPerSec":"a","SwapBytesPerSec":"a"}}`
	p, err := LoadProfile(write(src))
	if err != nil || p.DecodeBase != 20*time.Millisecond || p.DecodePerSeq != 500*time.Microsecond || p.CapacityTokens != 64 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := LoadProfile(write(strings.Replace(src, `"CapacityTokens":64`, `"CapacityTokens":65`, 1))); err == nil || !strings.Contains(err.Error(), "is 64") {
		t.Errorf("a capacity that does not add up: %v", err)
	}
	if _, err := LoadProfile(write(strings.Replace(src, `"Name"`, `"Nmae"`, 1))); err == nil {
		t.Error("an unknown field was taken")
	}
	if _, err := LoadProfile("no-such-profile"); err == nil || !strings.Contains(err.Error(), "llama3-8b-a100") {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestSimulateByProgram: A (program 0) runs from 0 with 3 of the 4
// blocks; B, a new program's turn of 3 blocks, arrives at 10 ms, and C,
// program 0's next turn, with A's prompt (shared with A while it runs) and
// one block of its own, at 20 ms. In arrival order B waits for A (done at
// 63.5 ms, TestSimulate), evicting A's last block (done at 86 ms), and C,
// behind it, computes that block again (16 tokens: 1 ms + 20.5 ms →
// 107.5 ms). By program C goes first: it fits beside A at once (a step
// of both from 22.5 ms: 21 ms → 43.5 ms), A ends a step later (64 ms),
// and B after it (86.5 ms).
func TestSimulateByProgram(t *testing.T) {
	t0 := time.Unix(0, 0)
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	for _, byProgram := range []bool{false, true} {
		reqs := []Request{
			{ID: 1, Arrive: t0, Prompt: seqOf(0, 2), PromptTokens: 32, Output: 3},
			{ID: 2, Arrive: ms(10), Prompt: seqOf(1000, 2), PromptTokens: 32, Output: 1},
			{ID: 3, Arrive: ms(20), Prompt: seqOf(0, 2), PromptTokens: 32, Output: 1},
		}
		if byProgram {
			reqs[0].Program, reqs[1].Program, reqs[2].Program = t0.Add(1), ms(10), t0.Add(1)
		}
		got := Simulate(testProfile(), reqs)
		wantB, wantC := ms(86), ms(107.5)
		if byProgram {
			wantB, wantC = ms(86.5), ms(43.5)
		}
		if !got[1].Finish.Equal(wantB) || !got[2].Finish.Equal(wantC) {
			t.Errorf("by program %v: B done at %v, C at %v; want %v, %v", byProgram, got[1].Finish.Sub(t0), got[2].Finish.Sub(t0), wantB.Sub(t0), wantC.Sub(t0))
		}
	}
}

// TestAttentionTime: a step reads every decoding context once. Two
// sequences of 16-token prompts decode 2 tokens each: the first step
// reads 16 + 16 tokens, the second 17 + 17; at 131,072 bytes a token and
// 131,072,000 bytes a second that is 32 ms and 34 ms, on top of the
// steps' 2 ms of prefill and 21 ms each.
func TestAttentionTime(t *testing.T) {
	p := testProfile()
	p.KVReadBytesPerSec = 131072000
	p.Sources["KVReadBytesPerSec"] = "the test's own figure"
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	got := Simulate(p, []Request{
		{ID: 1, Arrive: t0, Prompt: seqOf(0, 1), PromptTokens: 16, Output: 2},
		{ID: 2, Arrive: t0, Prompt: seqOf(1000, 1), PromptTokens: 16, Output: 2},
	})
	// Step 1: 20 + 2 · 0.5 + 32/16,000 s (2 ms) + 32 ms = 55 ms; step 2: 21 + 34 = 55 ms.
	if d := got[1].Finish.Sub(t0); d != 110*time.Millisecond || got[0].FirstToken.Sub(t0) != 55*time.Millisecond {
		t.Errorf("first token %v, done %v; want 55ms, 110ms", got[0].FirstToken.Sub(t0), d)
	}
	p.Sources["KVReadBytesPerSec"] = ""
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "KVReadBytesPerSec has no source") {
		t.Errorf("no source: %v", err)
	}
}
