package runtime_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestInputTokens: POST /v1/responses/input_tokens, through the official Go
// SDK's Responses.InputTokens.Count, counts what the same request's
// response reads (its usage.input_tokens, one step), with or without
// previous_response_id, and with no model; a bad request is refused as a
// create is.
func TestInputTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)

	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Store: openai.Bool(true),
		Instructions: openai.String("Answer briefly."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello to the parser.")}})
	if err != nil {
		t.Fatal(err)
	}
	count, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: openai.String(sdkModel),
		Instructions: openai.String("Answer briefly."),
		Input:        responses.InputTokenCountParamsInputUnion{OfString: openai.String("Say hello to the parser.")}})
	if err != nil {
		t.Fatal(err)
	}
	if count.Object != "response.input_tokens" || count.InputTokens != first.Usage.InputTokens || count.InputTokens == 0 {
		t.Errorf("counted %+v, want the response's %d input tokens", count, first.Usage.InputTokens)
	}

	next := responses.ResponseNewParams{Model: sdkModel, PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And to the lexer.")}}
	chained, err := client.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	count, err = client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{PreviousResponseID: openai.String(first.ID),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("And to the lexer.")}})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens != chained.Usage.InputTokens {
		t.Errorf("counted %d after previous_response_id, want the chained response's %d", count.InputTokens, chained.Usage.InputTokens)
	}

	for _, tc := range []struct {
		params responses.InputTokenCountParams
		status int
		code   string
	}{
		{responses.InputTokenCountParams{Model: openai.String("nope"), Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("x")}}, 404, "model_not_found"},
		{responses.InputTokenCountParams{PreviousResponseID: openai.String("resp_nope"), Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("x")}}, 400, "previous_response_not_found"},
	} {
		_, err := client.Responses.InputTokens.Count(ctx, tc.params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Code != tc.code {
			t.Errorf("%+v: %v, want %d %s", tc.params, err, tc.status, tc.code)
		}
	}
}

