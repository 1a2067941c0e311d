package sampler

import (
	"slices"
	"testing"
)

// TestPromptSegments: a prompt rebuilt from its Segments with AppendPacked
// holds the same tokens, items and hash, and extends as the original does;
// packed bytes that are not uvarints of tokens are refused.
func TestPromptSegments(t *testing.T) {
	var p *Prompt
	for _, item := range [][]Token{{1, 200_000, 3}, {}, {70_000}} {
		p = p.Append(item)
	}
	var q *Prompt
	for _, seg := range p.Segments() {
		var err error
		if q, err = q.AppendPacked(seg); err != nil {
			t.Fatal(err)
		}
	}
	if q.Len() != p.Len() || q.Items() != p.Items() || q.hash() != p.hash() || !slices.Equal(q.All(), p.All()) {
		t.Fatalf("rebuilt %v (%d items, hash %x), want %v (%d items, hash %x)", q.All(), q.Items(), q.hash(), p.All(), p.Items(), p.hash())
	}
	if a, b := p.Append([]Token{9}), q.Append([]Token{9}); a.hash() != b.hash() {
		t.Fatal("the rebuilt prompt extends to another hash")
	}
	for _, bad := range [][]byte{{0x80}, {0xff, 0xff, 0xff, 0xff, 0x7f}} {
		if _, err := q.AppendPacked(bad); err == nil {
			t.Errorf("packed %x read back", bad)
		}
	}
}
