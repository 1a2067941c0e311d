package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// These tests drive background responses (background: true) with the
// official Go SDK, as OpenAI's background guide uses it: a stream cut and
// resumed with starting_after, a poll, a cancel and its repeat.

// slowHarness serves the scripted model paced at tps tokens a second.
func slowHarness(t *testing.T, tps float64, opts runtime.Options) *harness {
	t.Helper()
	opts.Models = map[string]runtime.Sampler{sdkModel: sampler.NewScripted(renderer(t), sampler.Timing{TPS: tps})}
	return newHarness(t, opts)
}

// longInput makes the scripted model answer with about 50 tokens.
const longInput = "Tell me everything about the quick brown fox that jumps over the lazy dog, then about the lazy dog that watches it, and then about the field they both stand in on a summer afternoon."

// backgroundStream creates a background response with stream: true on a
// server paced at tps, with the SDK, and returns its client and stream.
func backgroundStream(t *testing.T, tps float64) (openai.Client, context.Context, *ssestream.Stream[responses.ResponseStreamEventUnion]) {
	t.Helper()
	ctx := sdkContext(t)
	client := sdkClient(t, slowHarness(t, tps, runtime.Options{}))
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model:      sdkModel,
		Input:      responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(longInput)},
		Background: param.NewOpt(true),
	})
	t.Cleanup(func() { stream.Close() })
	return client, ctx, stream
}

func TestSDKBackgroundStreamResumed(t *testing.T) {
	t.Parallel()
	client, ctx, stream := backgroundStream(t, 200)
	var types []string
	var id string
	for len(types) < 6 && stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %d (%s) has sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		if ev.Type == "response.created" {
			r := ev.AsResponseCreated().Response
			id = r.ID
			if r.Status != "queued" || !r.Background {
				t.Errorf("response.created: status %s, background %v; want queued, true", r.Status, r.Background)
			}
		}
	}
	stream.Close() // cut: the response runs on
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if want := []string{"response.created", "response.queued", "response.in_progress"}; len(types) < 3 || strings.Join(types[:3], " ") != strings.Join(want, " ") {
		t.Fatalf("first events %v, want %v", types, want)
	}

	last := int64(len(types) - 1)
	resumed := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: param.NewOpt(last)})
	t.Cleanup(func() { resumed.Close() })
	var final *responses.Response
	var deltas strings.Builder
	for resumed.Next() {
		ev := resumed.Current()
		if ev.SequenceNumber != last+1 {
			t.Fatalf("resumed after %d: event %s has sequence_number %d (a gap or a repeat)", last, ev.Type, ev.SequenceNumber)
		}
		last = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatalf("resumed stream: %v", err)
	}
	if final == nil {
		t.Fatal("the resumed stream ended without response.completed")
	}
	wantCompleted(t, final)
	if !strings.HasSuffix(final.OutputText(), deltas.String()) || deltas.Len() == 0 {
		t.Errorf("resumed deltas %q are not the end of the output %q", deltas.String(), final.OutputText())
	}

	// The whole stream again, from the start: the same events.
	again := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{})
	t.Cleanup(func() { again.Close() })
	n := int64(0)
	for again.Next() {
		if ev := again.Current(); ev.SequenceNumber != n {
			t.Fatalf("stream again: event %d has sequence_number %d", n, ev.SequenceNumber)
		}
		n++
	}
	if err := again.Err(); err != nil || n != last+1 {
		t.Fatalf("stream again: %d events (%v), want %d", n, err, last+1)
	}
}

func TestSDKBackgroundPolled(t *testing.T) {
	t.Parallel()
	h := slowHarness(t, 200, runtime.Options{})
	ctx := sdkContext(t)
	client := sdkClient(t, h)

	created, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:      sdkModel,
		Input:      responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("poll me")},
		Background: param.NewOpt(true),
	})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if created.Status != "queued" || !created.Background {
		t.Fatalf("created: status %s, background %v; want queued, true", created.Status, created.Background)
	}
	seen := map[responses.ResponseStatus]bool{}
	for {
		got, err := client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		seen[got.Status] = true
		if got.Status != "queued" && got.Status != "in_progress" {
			wantCompleted(t, got)
			wantText(t, got, "poll me")
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still %s when the test's time ran out", got.Status)
		default:
		}
	}
	if !seen["in_progress"] && !seen["queued"] {
		t.Logf("polls saw only %v: the response was quicker than the first poll", seen)
	}
	// A background response created without stream kept no events.
	_, err = client.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}, option.WithQuery("stream", "true"))
	wantAPIError(t, "stream of a response created without stream", err, http.StatusBadRequest, "response_not_background")
}