// TestRoutesJSON: every request no route takes is answered with the API's
// JSON error body: an unknown path 404 ("Invalid URL", as OpenAI), a
// method a path does not take 405 with Allow; GET /v1/models/{id} is the
// model, or model_not_found.
func TestRoutesJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
		message      string
	}{
		{"GET", "/v1/nope", 404, "", "", "Invalid URL (GET /v1/nope)"},
		{"POST", "/v2/responses", 404, "", "", "Invalid URL (POST /v2/responses)"},
		{"DELETE", "/v1/models", 405, "", "GET, HEAD", "Method DELETE is not allowed on /v1/models"},
		{"PUT", "/v1/responses/resp_1", 405, "", "DELETE, GET, HEAD", "Method PUT is not allowed"},
		{"GET", "/v1/responses/input_tokens", 404, "response_not_found", "", ""},
		{"GET", "/v1/models/nope", 404, "model_not_found", "", ""},
		{"GET", "/v1/models/tether-scripted", 200, "", "", ""},
	} {
		req, _ := http.NewRequest(tc.method, strings.TrimSuffix(h.base, "/v1")+tc.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %s, want %d JSON", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
			continue
		}
		if tc.status == 200 {
			var m struct{ ID, Object string }
			if json.Unmarshal(body, &m) != nil || m.ID != "tether-scripted" || m.Object != "model" {
				t.Errorf("%s %s: %s", tc.method, tc.path, body)
			}
			continue
		}
		var e struct {
			Error struct {
				Type    string  `json:"type"`
				Code    *string `json:"code"`
				Message string  `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "invalid_request_error" ||
			(tc.code == "") != (e.Error.Code == nil) || tc.code != "" && *e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.message) {
			t.Errorf("%s %s: %s, want code %q and a message with %q", tc.method, tc.path, body, tc.code, tc.message)
		}
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

// TestItemReferenceUntyped: an input item that is only an id refers to an
// earlier item of the conversation, as the API's item_reference with its
// type left out: a chained create that names its parent's message by id
// reads it again; one that names an id the conversation does not hold is
// refused, naming the item.
func TestItemReferenceUntyped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Store: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}})
	if err != nil {
		t.Fatal(err)
	}
	msgID := first.Output[len(first.Output)-1].ID
	post := func(body string) (int, string) {
		resp, err := http.Post(h.base+"/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := post(`{"model":"tether-scripted","previous_response_id":"` + first.ID + `","input":[{"id":"` + msgID + `"},{"role":"user","content":"Again."}]}`)
	if status != 200 || !strings.Contains(body, `"status":"completed"`) {
		t.Fatalf("a reference by id alone: %d %s", status, body)
	}
	status, body = post(`{"model":"tether-scripted","previous_response_id":"` + first.ID + `","input":[{"id":"msg_nope"}]}`)
	if status != 404 || !strings.Contains(body, `"param":"input"`) || !strings.Contains(body, "Items are not persisted") {
		t.Fatalf("a reference to an unknown id: %d %s, want OpenAI's 404 on input", status, body)
	}
}

// TestStoredItemReference: an item_reference names any item a stored
// response of the tenant holds, without previous_response_id, in the
// memory store and in Redis: the create reads it (its prompt grows by it).
// (A response that stores a reference holds the item too.) Once the
// response is deleted, for another tenant, for a response made with
// store: false, and for an id nothing holds, the reference is
// answered as OpenAI answers it (404 on input), over HTTP and over a
// WebSocket, whose connection stays usable.
func TestStoredItemReference(t *testing.T) {
	t.Parallel()
	wsCreate := create
	for _, where := range []string{"memory", "redis"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			h := twoTenants(t, where)
			do := func(method, path, key, body string) (int, string) {
				return authed(t, h, method, path, "Bearer "+key, body)
			}
			create := func(key, body string) (int, map[string]any) {
				code, b := do("POST", "/v1/responses", key, body)
				var m map[string]any
				json.Unmarshal([]byte(b), &m)
				return code, m
			}
			lastItem := func(m map[string]any) string {
				out := m["output"].([]any)
				return out[len(out)-1].(map[string]any)["id"].(string)
			}
			inputTokens := func(m map[string]any) float64 {
				return m["usage"].(map[string]any)["input_tokens"].(float64)
			}
			_, stored := create("sk-alice", `{"model":"tether-scripted","input":"Remember the parser's name: Lex."}`)
			_, unstored := create("sk-alice", `{"model":"tether-scripted","store":false,"input":"Forget this."}`)
			msg, gone := lastItem(stored), lastItem(unstored)

			_, plain := create("sk-alice", `{"model":"tether-scripted","input":"What was it?"}`)
			for _, ref := range []string{`{"type":"item_reference","id":"` + msg + `"}`, `{"id":"` + msg + `"}`} {
				// store: false, so that the stored response stays the one that holds the item
				code, got := create("sk-alice", `{"model":"tether-scripted","store":false,"input":[`+ref+`,{"role":"user","content":"What was it?"}]}`)
				if code != 200 || inputTokens(got) <= inputTokens(plain) {
					t.Fatalf("%s: %d %v, want it read (more than %v input tokens)", ref, code, got, inputTokens(plain))
				}
			}
			// A stored response's input_items lists the item a reference
			// named, as the API's item union has it, not the reference.
			_, withRef := create("sk-alice", `{"model":"tether-scripted","input":[{"type":"item_reference","id":"`+msg+`"},{"role":"user","content":"What was it?"}]}`)
			if code, b := do("GET", "/v1/responses/"+withRef["id"].(string)+"/input_items?order=asc", "sk-alice", ""); code != 200 ||
				strings.Contains(b, "item_reference") || !strings.Contains(b, `"id":"`+msg+`","type":"message"`) && !strings.Contains(b, `"type":"message","id":"`+msg+`"`) {
				t.Errorf("input_items of a response whose input referenced %s: %d %s", msg, code, b)
			}
			if code, b := do("DELETE", "/v1/responses/"+withRef["id"].(string), "sk-alice", ""); code != 200 { // it holds the item too
				t.Fatalf("delete: %d %s", code, b)
			}
			// A stored call named by reference, then its output: the output
			// answers the call the reference stands for (the AI SDK sends a
			// shell call so within one turn's steps).
			_, called := create("sk-alice", `{"model":"tether-scripted","tools":[{"type":"shell"}],"input":"call: shell {\"commands\":[\"ls\"]}"}`)
			sh := called["output"].([]any)[0].(map[string]any)
			code, got := create("sk-alice", `{"model":"tether-scripted","store":false,"tools":[{"type":"shell"}],"input":[{"type":"item_reference","id":"`+sh["id"].(string)+`"},`+
				`{"type":"shell_call_output","call_id":"`+sh["call_id"].(string)+`","output":[{"stdout":"a.go\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]}]}`)
			if code != 200 || got["status"] != "completed" {
				t.Fatalf("a referenced call's output: %d %v", code, got)
			}
			refused := func(what, key, id string) {
				t.Helper()
				code, b := do("POST", "/v1/responses", key, `{"model":"tether-scripted","input":[{"type":"item_reference","id":"`+id+`"}]}`)
				if code != 404 || !strings.Contains(b, `"param":"input"`) || !strings.Contains(b, "Item with id '"+id+"' not found") {
					t.Errorf("%s: %d %s, want 404 on input", what, code, b)
				}
			}
			refused("another tenant's item", "sk-bob", msg)
			refused("an item of a store: false response", "sk-alice", gone)
			refused("an unknown item", "sk-alice", "msg_nope")
			if code, b := do("DELETE", "/v1/responses/"+stored["id"].(string), "sk-alice", ""); code != 200 {
				t.Fatalf("delete: %d %s", code, b)
			}
			refused("an item of a deleted response", "sk-alice", msg)

			c := h.dial(t, http.Header{"Authorization": {"Bearer sk-alice"}})
			c.send(t, wsCreate(map[string]any{"model": "tether-scripted", "store": false, "input": []any{map[string]any{"id": msg}}}))
			if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error == nil || e.Error.Code != "" {
				t.Fatalf("a WebSocket create with a deleted response's item: %+v, want an error", e)
			}
			c.send(t, wsCreate(map[string]any{"model": "tether-scripted", "store": false, "input": "Still here?"}))
			if end := last(c.untilTerminal(t)); eventType(t, end) != "response.completed" {
				t.Fatalf("the connection after a refused reference: %s", end)
			}
		})
	}
}

// TestStructuredOutputSDK: through the official Go SDK, text.format
// json_schema gets an answer that decodes into the schema's shape, the
// same whether it is read whole or assembled from streamed deltas.
func TestStructuredOutputSDK(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"city", "temperature_c", "conditions"},
		"properties": map[string]any{
			"city":          map[string]any{"type": "string"},
			"temperature_c": map[string]any{"type": "integer", "minimum": -40, "maximum": 50},
			"conditions":    map[string]any{"type": "string", "enum": []any{"sunny", "cloudy", "rain"}},
		}}
	params := responses.ResponseNewParams{Model: sdkModel, Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What's the weather in Paris?")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "weather", Schema: schema, Strict: openai.Bool(true)}}}}
	whole, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		City         string `json:"city"`
		TemperatureC int    `json:"temperature_c"`
		Conditions   string `json:"conditions"`
	}
	if err := json.Unmarshal([]byte(whole.OutputText()), &w); err != nil || w.City == "" || w.Conditions != "sunny" || w.TemperatureC < -40 {
		t.Fatalf("the answer %q: %+v, %v", whole.OutputText(), w, err)
	}
	stream := client.Responses.NewStreaming(ctx, params)
	var deltas strings.Builder
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.Delta)
		}
	}
	if err := stream.Err(); err != nil || deltas.String() != whole.OutputText() {
		t.Fatalf("streamed %q (%v), want %q", deltas.String(), err, whole.OutputText())
	}
}

