package runtime_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// convItems is a page of a conversation's items as the test reads it.
type convItems struct {
	Object  string `json:"object"`
	Data    []map[string]any
	FirstID string `json:"first_id"`
	LastID  string `json:"last_id"`
	HasMore bool   `json:"has_more"`
}

// ok decodes a 200 answer's body, or fails the test.
func ok[T any](t *testing.T) func(code int, b []byte) T {
	return func(code int, b []byte) T {
		t.Helper()
		var v T
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return v
	}
}

// allItems lists every item of conversation id, oldest first, a page of
// two at a time (after), and checks that every item has an id.
func allItems(t *testing.T, h *harness, id string) []map[string]any {
	t.Helper()
	var all []map[string]any
	after := ""
	for {
		page := ok[convItems](t)(h.get(t, "/conversations/"+id+"/items?order=asc&limit=2"+after))
		for _, it := range page.Data {
			if s, _ := it["id"].(string); s == "" {
				t.Errorf("an item without an id: %v", it)
			}
		}
		all = append(all, page.Data...)
		if !page.HasMore {
			return all
		}
		after = "&after=" + page.LastID
	}
}

// do sends a request of any method with a JSON body (none when nil).
func (h *harness) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// itemSummary is "type/role" of each item, for comparing orders.
func itemSummary(items []map[string]any) string {
	var parts []string
	for _, it := range items {
		s := fmt.Sprint(it["type"])
		if r, ok := it["role"]; ok {
			s += "/" + fmt.Sprint(r)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// testConversations runs the Conversations API through h: create, read,
// update, responses over HTTP and WebSocket that read a conversation and
// add to it (a suspended rollout with a tool call among them), items
// listed by page, added, read and deleted, the conversation deleted, and
// the errors for bad input.
func testConversations(t *testing.T, h *harness) {
	conv := ok[map[string]any](t)(h.post(t, "/conversations", map[string]any{
		"items":    []any{userMsg("My name is Ada and I maintain the parser.")},
		"metadata": map[string]string{"topic": "parser"},
	}))
	id, _ := conv["id"].(string)
	if !strings.HasPrefix(id, "conv_") || conv["object"] != "conversation" || conv["created_at"] == nil {
		t.Fatalf("created %v", conv)
	}
	got := ok[map[string]any](t)(h.get(t, "/conversations/"+id))
	if got["id"] != id || got["metadata"].(map[string]any)["topic"] != "parser" {
		t.Errorf("retrieved %v", got)
	}
	got = ok[map[string]any](t)(h.post(t, "/conversations/"+id, map[string]any{"metadata": map[string]string{"topic": "lexer"}}))
	if got["metadata"].(map[string]any)["topic"] != "lexer" {
		t.Errorf("updated %v", got)
	}

	// Over HTTP: the conversation is the context (more input tokens than the
	// same input alone), and the input and output join it.
	alone := ok[storedUsage](t)(h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "Say hi."}))
	resp := ok[storedUsage](t)(h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "Say hi.", "conversation": id}))
	if resp.Status != "completed" || resp.Conversation == nil || resp.Conversation.ID != id {
		t.Fatalf("response over HTTP: %+v", resp)
	}
	if resp.Usage.InputTokens <= alone.Usage.InputTokens {
		t.Errorf("input tokens with the conversation %d, alone %d: the conversation was not the context", resp.Usage.InputTokens, alone.Usage.InputTokens)
	}
	if s := itemSummary(allItems(t, h, id)); s != "message/user message/user message/assistant" {
		t.Errorf("after a response over HTTP: %s", s)
	}

	// Its response is continued by naming the conversation, not by
	// previous_response_id (its record holds what it added, not the
	// conversation before it), over HTTP and from a WebSocket's cache.
	if code, b := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "x", "previous_response_id": resp.ID}); code != 400 || errCode(t, b) != "invalid_value" {
		t.Errorf("previous_response_id of a conversation's response: %d %s", code, b)
	}
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "input": "cached", "conversation": id}))
	cached := respID(t, c.untilTerminal(t)[0])
	c.send(t, create(map[string]any{"model": "tether-scripted", "input": "x", "previous_response_id": cached}))
	c.wantError(t, "invalid_value")

	// Over a WebSocket, as {"id": …}; then a suspended rollout with a call.
	c.send(t, create(map[string]any{"model": "tether-scripted", "input": "And again.", "conversation": map[string]any{"id": id}}))
	if last := c.untilTerminal(t); eventType(t, last[len(last)-1]) != "response.completed" {
		t.Fatalf("over a WebSocket: %s", last[len(last)-1])
	}
	events, pauses := driveSuspended(t, c, map[string]any{"model": "tether-scripted", "conversation": id,
		"input": script([][]dcall{{{"lookup", `{"q":"parser"}`}}}),
		"tools": []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}})
	if pauses != 1 || eventType(t, events[len(events)-1]) != "response.completed" {
		t.Fatalf("suspended rollout: %d pauses, ended %s", pauses, events[len(events)-1])
	}
	items := allItems(t, h, id)
	want := "message/user message/user message/assistant message/user message/assistant message/user message/assistant message/user function_call function_call_output message/assistant"
	if s := itemSummary(items); s != want {
		t.Errorf("items:\n%s\nwant\n%s", s, want)
	}

	// Items: one read, one deleted (the answer is the conversation), two added.
	itemID := items[1]["id"].(string)
	one := ok[map[string]any](t)(h.get(t, "/conversations/"+id+"/items/"+itemID))
	if one["id"] != itemID || one["type"] != "message" {
		t.Errorf("item %s: %v", itemID, one)
	}
	deleted := ok[map[string]any](t)(h.do(t, "DELETE", "/conversations/"+id+"/items/"+itemID, nil))
	if deleted["id"] != id || deleted["object"] != "conversation" {
		t.Errorf("deleting an item answered %v", deleted)
	}
	if code, b := h.get(t, "/conversations/"+id+"/items/"+itemID); code != 404 || errCode(t, b) != "item_not_found" {
		t.Errorf("a deleted item: %d %s", code, b)
	}
	added := ok[convItems](t)(h.post(t, "/conversations/"+id+"/items", map[string]any{"items": []any{userMsg("one"), userMsg("two")}}))
	if len(added.Data) != 2 || added.FirstID == "" || added.LastID == "" || added.HasMore {
		t.Errorf("added %+v", added)
	}
	if n := len(allItems(t, h, id)); n != len(items)-1+2 {
		t.Errorf("%d items after deleting one and adding two, want %d", n, len(items)+1)
	}
	desc := ok[convItems](t)(h.get(t, "/conversations/"+id+"/items?limit=1"))
	if len(desc.Data) != 1 || desc.Data[0]["id"] != added.LastID || !desc.HasMore {
		t.Errorf("newest first by default: %+v, want %s", desc, added.LastID)
	}

	// Bad input, each with its code and param.
	tooMany := make([]any, protocol.MaxConversationItems+1)
	for i := range tooMany {
		tooMany[i] = userMsg("x")
	}
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		code, param  string
	}{
		{"POST", "/responses", map[string]any{"model": "tether-scripted", "input": "x", "conversation": id, "previous_response_id": "resp_1"}, 400, "mutually_exclusive_parameters", "conversation"},
		{"POST", "/responses", map[string]any{"model": "tether-scripted", "input": "x", "conversation": "conv_nope"}, 404, "conversation_not_found", "conversation"},
		{"POST", "/responses", map[string]any{"model": "tether-scripted", "input": "x", "conversation": map[string]any{}}, 400, "missing_required_parameter", "conversation.id"},
		{"POST", "/responses", map[string]any{"model": "tether-scripted", "input": "x", "conversation": 7}, 400, "invalid_type", "conversation"},
		{"POST", "/conversations", map[string]any{"items": tooMany}, 400, "invalid_value", "items"},
		{"POST", "/conversations", map[string]any{"items": []any{map[string]any{"type": "item_reference", "id": "msg_1"}}}, 400, "invalid_value", "items"},
		{"POST", "/conversations", map[string]any{"items": []any{map[string]any{"type": "nope"}}}, 400, "invalid_value", "items[0].type"},
		{"POST", "/conversations/" + id + "/items", map[string]any{"items": []any{}}, 400, "missing_required_parameter", "items"},
		{"POST", "/conversations/" + id, map[string]any{}, 400, "missing_required_parameter", "metadata"},
		{"GET", "/conversations/conv_nope/items", nil, 404, "conversation_not_found", "conversation_id"},
		{"DELETE", "/conversations/" + id + "/items/msg_nope", nil, 404, "item_not_found", "item_id"},
	} {
		code, b := h.do(t, tc.method, tc.path, tc.body)
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		if code != tc.status || e.Error.Code != tc.code || e.Error.Param != tc.param {
			t.Errorf("%s %s %v: %d %s, want %d %s (param %s)", tc.method, tc.path, tc.body, code, b, tc.status, tc.code, tc.param)
		}
	}

	gone := ok[map[string]any](t)(h.do(t, "DELETE", "/conversations/"+id, nil))
	if gone["id"] != id || gone["object"] != "conversation.deleted" || gone["deleted"] != true {
		t.Errorf("deleted: %v", gone)
	}
	if code, b := h.get(t, "/conversations/"+id); code != 404 || errCode(t, b) != "conversation_not_found" {
		t.Errorf("a deleted conversation: %d %s", code, b)
	}
}

