package sampler

import (
	"slices"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestPromptSegments: a prompt rebuilt from its Segments, with
// AppendSegment or from their bytes alone with AppendPacked, holds the same
// tokens, items and hash, and extends as the original does; packed bytes
// that are not uvarints of tokens, or not as many as a segment says, are
// refused.
func TestPromptSegments(t *testing.T) {
	var p *Prompt
	for _, item := range [][]Token{{1, 200_000, 3}, {}, {70_000}, {maxToken - 1}} {
		p = p.Append(item)
	}
	var q, r *Prompt
	for _, seg := range p.Segments() {
		var err error
		if q, err = q.AppendSegment(seg); err != nil {
			t.Fatal(err)
		}
		if r, err = r.AppendPacked(seg.Packed); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []*Prompt{q, r} {
		if q.Len() != p.Len() || q.Items() != p.Items() || q.hash() != p.hash() || !slices.Equal(q.All(), p.All()) {
			t.Fatalf("rebuilt %v (%d items, hash %x), want %v (%d items, hash %x)", q.All(), q.Items(), q.hash(), p.All(), p.Items(), p.hash())
		}
		if a, b := p.Append([]Token{9}), q.Append([]Token{9}); a.hash() != b.hash() {
			t.Fatal("the rebuilt prompt extends to another hash")
		}
	}
	for _, bad := range [][]byte{{0x80}, {0xff, 0xff, 0xff, 0xff, 0x7f}, {0x80, 0x80, 0x80, 0x08}} {
		if _, err := q.AppendPacked(bad); err == nil {
			t.Errorf("packed %x read back", bad)
		}
		if _, err := q.AppendSegment(Segment{Packed: bad, Tokens: 1}); err == nil {
			t.Errorf("segment %x read back", bad)
		}
	}
	if _, err := q.AppendSegment(Segment{Packed: []byte{1, 2}, Tokens: 3}); err == nil {
		t.Error("a segment of 2 tokens said to hold 3 read back")
	}
}

// FuzzPacked: AppendSegment takes the bytes AppendPacked takes, and
// counts the tokens it does.
func FuzzPacked(f *testing.F) {
	for _, b := range [][]byte{{1, 0x80, 0x01}, {0x80}, {0xff, 0xff, 0xff, 0x07}, {0xff, 0xff, 0xff, 0x08}, {0x80, 0x00}, {0xff, 0xff, 0xff, 0x80, 0x00, 0x30}, {}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, perr := (*Prompt)(nil).AppendPacked(b)
		n, ok := countPacked(b)
		if ok != (perr == nil) || ok && n != p.Len() {
			t.Fatalf("%x: counted %d (%v), AppendPacked %d (%v)", b, n, ok, p.Len(), perr)
		}
	})
}

// TestPromptSince: a prompt's items from the n-th on are the prompt those
// items make appended from nothing: the same tokens, items and hash (what
// a PrefixCache matches), for every n, past the end included.
func TestPromptSince(t *testing.T) {
	items := [][]Token{{1, 200_000, 3}, {}, {70_000}, {maxToken - 1, 5}}
	var p *Prompt
	for _, item := range items {
		p = p.Append(item)
	}
	for n := range len(items) + 2 {
		var want *Prompt
		for _, item := range items[min(n, len(items)):] {
			want = want.Append(item)
		}
		got := p.Since(n)
		if got.Len() != want.Len() || got.Items() != want.Items() || got.hash() != want.hash() || !slices.Equal(got.All(), want.All()) {
			t.Errorf("Since(%d) = %v (%d items, hash %x), want %v (%d items, hash %x)", n, got.All(), got.Items(), got.hash(), want.All(), want.Items(), want.hash())
		}
	}
}

// TestAppendBare: an item appended bare (Renderer.AppendBare) reads as
// the same item appended with its ids and then bared: the same length,
// items and hash, each item's count in Segments, no ids; on a prompt that
// holds its ids, and on none.
func TestAppendBare(t *testing.T) {
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	items := protocol.Items{
		&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "package main\n\nfunc main() {}\n\x7f\xff"}},
		&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "Let me read it."}}},
		nil,
	}
	for _, start := range []*Prompt{nil, (*Prompt)(nil).Append([]Token{1, 2, 3})} {
		want, got := start, start
		for _, it := range items {
			want, got = want.Append(r.Item(it)), r.AppendBare(got, it)
		}
		want = want.Bare()
		if got.Len() != want.Len() || got.Items() != want.Items() || got.hash() != want.hash() || got.HasTokens() {
			t.Fatalf("appended bare: %d tokens, %d items, hash %x, ids kept %v; want %d, %d, %x, none",
				got.Len(), got.Items(), got.hash(), got.HasTokens(), want.Len(), want.Items(), want.hash())
		}
		for i, seg := range got.Segments() {
			if w := want.Segments()[i]; seg.Tokens != w.Tokens || seg.Sum != w.Sum || seg.Packed != nil && i >= start.Items() {
				t.Errorf("segment %d: %d tokens, hash %x, packed %x; want %d, %x, none", i, seg.Tokens, seg.Sum, seg.Packed, w.Tokens, w.Sum)
			}
		}
	}
}

