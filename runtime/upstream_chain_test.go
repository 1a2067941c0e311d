package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// These tests chain two tethers: A serves models whose backend is a
// sampler.Upstream pointed at B, a real tether serving the scripted model
// over /v1/chat/completions and /v1/responses. Whatever A's client sees was
// streamed by B and translated by the upstream backend, so the chain tests
// both ends of both APIs against each other, and A against its own local
// scripted model, which must be indistinguishable from the chained one.

// remoteModels are A's chained models, by the API they reach B through.
var remoteModels = map[string]sampler.UpstreamAPI{"remote-chat": sampler.UpstreamChat, "remote-resp": sampler.UpstreamResponses}

// newUpstream is an Upstream to b's base URL whose connections Cleanup closes.
func newUpstream(t *testing.T, cfg sampler.UpstreamConfig) *sampler.Upstream {
	t.Helper()
	up, err := sampler.NewUpstream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.CloseIdleConnections)
	return up
}

// newChain starts tether A, serving "tether-scripted" locally and the
// remote models through B's scripted model, plus extra models.
func newChain(t *testing.T, b *harness, opts runtime.Options, extra map[string]runtime.Sampler) *harness {
	t.Helper()
	models := map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{})}
	for name, api := range remoteModels {
		models[name] = newUpstream(t, sampler.UpstreamConfig{BaseURL: b.base, API: api, Model: "tether-scripted", APIKey: "sk-test"})
	}
	for name, m := range extra {
		models[name] = m
	}
	opts.Models, opts.Renderer = models, renderer(t)
	return newHarness(t, opts)
}

// sortedRemotes is remoteModels' names in a fixed order.
func sortedRemotes() []string {
	var names []string
	for n := range remoteModels {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

var weatherToolJSON = map[string]any{
	"type": "function", "name": "get_weather", "description": "Get the weather for a location.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []string{"location"}},
}

// TestUpstreamChainTurns is the brief's conversation over HTTP/SSE and over
// a WebSocket: B's model calls a function (from a directive, then from the
// schema), A streams the call, the client sends the output, B answers
// quoting it.
func TestUpstreamChainTurns(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true})
	a := newChain(t, b, runtime.Options{EveryDelta: true}, nil)

	for _, model := range sortedRemotes() {
		for _, transport := range []string{"http", "ws"} {
			t.Run(model+"/"+transport, func(t *testing.T) {
				t.Parallel()
				var ws *wsConn
				if transport == "ws" {
					ws = a.dial(t, nil)
				}
				turn := func(body map[string]any) [][]byte {
					t.Helper()
					body["model"], body["tools"] = model, []any{weatherToolJSON}
					var evs [][]byte
					if ws != nil {
						ws.send(t, create(body))
						evs = ws.untilTerminal(t)
					} else {
						body["store"] = true
						evs = a.sse(t, body)
					}
					checkStreamInvariants(t, evs)
					if typ := eventType(t, evs[len(evs)-1]); typ != "response.completed" {
						t.Fatalf("turn ended with %s", evs[len(evs)-1])
					}
					return evs
				}

				// Turn 1: a scripted call; its arguments stream as deltas.
				evs := turn(map[string]any{"input": "Check Paris.\ncall: get_weather {\"location\":\"Paris, FR\"}"})
				call := onlyCall(t, evs)
				if call.Name != "get_weather" || call.Args != `{"location":"Paris, FR"}` || !strings.HasPrefix(call.CallID, "call_") {
					t.Fatalf("call %+v", call)
				}
				// Turn 2: the output; B quotes it.
				evs = turn(map[string]any{"previous_response_id": respID(t, evs[0]),
					"input": []any{fco(call.CallID, "Rain, 12 C.")}})
				if got, want := streamedText(t, evs), "get_weather returned: Rain, 12 C."; got != want {
					t.Fatalf("answer %q, want %q", got, want)
				}
				// Turn 3: a question whose call B derives from the schema.
				evs = turn(map[string]any{"previous_response_id": respID(t, evs[0]), "input": "And the weather in Boston?"})
				if call := onlyCall(t, evs); call.Args != `{"location":"Boston, MA"}` {
					t.Fatalf("schema call %+v", call)
				}
			})
		}
	}
}

