package runtime_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// TestSuspendedInputItems: the tool outputs and steering messages appended
// to a stored suspended rollout are inputs of that response, as OpenAI
// lists a response's inputs: input_items has the create's input, then each
// appended item in the order it joined the context (a step's outputs in
// output order, then the messages steered in with them), with the ids the
// server gave them, newest first by default and paged by after. A fork
// lists the original's inputs up to the pause, then its own.
func TestSuspendedInputItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	c := h.dial(t, nil)
	l := newLanes(c)
	steps := [][]dcall{{{"read_file", `{"path":"a.go"}`}}, {{"grep", `{"pattern":"Parse"}`}, {"list_dir", `{"path":"."}`}}}
	task := script(steps)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": true, "suspend": true, "stream_id": "orig",
		"input": []any{map[string]any{"type": "message", "role": "developer", "content": "Be brief."}, userMsg(task)}}))

	pause := last(l.next(t, "orig"))
	id := respID(t, pause)
	first := outputsFor(t, pause)
	c.send(t, appendEv(id, "orig", append(first, userMsg("Look at the tests too."))...))
	pause = last(l.next(t, "orig"))
	second := outputsFor(t, pause)
	if len(first) != 1 || len(second) != 2 {
		t.Fatalf("paused on %d then %d calls, want 1 then 2", len(first), len(second))
	}

	// A fork at the second pause, answered its own way.
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"alt"}})
	forkPause := last(l.next(t, "alt"))
	forkID := respID(t, forkPause)
	var variant []any
	for _, o := range second {
		variant = append(variant, fco(o.(map[string]any)["call_id"].(string), "variant"))
	}
	c.send(t, appendEv(forkID, "alt", variant...))
	if end := last(l.next(t, "alt")); eventType(t, end) != "response.completed" {
		t.Fatalf("the fork ended with %s", end)
	}

	c.send(t, appendEv(id, "orig", second...))
	end := last(l.next(t, "orig"))
	if eventType(t, end) != "response.completed" {
		t.Fatalf("ended with %s", end)
	}
	for _, raw := range decodeEv(t, end).Response.Output {
		if strings.Contains(string(raw), `"function_call_output"`) || strings.Contains(string(raw), "Look at the tests too.") {
			t.Fatalf("an appended item in the output: %s", raw)
		}
	}

	want := []string{"message:developer:Be brief.", "message:user:" + task}
	for _, o := range first {
		want = append(want, outputKey(o))
	}
	want = append(want, "message:user:Look at the tests too.")
	forkWant := slices.Clone(want)
	for _, o := range second {
		want = append(want, outputKey(o))
	}
	for _, o := range variant {
		forkWant = append(forkWant, outputKey(o))
	}

	asc := inputItems(t, h, id, "?order=asc&limit=100")
	if got := itemKeysOf(t, asc); !slices.Equal(got, want) {
		t.Fatalf("input_items, oldest first:\n got %q\nwant %q", got, want)
	}
	var fcoIDs []string
	for _, it := range asc {
		if it["type"] == "function_call_output" {
			id, _ := it["id"].(string)
			if !strings.HasPrefix(id, "fco_") || slices.Contains(fcoIDs, id) {
				t.Fatalf("an appended output's id %q: want a distinct fco_ id", id)
			}
			fcoIDs = append(fcoIDs, id)
		}
	}
	desc := inputItems(t, h, id, "")
	slices.Reverse(want)
	if got := itemKeysOf(t, desc); !slices.Equal(got, want) {
		t.Fatalf("input_items, newest first (the default):\n got %q\nwant %q", got, want)
	}
	status, body := h.get(t, "/responses/"+id+"/input_items?order=asc&limit=2&after="+fcoIDs[0])
	var page struct {
		Data    []map[string]any `json:"data"`
		HasMore bool             `json:"has_more"`
		LastID  string           `json:"last_id"`
	}
	if err := json.Unmarshal(body, &page); err != nil || status != 200 {
		t.Fatalf("a page after %s: %d %s", fcoIDs[0], status, body)
	}
	if got := itemKeysOf(t, page.Data); !page.HasMore || page.LastID != fcoIDs[1] ||
		!slices.Equal(got, []string{"message:user:Look at the tests too.", outputKey(second[0])}) {
		t.Fatalf("the page after %s: %s", fcoIDs[0], body)
	}

	if got := itemKeysOf(t, inputItems(t, h, forkID, "?order=asc")); !slices.Equal(got, forkWant) {
		t.Fatalf("the fork's input_items:\n got %q\nwant %q", got, forkWant)
	}
}

// inputItems gets a stored response's input_items with query.
func inputItems(t *testing.T, h *harness, id, query string) []map[string]any {
	t.Helper()
	status, body := h.get(t, "/responses/"+id+"/input_items"+query)
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || status != 200 {
		t.Fatalf("input_items of %s: %d %s", id, status, body)
	}
	return list.Data
}

// outputKey is itemKeysOf's key of a function_call_output sent as o.
func outputKey(o any) string {
	m := o.(map[string]any)
	return "function_call_output:" + m["call_id"].(string) + ":" + m["output"].(string)
}

// itemKeysOf names each input item by what the test checks of it: a
// message's role and text, an output's call_id and text.
func itemKeysOf(t *testing.T, items []map[string]any) []string {
	t.Helper()
	var keys []string
	for _, it := range items {
		switch it["type"] {
		case "message":
			keys = append(keys, "message:"+it["role"].(string)+":"+textOf(it["content"]))
		case "function_call_output":
			keys = append(keys, "function_call_output:"+it["call_id"].(string)+":"+textOf(it["output"]))
		default:
			t.Fatalf("an input item of type %v: %v", it["type"], it)
		}
	}
	return keys
}

// textOf is the text of a content or output: a string, or its parts' text.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	for _, p := range v.([]any) {
		b.WriteString(p.(map[string]any)["text"].(string))
	}
	return b.String()
}

// TestAppendedOutputWithCallsID: an output the client appends joins the
// context whatever id it gives itself, even its call item's.
func TestAppendedOutputWithCallsID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "store": true,
		"input": []any{userMsg(script([][]dcall{{{"read_file", `{"path":"a.go"}`}}}))}}))
	evs := c.next(t)
	done := decodeEv(t, evs[len(evs)-1])
	var call struct {
		ID     string `json:"id"`
		CallID string `json:"call_id"`
	}
	if err := json.Unmarshal(done.Response.Output[0], &call); err != nil || call.ID == "" {
		t.Fatalf("the pause's call: %s", done.Response.Output[0])
	}
	out := fco(call.CallID, "package a // the file")
	out["id"] = call.ID
	c.send(t, appendEv(done.Response.ID, "", out))
	evs = c.next(t)
	end := decodeEv(t, evs[len(evs)-1])
	if end.Type != "response.completed" || !strings.Contains(string(end.Response.Output[len(end.Response.Output)-1]), "package a // the file") {
		t.Fatalf("the answer did not read the output: %s", evs[len(evs)-1])
	}
	// And input_items lists it after the task, though the call has its id.
	if got := itemKeysOf(t, inputItems(t, h, done.Response.ID, "?order=asc")); len(got) != 2 || got[1] != outputKey(out) {
		t.Fatalf("input_items: %q, want the task then %s", got, outputKey(out))
	}
}