// TestItemPagesUnknownAfter: a page of a conversation's items, or of a
// response's input items, after an item the list does not hold (deleted
// since the page before, or never in it) is refused with 400 invalid_value,
// param "after". (It once answered the first page again, so that a client
// paging on until has_more is false, whose cursor was deleted, looped.)
func TestItemPagesUnknownAfter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	wantAfterError := func(path string) {
		t.Helper()
		code, b := h.get(t, path)
		var e struct {
			Error struct{ Type, Code, Param string } `json:"error"`
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_value" || e.Error.Param != "after" {
			t.Errorf("GET %s: %d %s, want 400 invalid_value (param after)", path, code, b)
		}
	}

	conv := ok[map[string]any](t)(h.post(t, "/conversations", map[string]any{"items": []any{userMsg("a"), userMsg("b"), userMsg("c"), userMsg("d")}}))
	items := "/conversations/" + conv["id"].(string) + "/items"
	first := ok[convItems](t)(h.get(t, items+"?order=asc&limit=2"))
	if !first.HasMore {
		t.Fatalf("the first page of 4 items, 2 a page: %+v", first)
	}
	second := ok[convItems](t)(h.get(t, items+"?order=asc&limit=2&after="+first.LastID))
	if len(second.Data) != 2 || second.Data[0]["id"] == first.Data[0]["id"] || second.HasMore {
		t.Errorf("the page after %s: %+v", first.LastID, second)
	}
	ok[map[string]any](t)(h.do(t, "DELETE", items+"/"+first.LastID, nil))
	wantAfterError(items + "?order=asc&limit=2&after=" + first.LastID)
	wantAfterError(items + "?after=msg_never")

	resp := ok[map[string]any](t)(h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": []any{userMsg("a"), userMsg("b")}}))
	inputs := "/responses/" + resp["id"].(string) + "/input_items"
	page := ok[convItems](t)(h.get(t, inputs+"?limit=1"))
	if got := ok[convItems](t)(h.get(t, inputs+"?limit=1&after="+page.LastID)); len(got.Data) != 1 || got.HasMore {
		t.Errorf("the input items after %s: %+v", page.LastID, got)
	}
	wantAfterError(inputs + "?after=msg_never")
}

