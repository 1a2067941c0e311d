package runtime_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// TestConversationItemPages: a conversation's items listed through the
// API, in each order, by several limits, after each of them, once some
// were deleted, are the same windows in memory (paged by the server from all
// of them) and in Redis (read a page alone, ConversationPager); so is
// each item read alone, and so is the refusal of an after naming an item
// it does not hold (400 invalid_value, param after).
func TestConversationItemPages(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	for name, h := range map[string]*harness{"memory": newHarness(t, runtime.Options{}), "redis": redisHarness(t, rd.URL(), runtime.Options{})} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			said := func(i int) map[string]any {
				m := userMsg(fmt.Sprintf("item %d", i))
				m["id"] = fmt.Sprintf("msg_%02d", i)
				return m
			}
			id := ok[map[string]any](t)(h.post(t, "/conversations", map[string]any{"items": []any{said(0), said(1), said(2)}}))["id"].(string)
			var more []any
			for i := 3; i < 12; i++ {
				more = append(more, said(i))
			}
			ok[convItems](t)(h.post(t, "/conversations/"+id+"/items", map[string]any{"items": more}))
			var model []string
			for i := range 12 {
				model = append(model, fmt.Sprintf("msg_%02d", i))
			}
			for _, gone := range []string{"msg_00", "msg_05", "msg_11"} {
				ok[map[string]any](t)(h.do(t, "DELETE", "/conversations/"+id+"/items/"+gone, nil))
				model = slices.DeleteFunc(model, func(s string) bool { return s == gone })
				if code, b := h.get(t, "/conversations/"+id+"/items/"+gone); code != 404 || errCode(t, b) != "item_not_found" {
					t.Errorf("deleted %s reads %d %s", gone, code, b)
				}
			}
			for _, want := range model {
				if it := ok[map[string]any](t)(h.get(t, "/conversations/"+id+"/items/"+want)); it["id"] != want {
					t.Errorf("item %s reads %v", want, it)
				}
			}
			for _, order := range []string{"", "asc", "desc"} {
				list := slices.Clone(model)
				if order != "asc" {
					slices.Reverse(list)
				}
				q := fmt.Sprintf("?order=%s&after=msg_00", order)
				if code, b := h.get(t, "/conversations/"+id+"/items"+q); code != 400 || errCode(t, b) != "invalid_value" || !strings.Contains(string(b), `"param":"after"`) {
					t.Errorf("%s (deleted): %d %s", q, code, b)
				}
				for _, after := range append([]string{""}, model...) {
					from := list
					if i := slices.Index(list, after); i >= 0 {
						from = list[i+1:]
					}
					for _, limit := range []int{1, 3, 20} {
						want := from[:min(limit, len(from))]
						q := fmt.Sprintf("?order=%s&limit=%d&after=%s", order, limit, after)
						page := ok[convItems](t)(h.get(t, "/conversations/"+id+"/items"+q))
						var got []string
						for _, it := range page.Data {
							got = append(got, it["id"].(string))
						}
						wantFirst, wantLast := "", ""
						if len(want) > 0 {
							wantFirst, wantLast = want[0], want[len(want)-1]
						}
						if !slices.Equal(got, want) || page.HasMore != (len(from) > limit) || page.FirstID != wantFirst || page.LastID != wantLast || page.Object != "list" {
							t.Errorf("%s: %v has_more %v first %s last %s, want %v has_more %v", q, got, page.HasMore, page.FirstID, page.LastID, want, len(from) > limit)
						}
					}
				}
			}
		})
	}
}

// TestConversationBoundsRedis: a conversation kept in Redis is refused
// past its bound (redisstore.Options.MaxConversationBytes) with 413
// request_too_large, an addition through the API and a response's at its
// end alike (the response fails, and adds nothing), and a tenant's
// conversations past theirs (MaxTenantConversationBytes) with 429
// tenant_store_limit, while another tenant's go on.
func TestConversationBoundsRedis(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	const bound = 3000
	st, err := redisstore.New(rd.URL(), redisstore.Options{Timeout: time.Second, MaxConversationBytes: bound, MaxTenantConversationBytes: bound * 3 / 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Store: st, Keys: keys})
	as := func(key, method, path, body string) (int, string) {
		t.Helper()
		return authed(t, h, method, "/v1"+path, "Bearer "+key, body)
	}
	create := func(key string) string {
		t.Helper()
		code, b := as(key, "POST", "/conversations", `{}`)
		var c struct{ ID string }
		if json.Unmarshal([]byte(b), &c); code != 200 || c.ID == "" {
			t.Fatalf("create: %d %s", code, b)
		}
		return c.ID
	}
	// fill adds what a response's input would until the conversation is
	// refused, and returns how many it holds and the refusal's code.
	fill := func(key, id string) (int, string) {
		t.Helper()
		for n := 0; n < 100; n++ {
			code, b := as(key, "POST", "/conversations/"+id+"/items", `{"items":[{"role":"user","content":"Say hi."}]}`)
			if code != 200 {
				var e struct{ Error struct{ Code string } }
				json.Unmarshal([]byte(b), &e)
				return n, fmt.Sprintf("%d %s", code, e.Error.Code)
			}
		}
		t.Fatalf("%s took 100 additions", id)
		return 0, ""
	}
	count := func(key, id string) int {
		t.Helper()
		code, b := as(key, "GET", "/conversations/"+id+"/items?limit=100", "")
		var page convItems
		if json.Unmarshal([]byte(b), &page); code != 200 {
			t.Fatalf("list: %d %s", code, b)
		}
		return len(page.Data)
	}

	a := create("sk-alice")
	n, refused := fill("sk-alice", a)
	if refused != "413 request_too_large" || n < 10 {
		t.Fatalf("a conversation filled: refused %q after %d additions, want 413 request_too_large", refused, n)
	}
	code, b := as("sk-alice", "POST", "/responses", `{"model":"tether-scripted","input":"Say hi.","conversation":"`+a+`"}`)
	var resp struct {
		Status string
		Error  struct{ Code string }
	}
	json.Unmarshal([]byte(b), &resp)
	if code != 200 || resp.Status != "failed" || resp.Error.Code != "request_too_large" {
		t.Errorf("a response on the full conversation: %d %s", code, b)
	}
	if got := count("sk-alice", a); got != n {
		t.Errorf("the full conversation holds %d items after its response, want %d", got, n)
	}

	// Alice's second conversation meets her tenant's bound first.
	if _, refused := fill("sk-alice", create("sk-alice")); refused != "429 tenant_store_limit" {
		t.Errorf("a tenant's conversations filled: refused %q, want 429 tenant_store_limit", refused)
	}
	if code, b := as("sk-alice", "POST", "/conversations", `{"items":[{"role":"user","content":"`+strings.Repeat("x", 1000)+`"}]}`); code != 429 {
		t.Errorf("a conversation created past the tenant's bound: %d %s", code, b)
	}
	// Bob's are his own.
	bob := create("sk-bob")
	if code, b := as("sk-bob", "POST", "/conversations/"+bob+"/items", `{"items":[{"role":"user","content":"Say hi."}]}`); code != 200 {
		t.Errorf("another tenant's addition: %d %s", code, b)
	}
	// Deleting gives Alice room again.
	if code, b := as("sk-alice", "DELETE", "/conversations/"+a, ""); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, b := as("sk-alice", "POST", "/conversations", `{}`); code != 200 {
		t.Errorf("a conversation created once one was deleted: %d %s", code, b)
	}
}
