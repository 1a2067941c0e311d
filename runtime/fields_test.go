package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fieldsResponse is what these tests read of a response.
type fieldsResponse struct {
	Status            string
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Error             *struct{ Code, Message string }
	Output            []struct {
		Type, Status string
	}
	Usage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	ServiceTier          string  `json:"service_tier"`
	Truncation           string  `json:"truncation"`
	PromptCacheRetention *string `json:"prompt_cache_retention"`
}

// create posts a create to h and decodes the response, which must be a 200.
func (h *harness) respond(t *testing.T, body map[string]any) fieldsResponse {
	t.Helper()
	code, b := h.post(t, "/responses", body)
	var resp fieldsResponse
	if err := json.Unmarshal(b, &resp); err != nil || code != 200 {
		t.Fatalf("%d %.400s", code, b)
	}
	return resp
}

// TestPromptCacheRetention: prompt_cache_retention keeps a prompt's prefix
// in the model's cache as long as it asks, by the cache's clock, and is
// echoed. The same prompt again finds it all cached while it is kept (an
// in_memory one for 10 minutes idle, a 24h one for a day), and nothing
// cached once it has gone.
func TestPromptCacheRetention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		retention string
		kept      time.Duration // idle, and still cached
		gone      time.Duration // idle, and gone
	}{
		{protocol.CacheInMemory, 9 * time.Minute, sampler.DefaultInMemoryRetention},
		{protocol.Cache24h, 23 * time.Hour, sampler.Retention24h},
	}
	for _, tc := range cases {
		t.Run(tc.retention, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			model := sampler.NewScripted(nil, sampler.Timing{})
			model.Cache().Configure(sampler.PrefixCacheOptions{Now: clock.now})
			h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"m": model}})
			body := map[string]any{"model": "m", "store": false, "input": "Tell me about the cache.", "prompt_cache_retention": tc.retention}
			ask := func(idle time.Duration) fieldsResponse {
				t.Helper()
				clock.advance(idle)
				resp := h.respond(t, body)
				if resp.PromptCacheRetention == nil || *resp.PromptCacheRetention != tc.retention {
					t.Fatalf("prompt_cache_retention echoed %v, want %s", resp.PromptCacheRetention, tc.retention)
				}
				return resp
			}
			if resp := ask(0); resp.Usage.InputTokensDetails.CachedTokens != 0 {
				t.Fatalf("first: %d cached", resp.Usage.InputTokensDetails.CachedTokens)
			}
			if resp := ask(tc.kept); resp.Usage.InputTokensDetails.CachedTokens != resp.Usage.InputTokens {
				t.Errorf("after %s idle: %d of %d cached, want all", tc.kept, resp.Usage.InputTokensDetails.CachedTokens, resp.Usage.InputTokens)
			}
			if resp := ask(tc.gone); resp.Usage.InputTokensDetails.CachedTokens != 0 {
				t.Errorf("after %s idle: %d cached, want none", tc.gone, resp.Usage.InputTokensDetails.CachedTokens)
			}
		})
	}
}

// TestFieldsRefused: a field of a value the API does not take, or one the
// model cannot honour, is refused before anything starts, with the API's
// code and the field's param.
func TestFieldsRefused(t *testing.T) {
	t.Parallel()
	// bare keeps no prompt cache, passes nothing on and has no context
	// window known.
	bare := samplerFunc(func(context.Context, *sampler.Request, func(sampler.Delta)) (sampler.Result, error) {
		return sampler.Result{}, nil
	})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(nil, sampler.Timing{}), "bare": bare}})
	cases := []struct {
		name   string
		fields map[string]any
		code   string
		param  string
	}{
		{"retention of no value the API has", map[string]any{"prompt_cache_retention": "1h"}, protocol.CodeInvalidValue, "prompt_cache_retention"},
		{"retention of a model without a cache", map[string]any{"model": "bare", "prompt_cache_retention": "24h"}, protocol.CodeUnsupportedParameter, "prompt_cache_retention"},
		{"truncation of no value the API has", map[string]any{"truncation": "middle"}, protocol.CodeInvalidValue, "truncation"},
		{"truncation auto of a model whose window is not known", map[string]any{"model": "bare", "truncation": "auto"}, protocol.CodeUnsupportedParameter, "truncation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": "tether-scripted", "input": "hi"}
			for k, v := range tc.fields {
				body[k] = v
			}
			code, b := h.post(t, "/responses", body)
			var e struct {
				Error struct{ Code, Param, Message string }
			}
			if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Code != tc.code || e.Error.Param != tc.param || e.Error.Message == "" {
				t.Errorf("got %d %s, want 400 %s (%s)", code, b, tc.code, tc.param)
			}
		})
	}
}

