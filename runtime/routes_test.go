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

	"github.com/tether-run/tether/runtime"
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
	if status != 400 || !strings.Contains(body, `"param":"input[0].id"`) {
		t.Fatalf("a reference to an unknown id: %d %s, want 400 on input[0].id", status, body)
	}
}