// TestStructuredOutputRefused: a strict schema that strict mode refuses
// is answered with OpenAI's 400 (invalid_json_schema on
// text.format.schema, invalid_function_parameters on a strict function's
// parameters) through the Go SDK and as a WebSocket error, the connection
// usable after; a json: directive the schema does not validate fails its
// response with invalid_directive.
func TestStructuredOutputRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	ctx := sdkContext(t)
	loose := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather?")}
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Input: input,
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "weather", Schema: loose, Strict: openai.Bool(true)}}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "invalid_json_schema" || apiErr.Param != "text.format.schema" ||
		apiErr.Message != "Invalid schema for response_format 'weather': In context=(), 'additionalProperties' is required to be supplied and to be false." {
		t.Fatalf("a loose strict schema: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Input: input,
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: loose, Strict: openai.Bool(true)}}}})
	if !errors.As(err, &apiErr) || apiErr.Code != "invalid_function_parameters" || apiErr.Param != "tools[0].parameters" {
		t.Fatalf("a loose strict function: %v", err)
	}
	// Not strict: taken as it is.
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: sdkModel, Input: input, Store: openai.Bool(false),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "weather", Schema: loose, Strict: openai.Bool(false)}}}}); err != nil {
		t.Fatalf("a loose schema without strict: %v", err)
	}

	c := h.dial(t, nil)
	format := map[string]any{"format": map[string]any{"type": "json_schema", "name": "weather", "strict": true, "schema": map[string]any{"type": "array"}}}
	c.send(t, create(map[string]any{"model": "tether-scripted", "input": "Weather?", "text": format}))
	if e := decodeEv(t, c.recv(t)); e.Type != "error" || e.Error == nil || e.Error.Code != "invalid_json_schema" || e.Error.Param != "text.format.schema" {
		t.Fatalf("a WebSocket create with an array schema: %+v", e)
	}
	strictCount := map[string]any{"format": map[string]any{"type": "json_schema", "name": "count", "strict": true, "schema": map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}}}}}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "json: {\"n\": 9}", "text": strictCount}))
	end := last(c.untilTerminal(t))
	if eventType(t, end) != "response.failed" || !strings.Contains(string(end), `"code":"invalid_directive"`) {
		t.Fatalf("a json: directive the schema refuses: %s", end)
	}
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "json: {\"n\": 4}", "text": strictCount}))
	if end := last(c.untilTerminal(t)); eventType(t, end) != "response.completed" || !strings.Contains(string(end), `"text":"{\"n\": 4}"`) {
		t.Fatalf("the connection after: %s", end)
	}
}