// TestMaxToolCalls: max_tool_calls bounds the hosted calls a response
// runs, the client's function calls not counted. The model's call past it
// is not run (its item ends incomplete), and the response ends with that
// step, nothing after it (a compaction due included): incomplete, reason
// max_tool_calls. A response that makes exactly as many completes.
func TestMaxToolCalls(t *testing.T) {
	t.Parallel()
	search := func(q string) dcall { return dcall{"web_search", `{"query":"` + q + `"}`} }
	cases := []struct {
		name    string
		steps   [][]dcall
		max     int
		compact bool // context_management: a compaction before every step
		status  string
		ran     int // web_search_call items completed
		cut     int // and incomplete
	}{
		{"past it, a step at a time", [][]dcall{{search("a")}, {search("b")}, {search("c")}, {search("d")}}, 2, false, "incomplete", 2, 1},
		{"past it within a step, compacting", [][]dcall{{search("a"), search("b"), search("c")}}, 1, true, "incomplete", 1, 2},
		{"past it within a step", [][]dcall{{search("a"), search("b"), search("c")}}, 1, false, "incomplete", 1, 2},
		{"none allowed", [][]dcall{{search("a")}}, 0, false, "incomplete", 0, 1},
		{"up to it", [][]dcall{{search("a")}, {search("b")}}, 2, false, "completed", 2, 0},
		{"function calls not counted", [][]dcall{{{"get_weather", `{"city":"Oslo"}`}}}, 0, false, "completed", 0, 0},
	}
	h := newHarness(t, runtime.Options{HostedTools: []runtime.Tool{searchTool()}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool},
				"max_tool_calls": tc.max, "input": script(tc.steps)}
			if tc.compact {
				body["context_management"] = []any{map[string]any{"type": "compaction", "compact_threshold": 64}}
			}
			resp := h.respond(t, body)
			ran, cut := 0, 0
			for _, it := range resp.Output {
				switch {
				case it.Type == "web_search_call" && it.Status == "completed":
					ran++
				case it.Type == "web_search_call" && it.Status == "incomplete":
					cut++
				}
			}
			if resp.Status != tc.status || ran != tc.ran || cut != tc.cut {
				t.Fatalf("ended %s with %d searches run, %d cut (%+v), want %s, %d, %d", resp.Status, ran, cut, resp.Output, tc.status, tc.ran, tc.cut)
			}
			if tc.status != "incomplete" {
				return
			}
			if resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_tool_calls" {
				t.Errorf("incomplete_details %+v, want reason max_tool_calls", resp.IncompleteDetails)
			}
			if end := resp.Output[len(resp.Output)-1]; end.Status != "incomplete" {
				t.Errorf("the output ends with %+v after the step past the bound, want it to end with that step", end)
			}
		})
	}
}

