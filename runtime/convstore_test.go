package runtime_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// TestMemoryConversationsBounds: a tenant past its own bound evicts its
// own least recently written conversations, never another tenant's; past
// the bound in all, the least recently written of all go; only a
// conversation larger than a bound on its own is refused, and is left as
// it was; what is deleted is counted back.
func TestMemoryConversationsBounds(t *testing.T) {
	t.Parallel()
	// A conversation of one message of n bytes holds about n and 0.75 KB.
	m := runtime.NewMemoryConversations(24_000, 12_000)
	alice, bob := runtime.WithTenant(context.Background(), "alice"), runtime.WithTenant(context.Background(), "bob")
	msg := func(id string, n int) protocol.Items {
		return protocol.Items{&protocol.Message{ID: id, Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: strings.Repeat("a", n)}}}}
	}
	conv := func(id string) *protocol.Conversation { return &protocol.Conversation{ID: id, Object: "conversation"} }
	kept := func(ctx context.Context, ids ...string) (out []string) {
		for _, id := range ids {
			if _, err := m.GetConversation(ctx, id); err == nil {
				out = append(out, id)
			}
		}
		return out
	}
	if err := m.CreateConversation(bob, conv("conv_b"), msg("msg_1", 4_000)); err != nil {
		t.Fatal(err)
	}
	// Alice's third conversation takes her past her bound: her first goes.
	for _, id := range []string{"conv_a1", "conv_a2", "conv_a3"} {
		if err := m.CreateConversation(alice, conv(id), msg("msg_1", 4_000)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if got := kept(alice, "conv_a1", "conv_a2", "conv_a3"); !slices.Equal(got, []string{"conv_a2", "conv_a3"}) {
		t.Errorf("alice past her bound kept %v, want her newest two", got)
	}
	// Written to, her older conversation stays, and the one written less
	// recently goes.
	if err := m.AddConversationItems(alice, "conv_a2", "", msg("msg_2", 3_000)); err != nil {
		t.Fatal(err)
	}
	if got := kept(alice, "conv_a2", "conv_a3"); !slices.Equal(got, []string{"conv_a2"}) {
		t.Errorf("after writing conv_a2 past her bound alice kept %v, want conv_a2", got)
	}
	if got := kept(bob, "conv_b"); len(got) != 1 {
		t.Errorf("bob's conversation went for alice's bound")
	}
	// Larger than her bound on its own: refused, named or not, and nothing
	// changes.
	for _, once := range []string{"", "resp_1"} {
		if err := m.AddConversationItems(alice, "conv_a2", once, msg("msg_3", 6_000)); !errors.Is(err, runtime.ErrTooLarge) {
			t.Errorf("a conversation past the tenant's bound on its own (once %q): %v", once, err)
		}
	}
	if items, _ := m.ConversationItems(alice, "conv_a2"); len(items) != 2 {
		t.Errorf("%d items after the refusals, want 2", len(items))
	}
	if err := m.CreateConversation(alice, conv("conv_big"), msg("msg_1", 13_000)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("a new conversation past the tenant's bound on its own: %v", err)
	}
	if got := kept(alice, "conv_a2", "conv_big"); !slices.Equal(got, []string{"conv_a2"}) {
		t.Errorf("after the refused create alice has %v, want conv_a2", got)
	}
	// Deleting counts back: the named addition refused for room was not
	// marked made, and its retry adds.
	if err := m.DeleteConversationItem(alice, "conv_a2", "msg_1"); err != nil {
		t.Fatal(err)
	}
	if err := m.AddConversationItems(alice, "conv_a2", "resp_1", msg("msg_3", 6_000)); err != nil {
		t.Errorf("after deleting an item: %v", err)
	}
	if items, _ := m.ConversationItems(alice, "conv_a2"); len(items) != 2 {
		t.Errorf("%d items after the retry, want 2", len(items))
	}
	// The bound in all: carol's and dave's new conversations push out the
	// least recently written (bob's).
	carol, dave := runtime.WithTenant(context.Background(), "carol"), runtime.WithTenant(context.Background(), "dave")
	for _, ctx := range []context.Context{carol, dave} {
		if err := m.CreateConversation(ctx, conv("conv_c1"), msg("msg_1", 6_000)); err != nil {
			t.Fatal(err)
		}
	}
	if got := kept(bob, "conv_b"); len(got) != 0 {
		t.Errorf("the least recently written conversation stayed past the bound in all")
	}
	for _, ctx := range []context.Context{alice, carol, dave} {
		if _, err := m.ConversationItems(ctx, map[context.Context]string{alice: "conv_a2", carol: "conv_c1", dave: "conv_c1"}[ctx]); err != nil {
			t.Errorf("a conversation written since: %v", err)
		}
	}
	// Another tenant's id is unknown.
	if _, err := m.ConversationItems(bob, "conv_c1"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("another tenant's conversation: %v", err)
	}
}

// bigMetadata is 16 metadata pairs of the longest key and value the API
// takes (64 and 512 characters), each string made anew, as decoding a
// request makes them: 9,216 bytes of strings.
func bigMetadata(i int) map[string]string {
	md := make(map[string]string, protocol.MaxMetadataPairs)
	for j := range protocol.MaxMetadataPairs {
		k := fmt.Sprintf("%02d-%061d", j, i)
		md[k] = strings.Repeat(k[:8], protocol.MaxMetadataValueLen/8)
	}
	return md
}

// metadataSize is the bytes of md's keys and values.
func metadataSize(md map[string]string) int {
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	return n
}

// TestMemoryConversationsMetadata: a conversation's metadata counts
// towards its tenant's bound, at its creation and as it is replaced: the
// metadata a tenant's kept conversations hold stays within the bound, the
// least recently written going.
func TestMemoryConversationsMetadata(t *testing.T) {
	t.Parallel()
	const bound = 256 << 10
	m := runtime.NewMemoryConversations(0, bound)
	ctx := runtime.WithTenant(context.Background(), "alice")
	const n = 400 // 3.6 MB of metadata: fourteen times the bound
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("conv_%d", i)
		if err := m.CreateConversation(ctx, &protocol.Conversation{ID: ids[i], Object: "conversation", Metadata: bigMetadata(i)}, nil); err != nil {
			t.Fatalf("%s: %v", ids[i], err)
		}
	}
	held, kept := 0, 0
	for _, id := range ids {
		if c, err := m.GetConversation(ctx, id); err == nil {
			held += metadataSize(c.Metadata)
			kept++
		}
	}
	t.Logf("%d conversations of %d KB of metadata under a tenant bound of %d KiB: %d kept, %d KB of metadata", n, metadataSize(bigMetadata(0))/1000, bound>>10, kept, held/1000)
	if held > bound {
		t.Errorf("the tenant's kept conversations hold %d KB of metadata, past its bound of %d KiB", held/1000, bound>>10)
	}
	if _, err := m.GetConversation(ctx, ids[n-1]); err != nil {
		t.Errorf("the newest conversation: %v", err)
	}
	// Metadata replaced by more makes room the same way: the least
	// recently written conversation goes.
	oldest := ids[n-kept]
	if _, err := m.GetConversation(ctx, oldest); err != nil {
		t.Fatalf("the oldest conversation kept, %s: %v", oldest, err)
	}
	if err := m.CreateConversation(ctx, &protocol.Conversation{ID: "conv_bare", Object: "conversation"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdateConversation(ctx, "conv_bare", bigMetadata(n)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetConversation(ctx, oldest); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("the least recently written conversation after another's metadata grew past the bound: %v", err)
	}
}

// TestConversationMetadataMemory: thousands of conversations with the
// most metadata the API takes, under a small tenant bound, keep the live
// heap within a generous multiple of the bound: what a conversation
// holds in memory counts its metadata, its structs and its index entries.
func TestConversationMetadataMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	const bound = 4 << 20
	m := runtime.NewMemoryConversations(0, bound)
	ctx := runtime.WithTenant(context.Background(), "alice")
	before := liveHeap()
	const n = 6000 // 55 MB of metadata
	for i := range n {
		c := &protocol.Conversation{ID: fmt.Sprintf("conv_%d", i), Object: "conversation", Metadata: bigMetadata(i)}
		if err := m.CreateConversation(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	held := int64(liveHeap()) - int64(before)
	t.Logf("%d conversations with 16 metadata pairs each under a tenant bound of %d MiB: live heap +%.1f MiB", n, bound>>20, float64(held)/mib)
	if held > bound*3/2 {
		t.Errorf("the live heap grew %.1f MiB under a tenant bound of %d MiB: want at most 1.5 times the bound", float64(held)/mib, bound>>20)
	}
	goruntime.KeepAlive(m)
}

// testAddOnce: an addition named once is made once, whatever repeats it;
// unnamed ones, each time.
func testAddOnce(t *testing.T, st runtime.ConversationStore) {
	ctx := runtime.WithTenant(context.Background(), "alice")
	if err := st.CreateConversation(ctx, &protocol.Conversation{ID: "conv_once", Object: "conversation"}, nil); err != nil {
		t.Fatal(err)
	}
	msg := protocol.Items{&protocol.Message{ID: "msg_1", Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}}}
	for range 2 {
		for _, once := range []string{"resp_1", ""} {
			if err := st.AddConversationItems(ctx, "conv_once", once, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if items, err := st.ConversationItems(ctx, "conv_once"); err != nil || len(items) != 3 {
		t.Errorf("%d items, %v: want 3 (once, and twice unnamed)", len(items), err)
	}
	if err := st.AddConversationItems(ctx, "conv_gone", "resp_1", msg); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("an unknown conversation: %v", err)
	}
}

func TestConversationAddOnce(t *testing.T) {
	testAddOnce(t, runtime.NewMemoryConversations(0, 0))
	rd := redistest.Start(t)
	st, err := redisstore.New(rd.URL(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testAddOnce(t, st)
}