// onlyCall checks that a turn's output is one function call, streamed as
// added, argument deltas and done, and returns it.
func onlyCall(t *testing.T, evs [][]byte) itemKey {
	t.Helper()
	var deltas strings.Builder
	var types []string
	for _, raw := range evs {
		e := decodeEv(t, raw)
		types = append(types, e.Type)
		if e.Type == "response.function_call_arguments.delta" {
			deltas.WriteString(e.Delta)
		}
	}
	for _, want := range []string{"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"} {
		if !slices.Contains(types, want) {
			t.Fatalf("no %s in %v", want, types)
		}
	}
	out := itemKeys(t, decodeEv(t, evs[len(evs)-1]).Response.Output)
	if len(out) != 1 || out[0].Type != "function_call" || out[0].Status != "completed" {
		t.Fatalf("output %+v, want one function call", out)
	}
	if deltas.String() != out[0].Args {
		t.Fatalf("argument deltas %q, arguments %q", deltas.String(), out[0].Args)
	}
	return out[0]
}

// streamedText is a turn's text, from its output_text deltas.
func streamedText(t *testing.T, evs [][]byte) string {
	t.Helper()
	var b strings.Builder
	for _, raw := range evs {
		if e := decodeEv(t, raw); e.Type == "response.output_text.delta" {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// TestUpstreamChainMatchesLocal runs a suspended rollout of single and
// parallel calls over A's WebSocket with the local scripted model and with
// each chained one: the events, the output and the usage must be the same,
// since B's model sees the same context. The call ids differ (B's are drawn
// from its own responses' ids); the calls they name must be the same ones,
// in the same order, each id its own.
func TestUpstreamChainMatchesLocal(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true})
	a := newChain(t, b, runtime.Options{EveryDelta: true}, nil)
	steps := [][]dcall{
		{{"read_file", `{"path":"main.go"}`}},
		{{"grep", `{"pattern":"TODO","path":"."}`}, {"list_dir", `{"path":"cmd"}`}, {"read_file", `{"path":"go.mod"}`}},
		{{"run_tests", `{"pkg":"./..."}`}, {"apply_patch", `{"patch":"--- a/x.go\n+++ b/x.go"}`}},
	}
	run := func(model string) (types []string, final ev) {
		c := a.dial(t, nil)
		events, pauses := driveSuspended(t, c, map[string]any{"model": model, "store": false, "instructions": "Be brief.",
			"tools": []any{weatherToolJSON}, "input": script(steps)})
		if pauses != len(steps) {
			t.Fatalf("%s: %d pauses, want %d", model, pauses, len(steps))
		}
		checkStreamInvariants(t, events)
		for _, raw := range events {
			types = append(types, eventType(t, raw))
		}
		return types, decodeEv(t, events[len(events)-1])
	}
	wantTypes, want := run("tether-scripted")
	wantKeys := inCallOrder(t, itemKeys(t, want.Response.Output))
	if n := len(wantKeys); n != 7 || !strings.HasPrefix(wantKeys[n-1].Text, "run_tests returned: ") {
		t.Fatalf("local rollout output %+v", wantKeys)
	}
	for _, model := range sortedRemotes() {
		types, got := run(model)
		if !slices.Equal(types, wantTypes) {
			t.Errorf("%s: %d events, local %d; first difference at %d", model, len(types), len(wantTypes), firstDiff(types, wantTypes))
		}
		if keys := inCallOrder(t, itemKeys(t, got.Response.Output)); !slices.Equal(keys, wantKeys) {
			t.Errorf("%s output\n%+v\nlocal\n%+v", model, keys, wantKeys)
		}
		if *got.Response.Usage != *want.Response.Usage {
			t.Errorf("%s usage %+v, local %+v", model, *got.Response.Usage, *want.Response.Usage)
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestUpstreamChainHostedSearch: A offers its hosted web_search to B's model
// as a function; B calls it, A runs the search in its loop, and B reads the
// results A sends back.
func TestUpstreamChainHostedSearch(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true})
	a := newChain(t, b, runtime.Options{EveryDelta: true, HostedTools: []runtime.Tool{searchTool()}}, nil)
	for _, model := range sortedRemotes() {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			evs := a.sse(t, map[string]any{"model": model, "store": false, "tools": []any{webSearchTool, weatherToolJSON},
				"input": "call: web_search {\"query\":\"go generics\"}"})
			checkStreamInvariants(t, evs)
			end := decodeEv(t, evs[len(evs)-1])
			if end.Type != "response.completed" {
				t.Fatalf("ended with %s", evs[len(evs)-1])
			}
			keys := itemKeys(t, end.Response.Output)
			if len(keys) != 2 || keys[0].Type != "web_search_call" || keys[0].Query != "go generics" || keys[0].Status != "completed" {
				t.Fatalf("output %+v, want the search then the answer", keys)
			}
			if want := "web_search returned: 1. Go docs: go generics https://go.dev/doc/go-generics 2. pkg.go.dev"; !strings.HasPrefix(keys[1].Text, want) {
				t.Fatalf("answer %q, want it to start with %q", keys[1].Text, want)
			}
		})
	}
}

