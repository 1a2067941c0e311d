package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// TestMemoryConversationsBounds: a tenant past its own bound is refused and
// evicts nobody; past the bound in all, the conversation written least
// recently goes; what is deleted is counted back.
func TestMemoryConversationsBounds(t *testing.T) {
	m := runtime.NewMemoryConversations(12_000, 6_000)
	alice, bob := runtime.WithTenant(context.Background(), "alice"), runtime.WithTenant(context.Background(), "bob")
	msg := func(n int) protocol.Items {
		return protocol.Items{&protocol.Message{ID: "msg_1", Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: strings.Repeat("a", n)}}}}
	}
	conv := func(id string) *protocol.Conversation { return &protocol.Conversation{ID: id, Object: "conversation"} }
	if err := m.CreateConversation(bob, conv("conv_b"), msg(2_000)); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateConversation(alice, conv("conv_a1"), msg(2_000)); err != nil {
		t.Fatal(err)
	}
	// Alice's own bound: refused, nothing evicted.
	if err := m.AddConversationItems(alice, "conv_a1", "", msg(5_000)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("past the tenant's bound: %v", err)
	}
	if _, err := m.GetConversation(bob, "conv_b"); err != nil {
		t.Errorf("bob's conversation after alice's refusal: %v", err)
	}
	// A named addition refused for room is not marked made.
	if err := m.AddConversationItems(alice, "conv_a1", "resp_1", msg(5_000)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("past the tenant's bound, named: %v", err)
	}
	// Deleting counts back: alice can add again, and the retry adds.
	if err := m.DeleteConversationItem(alice, "conv_a1", "msg_1"); err != nil {
		t.Fatal(err)
	}
	if err := m.AddConversationItems(alice, "conv_a1", "resp_1", msg(5_000)); err != nil {
		t.Errorf("after deleting an item: %v", err)
	}
	if items, _ := m.ConversationItems(alice, "conv_a1"); len(items) != 1 {
		t.Errorf("%d items after the retry, want 1", len(items))
	}
	// The bound in all: carol's and dave's new conversations push out the
	// least recently written (bob's).
	carol, dave := runtime.WithTenant(context.Background(), "carol"), runtime.WithTenant(context.Background(), "dave")
	for _, ctx := range []context.Context{carol, dave} {
		if err := m.CreateConversation(ctx, conv("conv_c1"), msg(2_500)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.GetConversation(bob, "conv_b"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("the least recently written conversation past the bound in all: %v", err)
	}
	for _, ctx := range []context.Context{alice, carol, dave} {
		if _, err := m.ConversationItems(ctx, map[context.Context]string{alice: "conv_a1", carol: "conv_c1", dave: "conv_c1"}[ctx]); err != nil {
			t.Errorf("a conversation written since: %v", err)
		}
	}
	// Another tenant's id is unknown.
	if _, err := m.ConversationItems(bob, "conv_c1"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("another tenant's conversation: %v", err)
	}
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