// storedUsage is what these tests read of a response object.
type storedUsage struct {
	ID           string               `json:"id"`
	Status       string               `json:"status"`
	Conversation *struct{ ID string } `json:"conversation"`
	Usage        struct {
		InputTokens int `json:"input_tokens"`
	} `json:"usage"`
}

func TestConversations(t *testing.T) {
	t.Parallel()
	testConversations(t, newHarness(t, runtime.Options{}))
}

// TestConversationsRedis: the same, kept in Redis (redisstore.Store is a
// runtime.ConversationStore), and a second server on that Redis reads what
// the first wrote.
func TestConversationsRedis(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := redisHarness(t, rd.URL(), runtime.Options{})
	testConversations(t, h)

	id := ok[map[string]any](t)(h.post(t, "/conversations", map[string]any{"items": []any{userMsg("kept in Redis")}}))["id"].(string)
	other := redisHarness(t, rd.URL(), runtime.Options{})
	if s := itemSummary(allItems(t, other, id)); s != "message/user" {
		t.Errorf("another server reads %q", s)
	}
	resp := ok[storedUsage](t)(other.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "Go on.", "conversation": id}))
	if resp.Status != "completed" {
		t.Fatalf("on the other server: %+v", resp)
	}
	if s := itemSummary(allItems(t, h, id)); s != "message/user message/user message/assistant" {
		t.Errorf("the first server reads %q after the other's response", s)
	}
}

