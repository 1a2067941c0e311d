package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// newConversationStore is a Store on a redis-server of its own.
func newConversationStore(tb testing.TB, opts Options) *Store {
	tb.Helper()
	rd := redistest.Start(tb)
	opts.Timeout = 5 * time.Second // a shared machine's slow moments are not what these tests measure
	st, err := New(rd.URL(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// said is a user message with an id and a text.
func said(id, text string) protocol.Item {
	m := protocol.UserMessage(text)
	protocol.SetItemID(m, id)
	return m
}

// textOf is an item's text, as said wrote it.
func textOf(it protocol.Item) string {
	if m, ok := it.(*protocol.Message); ok && len(m.Content) == 1 {
		if c, ok := m.Content[0].(*protocol.InputText); ok {
			return c.Text
		}
	}
	return fmt.Sprintf("(%T)", it)
}

// keptBytes is what the store counts of items: each its hex-coded id, its
// msgpack, and its place twice with a colon.
func keptBytes(t *testing.T, items ...protocol.Item) int {
	t.Helper()
	n := 0
	for _, it := range items {
		b, err := protocol.MarshalAs(protocol.EncodingMsgpack, it)
		if err != nil {
			t.Fatal(err)
		}
		n += len(hexID(it.ItemID())) + len(b) + 2*placeDigits + 1
	}
	return n
}

// checkCounts checks that tenant's counts are what its conversations'
// keys hold: each conversation's bytes in the hash, their sum, and an
// expiry for each; it returns the sum.
func checkCounts(t *testing.T, st *Store, tenant string) int {
	t.Helper()
	ctx := t.Context()
	keys := st.convKeys(tenant, "")
	counted, err := st.c.HGetAll(ctx, keys[3]).Result()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for id, v := range counted {
		n, _ := strconv.Atoi(v)
		ck := st.convKeys(tenant, id)
		held := len(st.c.Get(ctx, ck[0]).Val())
		for _, k := range ck[1:3] {
			for _, m := range st.c.ZRange(ctx, k, 0, -1).Val() {
				held += len(m)
			}
		}
		if n != held {
			t.Errorf("%s: counted %d bytes, its keys hold %d", id, n, held)
		}
		if _, err := st.c.ZScore(ctx, keys[4], id).Result(); err != nil {
			t.Errorf("%s: no expiry: %v", id, err)
		}
		sum += n
	}
	total, _ := st.c.Get(ctx, keys[5]).Int()
	if total != sum {
		t.Errorf("the tenant's sum is %d, its conversations' %d", total, sum)
	}
	if n := st.c.ZCard(ctx, keys[4]).Val(); int(n) != len(counted) {
		t.Errorf("%d expiries for %d conversations", n, len(counted))
	}
	return sum
}

// itemsOf reads all of conversation id's items as "ID=TEXT".
func itemsOf(t *testing.T, st *Store, ctx context.Context, id string) []string {
	t.Helper()
	items, err := st.ConversationItems(ctx, id)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.ItemID()+"="+textOf(it))
	}
	return out
}

// TestConversationBounds: past MaxConversationBytes a creation, an
// addition or a metadata update is refused with runtime.ErrTooLarge (413
// request_too_large), past MaxTenantConversationBytes with
// runtime.ErrTenantFull (429 tenant_store_limit), and the conversation
// stays as it was; another tenant is not held back; deleting a
// conversation or an item gives its bytes back, as does a conversation's
// TTL ending; a named addition refused is not marked made. The counts
// always equal what the keys hold.
func TestConversationBounds(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", 1000)
	item := func(n int) protocol.Item { return said(fmt.Sprintf("msg_%03d", n), text) }
	u := keptBytes(t, item(0))
	obj, _ := protocol.Marshal(&protocol.Conversation{ID: "conv_a", Object: "conversation", Metadata: map[string]string{}})
	o := len(obj)
	// Room for a conversation of four items, and for two of them in a
	// tenant's, with half an item to spare.
	st := newConversationStore(t, Options{MaxConversationBytes: o + 4*u + u/2, MaxTenantConversationBytes: 2*(o+4*u) + u/2})
	alice := runtime.WithTenant(t.Context(), "alice")
	bob := runtime.WithTenant(t.Context(), "bob")
	conv := func(id string) *protocol.Conversation {
		return &protocol.Conversation{ID: id, Object: "conversation", Metadata: map[string]string{}}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(st.CreateConversation(alice, conv("conv_a"), protocol.Items{item(1), item(2), item(3), item(4)}))
	if got := checkCounts(t, st, "alice"); got != o+4*u {
		t.Errorf("a conversation of four items counted %d bytes, want %d", got, o+4*u)
	}
	if err := st.AddConversationItems(alice, "conv_a", "", protocol.Items{item(5)}); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("a fifth item: %v, want ErrTooLarge", err)
	}
	if got := itemsOf(t, st, alice, "conv_a"); len(got) != 4 {
		t.Errorf("after the refusal it holds %d items, want 4", len(got))
	}
	if err := st.CreateConversation(alice, conv("conv_x"), protocol.Items{item(1), item(2), item(3), item(4), item(5)}); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("created with five items: %v, want ErrTooLarge", err)
	}
	if _, err := st.UpdateConversation(alice, "conv_a", map[string]string{"note": text}); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("metadata past the bound: %v, want ErrTooLarge", err)
	}
	if c, err := st.GetConversation(alice, "conv_a"); err != nil || len(c.Metadata) != 0 {
		t.Errorf("after the refused update: %+v, %v", c, err)
	}

	must(st.CreateConversation(alice, conv("conv_b"), protocol.Items{item(1), item(2), item(3)}))
	must(st.AddConversationItems(alice, "conv_b", "", protocol.Items{item(4)}))
	checkCounts(t, st, "alice")
	if err := st.CreateConversation(alice, conv("conv_c"), protocol.Items{item(1)}); !errors.Is(err, runtime.ErrTenantFull) {
		t.Errorf("a third conversation: %v, want ErrTenantFull", err)
	}
	if _, err := st.GetConversation(alice, "conv_c"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("the refused conversation reads %v", err)
	}
	// Half an item is left: small metadata fits, an item does not.
	if _, err := st.UpdateConversation(alice, "conv_a", map[string]string{"k": "v"}); err != nil {
		t.Errorf("small metadata: %v", err)
	}
	// An empty conversation fits that half, but not an item added to it.
	must(st.CreateConversation(alice, conv("conv_e"), nil))
	if err := st.AddConversationItems(alice, "conv_e", "", protocol.Items{item(1)}); !errors.Is(err, runtime.ErrTenantFull) {
		t.Errorf("an item past the tenant's bound: %v, want ErrTenantFull", err)
	}
	must(st.DeleteConversation(alice, "conv_e"))
	must(st.DeleteConversationItem(alice, "conv_b", "msg_004"))
	checkCounts(t, st, "alice")
	must(st.AddConversationItems(alice, "conv_a", "", nil)) // an addition of nothing fits anywhere
	if err := st.AddConversationItems(alice, "conv_b", "resp_1", protocol.Items{item(5), item(6)}); !errors.Is(err, runtime.ErrTooLarge) {
		t.Errorf("two items on three: %v, want ErrTooLarge", err)
	}
	must(st.AddConversationItems(alice, "conv_b", "resp_1", protocol.Items{item(5)}))
	if got := itemsOf(t, st, alice, "conv_b"); len(got) != 4 {
		t.Errorf("a named addition refused, then made: %d items, want 4 (the refusal marked it made)", len(got))
	}

	// Bob is not held back by Alice's.
	must(st.CreateConversation(bob, conv("conv_a"), protocol.Items{item(1), item(2), item(3), item(4)}))
	must(st.CreateConversation(bob, conv("conv_b"), protocol.Items{item(1)}))
	checkCounts(t, st, "bob")

	// A deleted conversation's bytes are Alice's again.
	must(st.DeleteConversation(alice, "conv_a"))
	if got, want := checkCounts(t, st, "alice"), o+4*u; got != want {
		t.Errorf("after a deletion the tenant counts %d bytes, want %d", got, want)
	}
	must(st.CreateConversation(alice, conv("conv_c"), protocol.Items{item(1), item(2)}))

	// So are an expired one's, once Redis has forgotten it a second ago:
	// its keys gone and its expiry moved back, as its TTL ending leaves
	// them.
	keys := st.convKeys("alice", "conv_b")
	must(st.c.Del(t.Context(), keys[:3]...).Err())
	must(st.c.ZAdd(t.Context(), keys[4], redis.Z{Score: float64(time.Now().Add(-2 * time.Second).UnixMilli()), Member: "conv_b"}).Err())
	must(st.CreateConversation(alice, conv("conv_d"), protocol.Items{item(1)}))
	if got, want := checkCounts(t, st, "alice"), 2*o+3*u; got != want {
		t.Errorf("after conv_b expired the tenant counts %d bytes, want %d", got, want)
	}
	// And the tenant's keys outlive its conversations, whatever wrote
	// them last (Bob's, only creations).
	for _, k := range append(keys[3:], st.convKeys("bob", "")[3:]...) {
		if ttl := st.c.PTTL(t.Context(), k).Val(); ttl < DefaultTTL-time.Minute {
			t.Errorf("%s expires in %v, its conversations in %v", k, ttl, DefaultTTL)
		}
	}
}