func TestSDKBackgroundCancel(t *testing.T) {
	t.Parallel()
	client, ctx, stream := backgroundStream(t, 20)
	var id string
	for stream.Next() { // to the first delta: the response is running
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.AsResponseCreated().Response.ID
		}
		if ev.Type == "response.output_text.delta" {
			break
		}
	}
	cancelled, err := client.Responses.Cancel(ctx, id)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if cancelled.Status != "cancelled" {
		t.Fatalf("cancel: status %s, want cancelled", cancelled.Status)
	}
	var terminal string
	for stream.Next() {
		terminal = stream.Current().Type
	}
	if terminal != "response.cancelled" {
		t.Errorf("the create's stream ended on %q, want response.cancelled", terminal)
	}
	again, err := client.Responses.Cancel(ctx, id)
	if err != nil {
		t.Fatalf("cancel again: %v", err)
	}
	if again.RawJSON() != cancelled.RawJSON() {
		t.Errorf("cancel again answered\n%s\nwant the same as the first\n%s", again.RawJSON(), cancelled.RawJSON())
	}

	// A foreground response cannot be cancelled.
	fg, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: sdkModel,
		Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("hi")},
	})
	if err != nil {
		t.Fatalf("foreground: %v", err)
	}
	_, err = client.Responses.Cancel(ctx, fg.ID)
	wantAPIError(t, "cancel of a foreground response", err, http.StatusBadRequest, "response_not_background")
	_, err = client.Responses.Cancel(ctx, "resp_unknown")
	wantAPIError(t, "cancel of an unknown id", err, http.StatusNotFound, "response_not_found")
}

// TestBackgroundBadInput: what a background request or its follow-ups may
// get wrong is refused with a code, and another tenant's background
// response is as unknown.
func TestBackgroundBadInput(t *testing.T) {
	t.Parallel()
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-alice": "alice", "sk-bob": "bob"})
	h := slowHarness(t, 20, runtime.Options{Keys: keys, Background: runtime.BackgroundOptions{Queue: 1}})
	do := func(method, path, key, body string) (int, string) {
		return authed(t, h, method, path, "Bearer "+key, body)
	}
	code, body := do("POST", "/v1/responses", "sk-alice", `{"model":"tether-scripted","background":true,"stream":false,"input":"`+longInput+`"}`)
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct{ ID string }
	json.Unmarshal([]byte(body), &created)

	for _, c := range []struct {
		name, method, path, key, body string
		status                        int
		code                          string
	}{
		{"2h with stream", "POST", "/v1/responses", "sk-bob", `{"model":"tether-scripted","background":true,"stream":true,"background_options":{"completion_window":"2h"},"input":"x"}`, 400, "invalid_value"},
		{"8h in the foreground", "POST", "/v1/responses", "sk-bob", `{"model":"tether-scripted","background_options":{"completion_window":"8h"},"input":"x"}`, 400, "invalid_value"},
		{"2h on flex", "POST", "/v1/responses", "sk-bob", `{"model":"tether-scripted","background":true,"service_tier":"flex","background_options":{"completion_window":"2h"},"input":"x"}`, 400, "invalid_value"},
		{"an unknown window", "POST", "/v1/responses", "sk-bob", `{"model":"tether-scripted","background":true,"background_options":{"completion_window":"1h"},"input":"x"}`, 400, "invalid_value"},
		{"a full queue", "POST", "/v1/responses", "sk-alice", `{"model":"tether-scripted","background":true,"input":"x"}`, 429, "background_queue_full"},
		{"starting_after negative", "GET", "/v1/responses/" + created.ID + "?stream=true&starting_after=-1", "sk-alice", "", 400, "invalid_value"},
		{"stream not a boolean", "GET", "/v1/responses/" + created.ID + "?stream=maybe", "sk-alice", "", 400, "invalid_value"},
		{"another tenant's poll", "GET", "/v1/responses/" + created.ID, "sk-bob", "", 404, "response_not_found"},
		{"another tenant's cancel", "POST", "/v1/responses/" + created.ID + "/cancel", "sk-bob", "", 404, "response_not_found"},
		{"another tenant's stream", "GET", "/v1/responses/" + created.ID + "?stream=true", "sk-bob", "", 404, "response_not_found"},
	} {
		code, body := do(c.method, c.path, c.key, c.body)
		var e struct{ Error struct{ Code string } }
		json.Unmarshal([]byte(body), &e)
		if code != c.status || e.Error.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, body, c.status, c.code)
		}
	}

	// starting_after past the last event so far, on a streamed one.
	code, body = do("POST", "/v1/responses/"+created.ID+"/cancel", "sk-alice", "")
	if code != 200 || !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body = do("POST", "/v1/responses", "sk-alice", `{"model":"tether-scripted","background":true,"stream":true,"input":"hi"}`)
	if code != 200 {
		t.Fatalf("streamed create: %d %s", code, body)
	}
	id := between(body, `"id":"`, `"`)
	code, body = do("GET", "/v1/responses/"+id+"?stream=true&starting_after=100000", "sk-alice", "")
	if code != 400 || !strings.Contains(body, "invalid_value") {
		t.Errorf("starting_after past the end: %d %s, want 400 invalid_value", code, body)
	}
}

// between is the text of s between the first before and the after that
// follows it.
func between(s, before, after string) string {
	_, rest, _ := strings.Cut(s, before)
	v, _, _ := strings.Cut(rest, after)
	return v
}

func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Code != code {
		t.Errorf("%s = %v, want %d %s", what, err, status, code)
	}
}