// TestMaxToolCallsSuspended: a suspended rollout's step that calls its
// client's function and a search past max_tool_calls parks on the
// function; once answered, the response ends (incomplete, max_tool_calls)
// rather than sampling on. So does a fork of the pause, which takes the
// bound reached with the rest of the rollout's state.
func TestMaxToolCallsSuspended(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{searchTool()}})
	c := h.dial(t, nil)
	l := newLanes(c)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "orig",
		"tools": []any{webSearchTool}, "max_tool_calls": 0,
		"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}, {"web_search", `{"query":"a"}`}}, {{"read_file", `{"path":"b.go"}`}}})}))
	pause := last(l.next(t, "orig"))
	id, outs := respID(t, pause), outputsFor(t, pause)
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"fork"}})
	forkPause := last(l.next(t, "fork"))
	for lane, rid := range map[string]string{"orig": id, "fork": respID(t, forkPause)} {
		c.send(t, appendEv(rid, lane, outs...))
		end := last(l.next(t, lane))
		var resp fieldsResponse
		if err := json.Unmarshal(terminalResponse(t, end), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != "max_tool_calls" {
			t.Fatalf("%s ended %s", lane, end)
		}
		if n := len(resp.Output); n != 2 || resp.Output[1].Type != "web_search_call" || resp.Output[1].Status != "incomplete" {
			t.Errorf("%s's output %+v, want the step's read_file and its search, cut", lane, resp.Output)
		}
	}
}

// TestTruncation: a prompt past the model's context window. With truncation
// "disabled" (the default) the create is refused before it begins (400
// context_length_exceeded, param input), as OpenAI refuses it; with "auto"
// the model reads the newest items that fit, the oldest left out, and
// never an output without what it answers: here the window would hold a
// call's output (a program's, with the call it made) but not the call, so
// the output is left out too. An input whose newest item alone is past the
// window is refused even with "auto".
func TestTruncation(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	user := func(text string) protocol.Item {
		return &protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}
	}
	tokens := func(items ...protocol.Item) int {
		n := len(r.Header("", nil))
		for _, it := range items {
			n += len(r.Item(it))
		}
		return n
	}
	first := user("Read the configuration of the build and tell me what it sets up, in as much detail as you can manage.")
	rest := protocol.Items{user("And the tests?"), user("Say which of them ran.")}
	byProgram := &protocol.Caller{Type: protocol.CallerProgram, CallerID: "call_p"}
	cases := []struct {
		name string
		pair protocol.Items // a call, and what answers it
	}{
		{"a function call", protocol.Items{
			&protocol.FunctionCall{CallID: "call_1", Name: "read_file", Arguments: `{"path":"build.cfg"}`},
			&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "target=linux cgo=off"}},
		}},
		{"a program", protocol.Items{
			&protocol.Program{ID: "prog_1", CallID: "call_p", Code: `await read_file({path: "build.cfg"})`, Fingerprint: "fp_1"},
			&protocol.FunctionCall{CallID: "call_2", Name: "read_file", Arguments: `{"path":"build.cfg"}`, Caller: byProgram},
			&protocol.FunctionCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Text: "target=linux cgo=off"}, Caller: byProgram},
			&protocol.ProgramOutput{ID: "progo_1", CallID: "call_p", Result: "target=linux cgo=off", Status: protocol.StatusCompleted},
		}},
	}
	models := map[string]runtime.Sampler{}
	for _, tc := range cases {
		// Room for what answers the call (the last of the pair) and what
		// follows it, not for the call.
		m := sampler.NewScripted(r, sampler.Timing{})
		m.SetContextWindow(tokens(append(tc.pair[len(tc.pair)-1:], rest...)...))
		models[tc.name] = m
	}
	h := newHarness(t, runtime.Options{Renderer: r, Models: models})
	body := func(model, truncation string, input any) map[string]any {
		b := map[string]any{"model": model, "store": false, "input": input}
		if truncation != "" {
			b["truncation"] = truncation
		}
		return b
	}
	refused := func(t *testing.T, name string, body map[string]any) {
		t.Helper()
		code, b := h.post(t, "/responses", body)
		var e struct {
			Error struct{ Code, Param, Message string }
		}
		if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Code != protocol.CodeContextLengthExceeded || e.Error.Param != "input" ||
			!strings.HasPrefix(e.Error.Message, "Your input exceeds the context window of this model.") {
			t.Errorf("%s: %d %s, want 400 context_length_exceeded (input), in OpenAI's words", name, code, b)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items := append(append(protocol.Items{first}, tc.pair...), rest...)
			input, err := protocol.Marshal(items)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.respond(t, body(tc.name, "auto", json.RawMessage(input)))
			if want := tokens(rest...); resp.Status != "completed" || resp.Usage.InputTokens != want || resp.Truncation != "auto" {
				t.Errorf("auto: %s, read %d tokens (truncation %q), want completed, the %d of the items after the call's", resp.Status, resp.Usage.InputTokens, resp.Truncation, want)
			}
			refused(t, "disabled", body(tc.name, "", json.RawMessage(input)))
			window := models[tc.name].(runtime.WindowSampler).ContextWindow()
			refused(t, "auto, the newest item past the window", body(tc.name, "auto", strings.Repeat("Say it again. ", window)))
		})
	}
}

