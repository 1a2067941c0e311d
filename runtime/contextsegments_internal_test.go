package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/seal"
)

// TestOpenWindowChecks: opening a compaction item follows its chain of
// segments as far as maxSegmentHops, and no further; a window that opens
// into another count of items than its reference says, a segment whose
// bytes are not the ones its key names, and one kept under another tenant
// are each refused invalid_encrypted_content at the item's param. Items
// this server seals never reach these; what a server sharing its key
// but not its build, or a store that mixed keys up, could hand it does.
func TestOpenWindowChecks(t *testing.T) {
	t.Parallel()
	s, err := NewServer(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	msg := func(i int) protocol.Items { return protocol.Items{protocol.UserMessage(fmt.Sprintf("message %d", i))} }
	// put keeps p as a segment of tenant t, and refers to it.
	put := func(p seal.Payload, items, span int) *seal.Ref {
		t.Helper()
		content, err := s.sealer.Seal(p)
		if err != nil {
			t.Fatal(err)
		}
		seg, _ := seal.Segment(content)
		if err := s.segments.PutSegment(ctx, "t", seal.Key(seg), seg); err != nil {
			t.Fatal(err)
		}
		return &seal.Ref{Key: seal.Key(seg), Items: items, Span: span}
	}
	item := func(p seal.Payload) *protocol.Compaction {
		t.Helper()
		content, err := s.sealer.Seal(p)
		if err != nil {
			t.Fatal(err)
		}
		return &protocol.Compaction{ID: "cmp_test", EncryptedContent: content, CreatedBy: contextCompaction}
	}
	// A chain of maxSegmentHops segments opens, whole and in order.
	ref := put(seal.Payload{Items: msg(0)}, 1, 1)
	for i := 1; i < maxSegmentHops; i++ {
		ref = put(seal.Payload{Prev: ref, Items: msg(i)}, i+1, 1)
	}
	w, perr := s.openWindow(ctx, "t", item(seal.Payload{Prev: ref, Items: msg(maxSegmentHops)}), "input[0].encrypted_content")
	if perr != nil || len(w.items) != maxSegmentHops+1 || len(w.chain) != maxSegmentHops {
		t.Fatalf("a chain of %d segments: %d items, %d segments, %v", maxSegmentHops, len(w.items), len(w.chain), perr)
	}
	for i, it := range w.items {
		if got := it.(*protocol.Message).Content.Text(); got != fmt.Sprintf("message %d", i) {
			t.Fatalf("item %d of the window is %q", i, got)
		}
	}

	longer := put(seal.Payload{Prev: ref, Items: msg(maxSegmentHops)}, maxSegmentHops+1, 1)
	first := put(seal.Payload{Items: msg(0)}, 1, 1)
	s.windows = newWindowCache(0) // nothing opened lately: every chain is read
	if err := s.segments.PutSegment(ctx, "t", strings.Repeat("0", 64), []byte("not a segment")); err != nil {
		t.Fatal(err)
	}
	forged := seal.Ref{Key: strings.Repeat("0", 64), Items: 1, Span: 1} // bytes that are not the ones its key names
	for name, c := range map[string]struct {
		tenant string
		ref    *seal.Ref
		want   string
	}{
		"past maxSegmentHops": {"t", longer, "more than 64 segments"},
		"a count not its own": {"t", &seal.Ref{Key: first.Key, Items: 2, Span: 1}, "a window of 2 items that opened into 1"},
		"another tenant's":    {"u", first, "no longer keeps"},
		"bytes not its key's": {"t", &forged, "no longer keeps"},
	} {
		_, perr := s.openWindow(ctx, c.tenant, item(seal.Payload{Prev: c.ref, Items: msg(99)}), "input[2].encrypted_content")
		if perr == nil || perr.Code != protocol.CodeInvalidEncrypted || perr.Param != "input[2].encrypted_content" || !strings.Contains(perr.Message, c.want) {
			t.Errorf("%s: %v, want invalid_encrypted_content at input[2].encrypted_content saying %q", name, perr, c.want)
		}
	}
}
