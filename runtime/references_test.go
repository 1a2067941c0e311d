package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestItemReferenceBounds: a small request naming one stored 108 KB
// message 2,000 times (216 MB once expanded) is refused before anything
// renders, request_too_large on the reference that passed --max-frame; one
// naming a small item 4,097 times, too_many_item_references, over HTTP
// and in a response.append; 40 references to it are served.
func TestItemReferenceBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	// stored keeps a user message of text under id.
	stored := func(id, text string) string {
		t.Helper()
		code, b := h.post(t, "/responses", map[string]any{"model": "tether-scripted",
			"input": []any{map[string]any{"type": "message", "role": "user", "id": id, "content": text}}})
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		return id
	}
	big, small := stored("msg_big", "Remember: "+prose(108_000)), stored("msg_small", "Remember: Lex.")
	refsTo := func(id string, n int) []any {
		refs := make([]any, n)
		for i := range refs {
			refs[i] = map[string]any{"type": "item_reference", "id": id}
		}
		return refs
	}
	wantError := func(t *testing.T, code int, b []byte, status int, errCode, param string) {
		t.Helper()
		var body struct{ Error struct{ Code, Param string } }
		json.Unmarshal(b, &body)
		if code != status || body.Error.Code != errCode || body.Error.Param != param {
			t.Errorf("%d %s: want %d %s on %s", code, b, status, errCode, param)
		}
	}
	code, b := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": refsTo(big, 2000)})
	// 16 MiB (the default --max-frame) holds 155 of the message's encodings.
	wantError(t, code, b, 413, protocol.CodeRequestTooLarge, protocol.IndexParam("input", 155))
	code, b = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": refsTo(small, 4097)})
	wantError(t, code, b, 400, protocol.CodeTooManyReferences, protocol.IndexParam("input", 4096))
	code, b = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": refsTo(small, 40)})
	var served struct {
		Status string
		Usage  struct {
			InputTokens int `json:"input_tokens"`
		}
	}
	if json.Unmarshal(b, &served); code != 200 || served.Status != "completed" || served.Usage.InputTokens < 40*5 {
		t.Fatalf("40 references: %d %.300s", code, b)
	}

	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "suspend": true, "tools": lookupTools, "input": "Look it up.\ncall: lookup {\"q\":\"x\"}"}))
	pause := last(c.next(t))
	id := respID(t, pause)
	c.send(t, appendEv(id, "", append(refsTo(small, 4097), outputsFor(t, pause)...)...))
	c.wantError(t, protocol.CodeTooManyReferences)
	c.send(t, appendEv(id, "", append(refsTo(big, 200), outputsFor(t, pause)...)...))
	c.wantError(t, protocol.CodeRequestTooLarge)
	c.send(t, appendEv(id, "", outputsFor(t, pause)...))
	if typ := eventType(t, last(c.untilTerminal(t))); typ != "response.completed" {
		t.Fatalf("after the refused appends: %s", typ)
	}
}