// TestTruncationAsItRuns: a context that passes the model's window while
// the response runs (a search's results joined it) fails the response with
// context_length_exceeded under truncation "disabled"; under "auto" the
// next step reads what fits (the search, without the long message before
// it) and the response completes.
func TestTruncationAsItRuns(t *testing.T) {
	t.Parallel()
	// A long message, which "auto" leaves out to make room for the search.
	input := strings.Repeat("The build has many parts. ", 40) + script([][]dcall{{{"web_search", `{"query":"go generics"}`}}})
	body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": input}
	opts := runtime.Options{Renderer: renderer(t), HostedTools: []runtime.Tool{searchTool()}}
	code, b := newHarness(t, opts).post(t, "/responses/input_tokens", body)
	var first struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &first); err != nil || code != 200 {
		t.Fatalf("input_tokens: %d %s", code, b)
	}
	model := sampler.NewScripted(renderer(t), sampler.Timing{})
	model.SetContextWindow(first.InputTokens + 10) // the first step fits; with the search's results, the second does not
	opts.Models = map[string]runtime.Sampler{"tether-scripted": model}
	h := newHarness(t, opts)
	for truncation, want := range map[string]string{"disabled": "failed", "auto": "completed"} {
		body["truncation"] = truncation
		resp := h.respond(t, body)
		if resp.Status != want {
			t.Errorf("%s: %s (%+v), want %s", truncation, resp.Status, resp.Error, want)
		}
		if want == "failed" && (resp.Error == nil || resp.Error.Code != protocol.CodeContextLengthExceeded) {
			t.Errorf("%s: failed with %+v, want context_length_exceeded", truncation, resp.Error)
		}
	}
}