// TestPromptBare: a prompt that let its tokens go reads as its original
// does wherever the ids are not needed (length, items, hash, each item's
// count in Segments), extends to the same hash, and is matched by a
// PrefixCache as its original is; Since still hashes the items appended
// after it, and All, which needs the ids it let go, panics. Baring a
// prompt twice, or one extended since, shares what was bare already.
func TestPromptBare(t *testing.T) {
	items := [][]Token{{1, 200_000, 3}, {70_000}, {}, {maxToken - 1, 5}}
	var p *Prompt
	for _, item := range items[:2] {
		p = p.Append(item)
	}
	b := p.Bare()
	if b.Bare() != b || !b.Shed() || b.HasTokens() || !p.HasTokens() {
		t.Fatal("Bare of a bare prompt is not itself, or HasTokens says otherwise")
	}
	for _, item := range items[2:] {
		p, b = p.Append(item), b.Append(item)
	}
	if b.Len() != p.Len() || b.Items() != p.Items() || b.hash() != p.hash() || b.HasTokens() {
		t.Fatalf("bare and extended: %d tokens, %d items, hash %x; want %d, %d, %x", b.Len(), b.Items(), b.hash(), p.Len(), p.Items(), p.hash())
	}
	for i, seg := range b.Segments() {
		if want := len(items[i]); seg.Tokens != want || (i < 2 || want == 0) != (seg.Packed == nil) {
			t.Errorf("segment %d counts %d tokens (packed %x), want %d", i, seg.Tokens, seg.Packed, want)
		}
	}
	if got, want := b.Since(2), p.Since(2); !got.Equal(want) {
		t.Errorf("Since(2) of the bare prompt = %v, want %v", got.All(), want.All())
	}
	bb := b.Bare()
	if bb.parent.parent != b.parent.parent || bb.Len() != b.Len() || bb.hash() != b.hash() {
		t.Error("baring again did not share the items bare already")
	}
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	c := NewPrefixCache(r, PrefixCacheOptions{})
	c.Prefill(&Request{Prompt: p.parent})
	n, cached := c.Prefill(&Request{Prompt: b})
	if m, want := c.Prefill(&Request{Prompt: p}); n != m || cached != m-len(items[3]) || want != m {
		t.Errorf("the prefix cache read the bare prompt as %d tokens, %d cached; want %d, %d", n, cached, m, m-len(items[3]))
	}
	for name, f := range map[string]func(){"All": func() { b.All() }, "Since": func() { b.Since(1) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s of a bare prompt did not panic", name)
				}
			}()
			f()
		}()
	}
}