// TestConversationsTenants: a conversation is its tenant's: another
// tenant's reads, writes, deletes and creates that name it answer as for an
// unknown id.
func TestConversationsTenants(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := newHarness(t, runtime.Options{Keys: keys})
	code, body := authed(t, h, "POST", "/v1/conversations", "Bearer sk-alice", `{"items":[{"role":"user","content":"alice's secret plan"}]}`)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var c struct{ ID string }
	json.Unmarshal([]byte(body), &c)
	unknown := "conv_000000000000000000000000000000000000000000000000"
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/conversations/%s", ""},
		{"GET", "/v1/conversations/%s/items", ""},
		{"POST", "/v1/conversations/%s", `{"metadata":{}}`},
		{"POST", "/v1/conversations/%s/items", `{"items":[{"role":"user","content":"bob was here"}]}`},
		{"POST", "/v1/responses", `{"model":"tether-scripted","input":"x","conversation":"%s"}`},
		{"DELETE", "/v1/conversations/%s", ""},
	} {
		at := func(id string) (int, string) {
			return authed(t, h, req.method, strings.Replace(req.path, "%s", id, 1), "Bearer sk-bob", strings.Replace(req.body, "%s", id, 1))
		}
		c1, b1 := at(c.ID)
		c2, b2 := at(unknown)
		if c1 != c2 || strings.ReplaceAll(b1, c.ID, "ID") != strings.ReplaceAll(b2, unknown, "ID") || strings.Contains(b1, "secret") {
			t.Errorf("%s %s: another tenant's %d %s, an unknown %d %s", req.method, req.path, c1, b1, c2, b2)
		}
	}
	code, body = authed(t, h, "GET", "/v1/conversations/"+c.ID+"/items", "Bearer sk-alice", "")
	if code != 200 || !strings.Contains(body, "secret plan") || strings.Contains(body, "bob was here") {
		t.Errorf("the owner's items after another tenant's tries: %d %s", code, body)
	}
}

// TestConversationsSDK: the Conversations API through the official Go
// SDK's typed services: create with an item and metadata, a response.create
// naming the conversation (responses.ResponseConversationParam), the items
// listed with auto-paging and decoded as the SDK's item union, one item
// retrieved and deleted, the conversation deleted.
func TestConversationsSDK(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Items:    []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("My name is Ada.", responses.EasyInputMessageRoleUser)},
		Metadata: shared.Metadata{"topic": "parser"},
	})
	if md, _ := conv.Metadata.(map[string]any); err != nil || !strings.HasPrefix(conv.ID, "conv_") || md["topic"] != "parser" {
		t.Fatalf("created %+v, %v", conv, err)
	}
	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel,
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi.")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: conv.ID}}})
	if err != nil || resp.Status != "completed" || resp.Conversation.ID != conv.ID {
		t.Fatalf("a response in the conversation: %+v, %v", resp, err)
	}
	var types []string
	var first string
	iter := client.Conversations.Items.ListAutoPaging(ctx, conv.ID, conversations.ItemListParams{Limit: openai.Int(1), Order: conversations.ItemListParamsOrderAsc})
	for iter.Next() {
		it := iter.Current()
		if first == "" {
			first = it.ID
		}
		types = append(types, it.Type+"/"+string(it.Role))
	}
	if err := iter.Err(); err != nil || strings.Join(types, " ") != "message/user message/user message/assistant" {
		t.Fatalf("items %q, %v", types, err)
	}
	got, err := client.Conversations.Items.Get(ctx, conv.ID, first, conversations.ItemGetParams{})
	if err != nil || got.ID != first {
		t.Fatalf("item %s: %+v, %v", first, got, err)
	}
	if after, err := client.Conversations.Items.Delete(ctx, conv.ID, first); err != nil || after.ID != conv.ID {
		t.Fatalf("deleting an item: %+v, %v", after, err)
	}
	if del, err := client.Conversations.Delete(ctx, conv.ID); err != nil || !del.Deleted {
		t.Fatalf("deleting: %+v, %v", del, err)
	}
	var apiErr *openai.Error
	if _, err := client.Conversations.Get(ctx, conv.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "conversation_not_found" {
		t.Errorf("a deleted conversation: %v", err)
	}
}