// TestAppendItemReference: a suspended rollout's response.append takes
// item_references as a create does, in the memory store and in Redis: a
// stored user message of the tenant steers it; an unknown id, or another
// tenant's, is refused with OpenAI's 404 on input and the rollout stays
// parked, answered by the next append; a create or a cancel sent right
// behind a resolving append is taken after it, in order.
func TestAppendItemReference(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"memory", "redis"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			h := twoTenants(t, where)
			code, b := authed(t, h, "POST", "/v1/responses", "Bearer sk-alice",
				`{"model":"tether-scripted","input":[{"type":"message","id":"msg_steer1","role":"user","content":"Take the fast path."}]}`)
			if code != 200 {
				t.Fatalf("storing the message: %d %s", code, b)
			}
			notFound := func(c *wsConn, id string) {
				t.Helper()
				b := c.recv(t)
				e := decodeEv(t, b)
				if e.Type != "error" || e.Error == nil || e.Error.Param != "input" || !strings.Contains(string(b), "Item with id '"+id+"' not found") {
					t.Fatalf("a reference to %s: %s, want OpenAI's 404 on input", id, b)
				}
			}
			ref := func(id string) map[string]any { return map[string]any{"type": "item_reference", "id": id} }
			body := suspendedBody("tether-scripted", [][]dcall{{{"read_file", `{"path":"a.go"}`}}}, false)

			bob := h.dial(t, http.Header{"Authorization": {"Bearer sk-bob"}})
			bob.send(t, create(body))
			pause := last(bob.next(t))
			bobs := respID(t, pause)
			outs := outputsFor(t, pause)
			bob.send(t, appendEv(bobs, "", append(outs, ref("msg_steer1"))...))
			notFound(bob, "msg_steer1")

			alice := h.dial(t, http.Header{"Authorization": {"Bearer sk-alice"}})
			alice.send(t, create(body))
			pause = last(alice.next(t))
			id := respID(t, pause)
			outs = outputsFor(t, pause)
			alice.send(t, appendEv(id, "", append(outs, ref("msg_nope"))...))
			notFound(alice, "msg_nope")
			// A create on the lane right behind the resolving append waits
			// for it, as it would behind any append that completes the step.
			alice.send(t, appendEv(id, "", append(outs, ref("msg_steer1"))...))
			alice.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "input": "Next."}))
			end := last(alice.untilTerminal(t))
			if eventType(t, end) != "response.completed" || !strings.Contains(string(end), "Take the fast path.") {
				t.Fatalf("steered by a stored message: %s", end)
			}
			if next := last(alice.untilTerminal(t)); eventType(t, next) != "response.completed" || !strings.Contains(string(next), "Next.") {
				t.Fatalf("the create behind the append: %s", next)
			}

			// Bob's rollout is still parked: his append with a reference to
			// nothing, and a cancel right behind it, are taken in order.
			bob.send(t, appendEv(bobs, "", ref("msg_nope")))
			bob.send(t, refEv("response.cancel", bobs, ""))
			notFound(bob, "msg_nope")
			if end := last(bob.next(t)); eventType(t, end) != "response.cancelled" {
				t.Fatalf("the cancel behind it: %s", end)
			}
		})
	}
}