// TestUpstreamChainErrors: B's error message reaches A's client, in
// response.failed on both transports and as a chat error through A's own
// /v1/chat/completions.
func TestUpstreamChainErrors(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true})
	extra := map[string]runtime.Sampler{}
	for name, api := range remoteModels {
		extra["missing-"+name] = newUpstream(t, sampler.UpstreamConfig{BaseURL: b.base, API: api, Model: "no-such-model"})
	}
	a := newChain(t, b, runtime.Options{EveryDelta: true}, extra)
	const bSays = "The model 'no-such-model' does not exist. Models served here: tether-scripted."

	for _, name := range sortedRemotes() {
		model := "missing-" + name
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": model, "input": "hello"}
			ws := a.dial(t, nil)
			ws.send(t, create(body))
			for transport, evs := range map[string][][]byte{"http": a.sse(t, body), "ws": ws.untilTerminal(t)} {
				checkStreamInvariants(t, evs)
				end := evs[len(evs)-1]
				var e struct {
					Type     string `json:"type"`
					Response struct {
						Status string `json:"status"`
						Error  struct{ Code, Message string }
					} `json:"response"`
				}
				if err := json.Unmarshal(end, &e); err != nil {
					t.Fatal(err)
				}
				if e.Type != "response.failed" || e.Response.Status != "failed" || e.Response.Error.Code != "upstream_error" ||
					!strings.Contains(e.Response.Error.Message, "404") || !strings.HasSuffix(e.Response.Error.Message, bSays) {
					t.Errorf("%s: want response.failed with B's message, got %s", transport, end)
				}
			}
			status, out := a.post(t, "/chat/completions", map[string]any{"model": model, "messages": []any{userMsg("hello")}})
			if status != http.StatusBadGateway || !strings.Contains(string(out), bSays) || !strings.Contains(string(out), `"code":"upstream_error"`) {
				t.Errorf("chat: %d %s", status, out)
			}
		})
	}
}

// TestUpstreamChainTimeoutAndUnreachable: an upstream slower than Timeout
// fails the response with upstream_timeout; an unreachable one with
// upstream_error.
func TestUpstreamChainTimeoutAndUnreachable(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true,
		Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{TTFT: time.Minute})}})
	// Port 1 on loopback: nothing listens there. (A closed test server's
	// port is free for the next parallel test's server to take: CI once
	// reached another tether there, which answered 404.)
	const gone = "http://127.0.0.1:1/v1"
	extra := map[string]runtime.Sampler{}
	for name, api := range remoteModels {
		extra["slow-"+name] = newUpstream(t, sampler.UpstreamConfig{BaseURL: b.base, API: api, Timeout: 200 * time.Millisecond, Model: "tether-scripted"})
		extra["gone-"+name] = newUpstream(t, sampler.UpstreamConfig{BaseURL: gone, API: api})
	}
	a := newChain(t, b, runtime.Options{EveryDelta: true}, extra)
	for _, tc := range []struct{ prefix, code, says string }{
		{"slow-", "upstream_timeout", "did not finish within 200ms"},
		{"gone-", "upstream_error", "could not complete the request"},
	} {
		for _, name := range sortedRemotes() {
			t.Run(tc.prefix+name, func(t *testing.T) {
				t.Parallel()
				evs := a.sse(t, map[string]any{"model": tc.prefix + name, "input": "hello"})
				end := decodeEv(t, evs[len(evs)-1])
				if end.Type != "response.failed" || end.Response.Error == nil || end.Response.Error.Code != tc.code ||
					!strings.Contains(string(evs[len(evs)-1]), tc.says) {
					t.Errorf("want response.failed %s (%q), got %s", tc.code, tc.says, evs[len(evs)-1])
				}
			})
		}
	}
}