// TestTruncationAfterPause: a suspended rollout's prompt lets its tokens
// go while it is parked (only counts and hashes are kept); when the
// output its client appends passes the model's window, the next step
// still reads what fits under truncation "auto", as many tokens as a
// durable server's rollout, which keeps its prompt's tokens, reads.
func TestTruncationAfterPause(t *testing.T) {
	t.Parallel()
	// Two messages: truncation leaves the long one out, and keeps the
	// other, whose tokens the parked prompt let go.
	input := []any{userMsg(strings.Repeat("The build has many parts. ", 40)), userMsg(script([][]dcall{{{"read_file", `{"path":"build.cfg"}`}}}))}
	body := map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "truncation": "auto", "input": input}
	opts := runtime.Options{Renderer: renderer(t)}
	code, b := newHarness(t, opts).post(t, "/responses/input_tokens", body)
	var first struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.Unmarshal(b, &first); err != nil || code != 200 {
		t.Fatalf("input_tokens: %d %s", code, b)
	}
	model := sampler.NewScripted(renderer(t), sampler.Timing{})
	model.SetContextWindow(first.InputTokens + 10) // the first step fits; with the file's text, the second does not
	opts.Models = map[string]runtime.Sampler{"tether-scripted": model}
	read := map[string]int{}
	for name, cps := range map[string]runtime.Checkpoints{"in memory": nil, "durable": runtime.NewMemoryCheckpoints()} {
		opts.Checkpoints = cps
		c := newHarness(t, opts).dial(t, nil)
		c.send(t, create(body))
		pause := last(c.next(t))
		e := decodeEv(t, pause)
		if e.Type != "response.done" || e.Response.Usage == nil || e.Response.Usage.InputTokens != first.InputTokens {
			t.Fatalf("%s: not a pause after a step of %d tokens: %s", name, first.InputTokens, pause)
		}
		text := strings.Repeat("build.cfg sets the target, the compiler and the flags. ", 10)
		c.send(t, appendEv(e.Response.ID, "", fco(pendingCallIDs(t, pause)[0], text)))
		end := decodeEv(t, c.terminal(t))
		if end.Type != "response.completed" || end.Response.Usage == nil {
			t.Fatalf("%s: %s, want completed", name, end.Type)
		}
		read[name] = end.Response.Usage.InputTokens - first.InputTokens
		if read[name] <= 0 || read[name] > first.InputTokens+10 {
			t.Errorf("%s: the step after the pause read %d tokens, window %d", name, read[name], first.InputTokens+10)
		}
	}
	if read["in memory"] != read["durable"] {
		t.Errorf("the step after the pause read %d tokens, a durable rollout's %d", read["in memory"], read["durable"])
	}
}

// TestServiceTier: a response says which service_tier was asked for while
// it runs ("auto" when none was), and once it ends the tier that served it,
// as OpenAI's does: standard processing ("default") for the simulated
// models, whatever was asked; an upstream's own, which it is asked with the
// request's tier and says in its stream.
func TestServiceTier(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	asked := map[string]bool{} // the tiers the upstream stand-in was sent
	// upstream stands for one whose server says it served flex.
	upstream := samplerFunc(func(_ context.Context, req *sampler.Request, _ func(sampler.Delta)) (sampler.Result, error) {
		mu.Lock()
		asked[req.ServiceTier] = true
		mu.Unlock()
		return sampler.Result{ServiceTier: "flex"}, nil
	})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(nil, sampler.Timing{}), "up": upstream}})
	cases := []struct {
		model, tier     string
		running, served string
	}{
		{"tether-scripted", "", "auto", "default"},
		{"tether-scripted", "auto", "auto", "default"},
		{"tether-scripted", "default", "default", "default"},
		{"tether-scripted", "flex", "flex", "default"},
		{"tether-scripted", "priority", "priority", "default"},
		{"up", "priority", "priority", "flex"}, // served at another tier than asked
	}
	for _, tc := range cases {
		t.Run(tc.model+" "+tc.tier, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": tc.model, "input": "hi"}
			if tc.tier != "" {
				body["service_tier"] = tc.tier
			}
			events := h.sse(t, body)
			tier := func(ev []byte) string {
				var e struct {
					Response struct {
						ID          string `json:"id"`
						ServiceTier string `json:"service_tier"`
					} `json:"response"`
				}
				if err := json.Unmarshal(ev, &e); err != nil {
					t.Fatal(err)
				}
				return e.Response.ServiceTier
			}
			if got := tier(events[0]); got != tc.running {
				t.Errorf("response.created says %q, want %q", got, tc.running)
			}
			end := events[len(events)-1]
			if got := tier(end); got != tc.served {
				t.Errorf("%s says %q, want %q", eventType(t, end), got, tc.served)
			}
			var stored fieldsResponse
			code, b := h.get(t, "/responses/"+respID(t, end))
			if err := json.Unmarshal(b, &stored); err != nil || code != 200 || stored.ServiceTier != tc.served {
				t.Errorf("stored: %d, service_tier %q, want %q", code, stored.ServiceTier, tc.served)
			}
		})
	}
	t.Cleanup(func() {
		if !asked["priority"] || len(asked) != 1 {
			t.Errorf("the upstream was asked for %v, want priority", asked)
		}
	})
}