// twoTenants is a server with two tenants' keys (sk-alice, sk-bob) on the
// store where says: "memory", or "redis" (a Redis of its own).
func twoTenants(t *testing.T, where string) *harness {
	t.Helper()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	opts := runtime.Options{Keys: keys}
	if where == "redis" {
		return redisHarness(t, redistest.Start(t).URL(), opts)
	}
	return newHarness(t, opts)
}

// TestModelsCodexCatalog: GET /v1/models is OpenAI's list for every client
// but the Codex CLI, which asks with its client_version and reads a catalog
// of the models' capabilities instead: every model served, apply_patch
// offered in freeform, its context window.
func TestModelsCodexCatalog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	client := sdkClient(t, h)
	page, err := client.Models.List(sdkContext(t))
	if err != nil || len(page.Data) == 0 || page.Data[0].Object != "model" {
		t.Fatalf("OpenAI's list: %+v, %v", page, err)
	}

	resp, err := http.Get(h.base + "/models?client_version=0.169.0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cat struct {
		Object string           `json:"object"`
		Models []map[string]any `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil || resp.StatusCode != 200 {
		t.Fatalf("catalog: %d, %v", resp.StatusCode, err)
	}
	if cat.Object != "" || len(cat.Models) != len(page.Data) {
		t.Fatalf("catalog of %d models (object %q), want the %d served", len(cat.Models), cat.Object, len(page.Data))
	}
	for i, m := range cat.Models {
		if m["slug"] != page.Data[i].ID || m["apply_patch_tool_type"] != "freeform" || m["shell_type"] != "unified_exec" ||
			m["base_instructions"] == "" || m["truncation_policy"] == nil || m["supported_in_api"] != true ||
			m["context_window"] != float64(sampler.DefaultContextWindow) {
			t.Errorf("catalog entry %d: %v", i, m)
		}
	}
}