// entry is an item of the model a test keeps of a conversation.
type entry struct{ id, text string }

// wantPage is q's window of model (oldest first) as the API pages it, and
// whether q.After is one of its items.
func wantPage(model []entry, q runtime.ItemPage) (page []string, more, found bool) {
	list := slices.Clone(model)
	if q.Desc {
		slices.Reverse(list)
	}
	if q.After != "" {
		i := slices.IndexFunc(list, func(e entry) bool { return e.id == q.After })
		if i < 0 {
			return nil, false, false
		}
		list = list[i+1:]
	}
	if len(list) > q.Limit {
		list, more = list[:q.Limit], true
	}
	for _, e := range list {
		page = append(page, e.id+"="+e.text)
	}
	return page, more, true
}

// checkPages reads every page of conversation id, in both orders, after
// each of its ids and none, by several limits, and each id's item, and
// compares them with model.
func checkPages(t *testing.T, st *Store, id string, model []entry) {
	t.Helper()
	ctx := t.Context()
	afters := []string{"", "msg_none"}
	for _, e := range model {
		afters = append(afters, e.id)
	}
	for _, desc := range []bool{false, true} {
		for _, after := range afters {
			for _, limit := range []int{1, 2, 5, 100} {
				q := runtime.ItemPage{Limit: limit, Desc: desc, After: after}
				items, more, err := st.ConversationPage(ctx, id, q)
				want, wantMore, found := wantPage(model, q)
				if !found {
					if !errors.Is(err, runtime.ErrItemNotStored) {
						t.Errorf("%+v: %v, want ErrItemNotStored", q, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				var got []string
				for _, it := range items {
					got = append(got, it.ItemID()+"="+textOf(it))
				}
				if !slices.Equal(got, want) || more != wantMore {
					t.Errorf("%+v: %v more %v, want %v more %v", q, got, more, want, wantMore)
				}
			}
		}
	}
	for _, e := range model {
		var newest entry
		for _, o := range model {
			if o.id == e.id {
				newest = o
			}
		}
		it, err := st.ConversationItem(ctx, id, e.id)
		if err != nil || textOf(it) != newest.text {
			t.Errorf("item %s: %v %v, want %s", e.id, it, err, newest.text)
		}
	}
	if _, err := st.ConversationItem(ctx, id, "msg_none"); !errors.Is(err, runtime.ErrItemNotStored) {
		t.Errorf("an item it does not hold: %v", err)
	}
	var all []string
	for _, e := range model {
		all = append(all, e.id+"="+e.text)
	}
	if got := itemsOf(t, st, ctx, id); !slices.Equal(got, all) {
		t.Errorf("all its items: %v, want %v", got, all)
	}
}

// TestConversationPages: a page of a conversation is the window the API
// lists, oldest or newest first, after any of its items, however many of
// them were deleted before, in the middle of or after the window, or
// added after the newest was deleted; an id held twice pages after its
// oldest ascending and its newest descending, reads as its newest and is
// deleted oldest first, as the memory store does.
func TestConversationPages(t *testing.T) {
	t.Parallel()
	st := newConversationStore(t, Options{})
	ctx := t.Context()
	var model []entry
	var items protocol.Items
	for i := range 12 {
		e := entry{fmt.Sprintf("msg_%02d", i), fmt.Sprintf("item %d", i)}
		if i == 3 || i == 8 {
			e.id = "msg_twice"
		}
		model = append(model, e)
		items = append(items, said(e.id, e.text))
	}
	if err := st.CreateConversation(ctx, &protocol.Conversation{ID: "conv_p", Object: "conversation"}, items[:5]); err != nil {
		t.Fatal(err)
	}
	if err := st.AddConversationItems(ctx, "conv_p", "", items[5:]); err != nil {
		t.Fatal(err)
	}
	checkPages(t, st, "conv_p", model)

	deleteOne := func(id string) {
		t.Helper()
		if err := st.DeleteConversationItem(ctx, "conv_p", id); err != nil {
			t.Fatalf("deleting %s: %v", id, err)
		}
		i := slices.IndexFunc(model, func(e entry) bool { return e.id == id })
		model = slices.Delete(model, i, i+1)
	}
	for _, id := range []string{"msg_00", "msg_05", "msg_twice", "msg_11"} {
		deleteOne(id)
	}
	if err := st.DeleteConversationItem(ctx, "conv_p", "msg_05"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("deleting an item again: %v", err)
	}
	checkPages(t, st, "conv_p", model)

	more := protocol.Items{said("msg_12", "item 12"), said("msg_13", "item 13"), said("msg_twice", "item 14")}
	if err := st.AddConversationItems(ctx, "conv_p", "", more); err != nil {
		t.Fatal(err)
	}
	model = append(model, entry{"msg_12", "item 12"}, entry{"msg_13", "item 13"}, entry{"msg_twice", "item 14"})
	checkPages(t, st, "conv_p", model)

	for _, id := range []string{"msg_twice", "msg_twice", "msg_13"} {
		deleteOne(id)
	}
	checkPages(t, st, "conv_p", model)

	if _, _, err := st.ConversationPage(ctx, "conv_none", runtime.ItemPage{Limit: 1}); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("a page of no conversation: %v", err)
	}
	if _, err := st.ConversationItem(ctx, "conv_none", "msg_01"); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("an item of no conversation: %v", err)
	}
	other := runtime.WithTenant(ctx, "mallory")
	if _, _, err := st.ConversationPage(other, "conv_p", runtime.ItemPage{Limit: 1}); !errors.Is(err, runtime.ErrNotStored) {
		t.Errorf("a page of another tenant's conversation: %v", err)
	}
}

// countRead counts the bytes a client reads from Redis.
type countRead struct{ n atomic.Int64 }

func (c *countRead) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &c.n}, nil
	}
}
func (c *countRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *countRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// TestConversationPageReadsWindow: a page of one item of a conversation
// of 2,000 items of 1 KB reads about one item's bytes from Redis, whatever
// its order or cursor, through the store and through the server's
// /v1/conversations/{id}/items?limit=1, as does reading one item; reading
// all of it reads all of it (so the count would see a page that did).
func TestConversationPageReadsWindow(t *testing.T) {
	t.Parallel()
	st := newConversationStore(t, Options{})
	var read countRead
	st.c.AddHook(&read)
	ctx := t.Context()
	if err := st.CreateConversation(ctx, &protocol.Conversation{ID: "conv_big", Object: "conversation"}, nil); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("y", 1000)
	const n = 2000
	for i := 0; i < n; i += 200 {
		var batch protocol.Items
		for j := i; j < i+200; j++ {
			batch = append(batch, said(fmt.Sprintf("msg_%04d", j), text))
		}
		if err := st.AddConversationItems(ctx, "conv_big", "", batch); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := runtime.NewServer(runtime.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(srv)
	t.Cleanup(func() {
		web.Close()
		srv.Shutdown(context.Background())
	})
	get := func(path string) error {
		resp, err := http.Get(web.URL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return nil
	}

	const window = 4 << 10 // an item, its place, the script's answer
	for _, tc := range []struct {
		name string
		read func() error
	}{
		{"newest", func() error {
			_, _, err := st.ConversationPage(ctx, "conv_big", runtime.ItemPage{Limit: 1, Desc: true})
			return err
		}},
		{"oldest", func() error {
			_, _, err := st.ConversationPage(ctx, "conv_big", runtime.ItemPage{Limit: 1})
			return err
		}},
		{"after the middle", func() error {
			_, _, err := st.ConversationPage(ctx, "conv_big", runtime.ItemPage{Limit: 1, After: "msg_1000"})
			return err
		}},
		{"before the middle", func() error {
			_, _, err := st.ConversationPage(ctx, "conv_big", runtime.ItemPage{Limit: 1, Desc: true, After: "msg_1000"})
			return err
		}},
		{"one item", func() error { _, err := st.ConversationItem(ctx, "conv_big", "msg_1000"); return err }},
		{"GET items?limit=1", func() error { return get("/v1/conversations/conv_big/items?limit=1") }},
		{"GET items?limit=1&order=asc&after", func() error {
			return get("/v1/conversations/conv_big/items?limit=1&order=asc&after=msg_1500")
		}},
		{"GET one item", func() error { return get("/v1/conversations/conv_big/items/msg_0007") }},
	} {
		read.n.Store(0)
		if err := tc.read(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := read.n.Load(); got > window {
			t.Errorf("%s read %d bytes from Redis, want at most %d", tc.name, got, window)
		}
	}
	read.n.Store(0)
	if _, err := st.ConversationItems(ctx, "conv_big"); err != nil {
		t.Fatal(err)
	}
	if got := read.n.Load(); got < n*1000 {
		t.Errorf("reading all of it read %d bytes, fewer than its %d items hold", got, n)
	}
}