// TestUpstreamChainCancel: a client that leaves A mid-stream (an HTTP
// request cancelled, a WebSocket closed) aborts A's request to B: B's
// handler sees its context cancelled long before its answer would end.
func TestUpstreamChainCancel(t *testing.T) {
	t.Parallel()
	srv, err := runtime.NewServer(runtime.Options{Renderer: renderer(t),
		Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{TPS: 10})}})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 16) // B's requests' context errors, as their handlers return
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		ended <- r.Context().Err()
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	b := &harness{srv: srv, hs: hs, base: hs.URL + "/v1"}
	a := newChain(t, b, runtime.Options{EveryDelta: true}, nil)
	// B's answer quotes 200 characters: some 45 tokens, 4.5 s at 10 per second.
	long := strings.Repeat("please answer slowly ", 12)

	for _, model := range sortedRemotes() {
		for _, transport := range []string{"http", "ws"} {
			t.Run(model+"/"+transport, func(t *testing.T) {
				body := map[string]any{"model": model, "input": long, "stream": true}
				if transport == "ws" {
					c := a.dial(t, nil)
					c.send(t, create(body))
					for eventType(t, c.recv(t)) != "response.output_text.delta" {
					}
					c.c.CloseNow()
				} else {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					payload, _ := json.Marshal(body)
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/responses", bytes.NewReader(payload))
					req.Header.Set("Content-Type", "application/json")
					resp, err := a.hs.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					buf := make([]byte, 64<<10)
					var seen strings.Builder
					for !strings.Contains(seen.String(), "response.output_text.delta") {
						n, err := resp.Body.Read(buf)
						if err != nil {
							t.Fatalf("stream ended before any text: %v", err)
						}
						seen.Write(buf[:n])
					}
					cancel()
					resp.Body.Close()
				}
				select {
				case err := <-ended:
					if err == nil {
						t.Fatal("B's request ran to its end")
					}
				case <-time.After(3 * time.Second):
					t.Fatal("B's request is still running after the client left")
				}
			})
		}
	}
}

// TestUpstreamDeltasMatchScripted calls the upstream backend directly: for
// the same request it streams exactly the deltas B's scripted model streams
// locally, and returns the same result, over both APIs. Only the call ids
// differ: B's model draws them from B's response (or completion), the
// local one from a request that names none; every delta of a call must
// carry its call's id, and each call an id of its own.
func TestUpstreamDeltasMatchScripted(t *testing.T) {
	t.Parallel()
	b := newHarness(t, runtime.Options{Renderer: renderer(t), EveryDelta: true})
	local := sampler.NewScripted(renderer(t), sampler.Timing{})
	req := func(input string, max int) *sampler.Request {
		body, _ := json.Marshal(map[string]any{"model": "tether-scripted", "input": input, "tools": []any{weatherToolJSON}})
		cr, perr := protocol.DecodeCreateRequest(body)
		if perr != nil {
			t.Fatal(perr)
		}
		return &sampler.Request{Model: "tether-scripted", Instructions: "Answer briefly.", Items: cr.Input, Tools: cr.Tools, MaxOutputTokens: max}
	}
	cases := map[string]*sampler.Request{
		"text":     req("call: nothing\nno calls here", 0),
		"schema":   req("Weather in Rome?", 0),
		"parallel": req("call: get_weather {\"location\":\"Oslo\"} | get_weather {\"location\":\"Lima\"} | lookup {\"q\":[1,2]}", 0),
		"limit":    req("call: get_weather {\"location\":\"a place with a long name\"}", 4),
	}
	cases["text"].ToolChoice.Mode = "none"
	for _, name := range sortedRemotes() {
		up := newUpstream(t, sampler.UpstreamConfig{BaseURL: b.base, API: remoteModels[name], Model: "tether-scripted"})
		for cname, r := range cases {
			t.Run(name+"/"+cname, func(t *testing.T) {
				t.Parallel()
				var want, got []sampler.Delta
				wantRes, err := local.Sample(context.Background(), r, func(d sampler.Delta) { want = append(want, d) })
				if err != nil {
					t.Fatal(err)
				}
				gotRes, err := up.Sample(context.Background(), r, func(d sampler.Delta) { got = append(got, d) })
				if err != nil {
					t.Fatal(err)
				}
				if got, want := deltasInCallOrder(t, got), deltasInCallOrder(t, want); !reflect.DeepEqual(got, want) {
					t.Errorf("deltas\n%+v\nlocal\n%+v", got, want)
				}
				if gotRes.OutputTokens != wantRes.OutputTokens || gotRes.Incomplete != wantRes.Incomplete {
					t.Errorf("result %+v, local %+v", gotRes, wantRes)
				}
				if cname == "limit" && !gotRes.Incomplete {
					t.Errorf("a sample cut at max_output_tokens is not incomplete")
				}
			})
		}
	}
}

// deltasInCallOrder is ds with each call id replaced by "#n", n its call's
// place among the sample's calls, failing t when two calls share an id.
func deltasInCallOrder(t *testing.T, ds []sampler.Delta) []sampler.Delta {
	t.Helper()
	out, seen := slices.Clone(ds), map[string]string{}
	for i, d := range out {
		if d.Kind == sampler.CallStart {
			out[i].CallID = callOrdinal(t, seen, d.CallID)
		} else if o, ok := seen[d.CallID]; ok {
			out[i].CallID = o // an id no CallStart gave stays as it is: it differs
		}
	}
	return out
}
