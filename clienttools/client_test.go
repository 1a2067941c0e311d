package clienttools_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// fixtureRepo is the repository the replay traces were recorded on.
const fixtureRepo = "../sampler/traces/repo"

var sharedRenderer = sync.OnceValues(sampler.NewRenderer)

// server starts an in-process tether serving the scripted model and every
// embedded trace as replay:NAME, unpaced, and returns its base URL.
func server(t testing.TB, opts runtime.Options) string {
	t.Helper()
	base, _ := serverWT(t, opts, false)
	return base
}

// wtServer is a tether's WebTransport endpoint: its base URL and the hash
// that pins its certificate.
type wtServer struct{ base, hash string }

// serverWT is server, also serving WebTransport on a loopback UDP port when
// wt is set.
func serverWT(t testing.TB, opts runtime.Options, wt bool) (string, wtServer) {
	t.Helper()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	opts.Renderer = r
	if opts.Models == nil {
		opts.Models = map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{})}
		for _, tr := range traces {
			opts.Models[sampler.ReplayPrefix+tr.Name] = sampler.NewReplay(r, sampler.Timing{}, tr)
		}
	}
	srv, err := runtime.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	var w wtServer
	var wts *webtransport.Endpoint
	if wt {
		cert, err := webtransport.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if wts, err = webtransport.Listen(srv, "127.0.0.1:0", cert); err != nil {
			t.Fatal(err)
		}
		w = wtServer{base: wts.URL(), hash: wts.CertificateHash()}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if wts != nil {
			wts.Close()
		}
		hs.Close()
	})
	return hs.URL + "/v1", w
}

// copyTree copies the directory src into a new temporary directory.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// treeHash hashes every file's path and content under dir.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Write([]byte(filepath.ToSlash(rel) + "\x00"))
		h.Write(data)
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func userInput(text string) protocol.Items {
	return protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}}
}

type callKey struct{ name, args string }

// TestRunModesReplay runs the 50-call replay trace through the client in
// every mode, and in suspend mode once more against a server that
// hibernates the rollout at every pause (each append rebuilds it from its
// checkpoint), with the local tools executed for real on a copy of the
// fixture repository each time: the same tool calls in the same order, the
// same final answer, the same repository at the end, its checks passing.
func TestRunModesReplay(t *testing.T) {
	t.Parallel()
	const trace = "calc-audit-50"
	base := server(t, runtime.Options{})
	var released releaseCounter
	checkpointed := server(t, runtime.Options{Checkpoints: runtime.NewMemoryCheckpoints(), Observer: &released,
		Suspension: runtime.SuspensionOptions{HibernateAfter: time.Nanosecond}})
	type outcome struct {
		calls []callKey
		text  string
		tree  string
		last  clienttools.Call
		turns int
		usage []protocol.Usage // each turn's tokens in and out
	}
	modes := append(slices.Clone(clienttools.Modes), clienttools.ModeSuspend)
	name := func(i int) string {
		if i == len(clienttools.Modes) {
			return "suspend, hibernated at every pause"
		}
		return modes[i].String()
	}
	got := make([]outcome, len(modes))
	var wg sync.WaitGroup
	for i, mode := range modes {
		wg.Go(func() {
			dir := copyTree(t, fixtureRepo)
			c := &clienttools.Client{BaseURL: base}
			if i == len(clienttools.Modes) {
				c.BaseURL = checkpointed
			}
			events := 0
			res, err := c.Run(context.Background(), clienttools.Rollout{
				Mode:    mode,
				Request: &protocol.CreateRequest{Model: sampler.ReplayPrefix + trace, Input: userInput("Audit the calc repository and fix what is broken.")},
				Funcs:   (&clienttools.Tools{Dir: dir}).Funcs(),
				OnEvent: func(protocol.Event) { events++ },
			})
			if err != nil {
				t.Errorf("%s: %v", mode, err)
				return
			}
			if res.Response.Status != protocol.ResponseCompleted {
				t.Errorf("%s: ended %s", mode, res.Response.Status)
			}
			o := outcome{text: res.Text(), tree: treeHash(t, dir)}
			for _, call := range res.Calls {
				o.calls = append(o.calls, callKey{call.Name, call.Arguments})
				if call.Err != nil {
					t.Errorf("%s: %s %s: %v", mode, call.Name, call.Arguments, call.Err)
				}
			}
			if len(res.Calls) > 0 {
				o.last = res.Calls[len(res.Calls)-1]
			}
			got[i] = o
			o.turns = len(res.Turns)
			for _, tn := range res.Turns {
				// Cached tokens differ with the order the modes ran in:
				// they share the server's prefix cache.
				o.usage = append(o.usage, protocol.Usage{InputTokens: tn.Usage.InputTokens, OutputTokens: tn.Usage.OutputTokens})
			}
			got[i] = o
			if events == 0 || res.Usage.InputTokens == 0 {
				t.Errorf("%s: %d turns, %d events, usage %+v", mode, len(res.Turns), events, res.Usage)
			}
			t.Logf("%s: %d calls, %d turns, %v, %d tokens in", mode, len(res.Calls), len(res.Turns), res.Elapsed.Round(time.Millisecond), res.Usage.InputTokens)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ref := got[0]
	// A pause hibernates a nanosecond after its response.done, unless its
	// append comes first: on a loaded machine the timer's goroutine can
	// wait longer than the client's tools take (33 of 35 pauses once, with
	// a CI run beside it). Most pauses hibernating is the point: each
	// append then wakes the rollout from its checkpoint.
	if n := released.n.Load(); n < int64(ref.turns)/2 {
		t.Errorf("the checkpointed rollout hibernated %d times in %d turns: want most of its pauses", n, ref.turns)
	}
	if len(ref.calls) != 50 {
		t.Fatalf("suspend made %d calls, want the trace's 50", len(ref.calls))
	}
	if !strings.Contains(ref.text, "Summary") {
		t.Errorf("final answer %.200q", ref.text)
	}
	// The trace's last call runs the repository's checks.
	if ref.last.Name != "shell" || !strings.Contains(ref.last.Output, "--- PASS") || strings.Contains(ref.last.Output, "FAIL") {
		t.Errorf("the last check did not pass: %.2000s", ref.last.Output)
	}
	if treeHash(t, fixtureRepo) == ref.tree {
		t.Error("the rollout left the repository unchanged")
	}
	for i, o := range got[1:] {
		mode := name(i + 1)
		if !slices.Equal(o.calls, ref.calls) {
			t.Errorf("%s: calls differ from suspend's", mode)
		}
		if o.text != ref.text {
			t.Errorf("%s: final answer differs from suspend's", mode)
		}
		if o.turns != ref.turns {
			t.Errorf("%s: %d turns, suspend %d (pauses and the end)", mode, o.turns, ref.turns)
		}
		if o.tree != ref.tree {
			t.Errorf("%s: the repository ended in another state than suspend's", mode)
		}
	}
	// Inject is suspend in the multi-agent beta's dialect: each wait's
	// response.waiting tells the turn's usage as each pause's
	// response.done does.
	if inject := got[slices.Index(modes, clienttools.ModeInject)]; !slices.Equal(inject.usage, ref.usage) {
		t.Errorf("inject's turns used %v, suspend's %v", inject.usage, ref.usage)
	}
}

// TestRunTools: a step's calls run concurrently up to MaxParallel; a tool's
// error and a tool's panic become outputs the model reads; an unknown tool
// too; OnEvent sees every event once, in order.
func TestRunTools(t *testing.T) {
	t.Parallel()
	base := server(t, runtime.Options{})
	for _, mode := range clienttools.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			// a and b meet: they must run at once.
			meet := make(chan struct{})
			funcs := []clienttools.Func{
				{Name: "a", Parameters: []byte(`{"type":"object"}`), Run: func(ctx context.Context, _ string) (string, error) {
					select {
					case meet <- struct{}{}:
					case <-ctx.Done():
					}
					return "", errors.New("disk full")
				}},
				{Name: "b", Parameters: []byte(`{"type":"object"}`), Run: func(ctx context.Context, _ string) (string, error) {
					select {
					case <-meet:
					case <-ctx.Done():
					}
					panic("b is broken")
				}},
			}
			next := 0 // the sequence_number the next event must have
			c := &clienttools.Client{BaseURL: base, MaxParallel: 2}
			res, err := c.Run(context.Background(), clienttools.Rollout{
				Mode:    mode,
				Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput("Go.\ncall: a {} | b {}\ncall: c {}")},
				Funcs:   funcs,
				OnEvent: func(ev protocol.Event) {
					h := protocol.Header(ev)
					if h.SequenceNumber == 0 && h.Type == protocol.EventCreated {
						next = 0 // a new response
					}
					if h.SequenceNumber != next {
						t.Errorf("event %s seq %d, want %d", h.Type, h.SequenceNumber, next)
					}
					next = h.SequenceNumber + 1
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var outs []string
			for _, call := range res.Calls {
				outs = append(outs, call.Name+": "+call.Output+errString(call.Err))
			}
			want := []string{"a: error disk full", "b: error tool b panicked: b is broken", `c: error unknown tool "c"`}
			if !slices.Equal(outs, want) {
				t.Fatalf("calls %q, want %q", outs, want)
			}
			if text := res.Text(); !strings.Contains(text, `unknown tool \"c\"`) && !strings.Contains(text, `unknown tool "c"`) {
				t.Errorf("the model did not read the last error: %q", text)
			}
			// Each turn's usage is its own step's; together they are the rollout's.
			var sum protocol.Usage
			for i, turn := range res.Turns {
				if turn.Usage.OutputTokens == 0 || turn.Usage.InputTokens == 0 {
					t.Errorf("turn %d: usage %+v", i, turn.Usage)
				}
				sum.Add(turn.Usage)
			}
			if sum != res.Usage {
				t.Errorf("turns' usage sums to %+v, the rollout's is %+v", sum, res.Usage)
			}
		})
	}
}

// TestRunEvents: with Events, OnEvent sees those types only, and the
// rollout reads as it does when every event is decoded: its calls, its
// text, its usage turn by turn.
func TestRunEvents(t *testing.T) {
	t.Parallel()
	base := server(t, runtime.Options{})
	input := "Go.\ncall: a {\"x\":1} | a {\"x\":2}\ncall: a {}"
	for _, mode := range clienttools.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			funcs := []clienttools.Func{{Name: "a", Parameters: []byte(`{"type":"object"}`),
				Run: func(_ context.Context, args string) (string, error) { return "got " + args, nil }}}
			// The deltas' text, by type: how many deltas carry it varies
			// (a client behind gets them merged), the text does not.
			run := func(events []protocol.EventType) (*clienttools.Result, map[protocol.EventType]int, map[protocol.EventType]string) {
				seen, text := map[protocol.EventType]int{}, map[protocol.EventType]string{}
				c := &clienttools.Client{BaseURL: base}
				res, err := c.Run(context.Background(), clienttools.Rollout{
					Mode: mode, Funcs: funcs, Events: events,
					Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput(input)},
					OnEvent: func(ev protocol.Event) {
						seen[protocol.Type(ev)]++
						switch ev := ev.(type) {
						case *protocol.TextDeltaEvent:
							text[ev.Type] += ev.Delta
						case *protocol.FunctionArgsDeltaEvent:
							text[ev.Type] += ev.Delta
						}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				return res, seen, text
			}
			all, seenAll, textAll := run(nil)
			some, seenSome, textSome := run([]protocol.EventType{protocol.EventOutputTextDelta, protocol.EventFunctionArgsDelta})
			for typ := range seenSome {
				if typ != protocol.EventOutputTextDelta && typ != protocol.EventFunctionArgsDelta {
					t.Errorf("OnEvent saw %s, not asked for", typ)
				}
			}
			if textSome[protocol.EventFunctionArgsDelta] == "" || textSome[protocol.EventFunctionArgsDelta] != textAll[protocol.EventFunctionArgsDelta] ||
				textSome[protocol.EventOutputTextDelta] != textAll[protocol.EventOutputTextDelta] {
				t.Errorf("deltas' text seen %q, with every event decoded %q", textSome, textAll)
			}
			if seenAll[protocol.EventInProgress] == 0 || seenAll[protocol.EventContentPartAdded] == 0 {
				t.Errorf("without Events, OnEvent saw %v", seenAll)
			}
			key := func(res *clienttools.Result) string {
				var b strings.Builder
				for _, c := range res.Calls {
					fmt.Fprintf(&b, "%s %s -> %s\n", c.Name, c.Arguments, c.Output)
				}
				fmt.Fprintf(&b, "%q %d turns %d output items", res.Text(), len(res.Turns), len(res.Output))
				return b.String()
			}
			// The second run finds the first's prompts in the server's
			// prefix cache: cached tokens differ, nothing else.
			uncached := func(u protocol.Usage) protocol.Usage { u.InputTokensDetails.CachedTokens = 0; return u }
			if key(some) != key(all) || uncached(some.Usage) != uncached(all.Usage) || some.Response.Status != protocol.ResponseCompleted {
				t.Errorf("with Events:\n%s\n%+v\nwith every event:\n%s\n%+v", key(some), some.Usage, key(all), all.Usage)
			}
			for i := range some.Turns {
				if uncached(some.Turns[i].Usage) != uncached(all.Turns[i].Usage) {
					t.Errorf("turn %d: usage %+v, with every event %+v", i, some.Turns[i].Usage, all.Turns[i].Usage)
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "error " + err.Error()
}

// TestRunEager: with Eager, a client call starts when its function_call
// item is done, while the step's next call still streams its arguments;
// without it, when the step has paused or the turn has ended.
func TestRunEager(t *testing.T) {
	t.Parallel()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	// b's arguments stream for about half a second after a's item is done.
	base := server(t, runtime.Options{Models: map[string]runtime.Sampler{"paced": sampler.NewScripted(r, sampler.Timing{TPS: 200})}})
	long := strings.Repeat("stream ", 100)
	for _, mode := range []clienttools.Mode{clienttools.ModeSuspend, clienttools.ModeTurns, clienttools.ModeChained} {
		for _, eager := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/eager=%v", mode, eager), func(t *testing.T) {
				t.Parallel()
				echo := func(_ context.Context, args string) (string, error) { return "ok", nil }
				c := &clienttools.Client{BaseURL: base, Eager: eager}
				res, err := c.Run(context.Background(), clienttools.Rollout{
					Mode:    mode,
					Request: &protocol.CreateRequest{Model: "paced", Input: userInput(`Go.` + "\n" + `call: a {} | b {"text":"` + long + `"}`)},
					Funcs: []clienttools.Func{
						{Name: "a", Parameters: []byte(`{"type":"object"}`), Run: echo},
						{Name: "b", Parameters: []byte(`{"type":"object"}`), Run: echo},
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				a, turn := res.Calls[0], res.Turns[0]
				stepEnd := turn.Start.Add(turn.FirstEvent + turn.Stream)
				if a.Name != "a" || a.Eager != eager {
					t.Fatalf("first call %+v", a)
				}
				if early := a.Start.Before(stepEnd); early != eager {
					t.Errorf("a started %v before the step ended, eager %v", stepEnd.Sub(a.Start), eager)
				}
			})
		}
	}
}

// TestRunTurnsAgeLimit: when a connection reaches its age limit, the turn
// refused with websocket_connection_limit_reached is sent again on a new
// connection with the whole context, and the rollout goes on as before.
func TestRunTurnsAgeLimit(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // nanoseconds the server's clock is ahead
	start := time.Now()
	// The slow-client check reads the same clock: a frame in flight as it
	// jumps two hours must not read as two hours behind.
	base := server(t, runtime.Options{Now: func() time.Time { return start.Add(time.Duration(offset.Load())) },
		Timeouts: runtime.Timeouts{WSMaxAge: time.Hour, SlowClient: 3 * time.Hour}})
	input := "Fix it.\ncall: read_file {\"path\":\"a.go\"}\ncall: grep {\"pattern\":\"x\"}\ncall: read_file {\"path\":\"b.go\"}"
	echo := func(_ context.Context, args string) (string, error) { return "ok " + args, nil }
	funcs := []clienttools.Func{
		{Name: "read_file", Parameters: []byte(`{"type":"object"}`), Run: echo},
		{Name: "grep", Parameters: []byte(`{"type":"object"}`), Run: echo},
	}
	run := func(onEvent func(protocol.Event)) *clienttools.Result {
		c := &clienttools.Client{BaseURL: base}
		res, err := c.Run(context.Background(), clienttools.Rollout{Mode: clienttools.ModeTurns,
			Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput(input)}, Funcs: funcs, OnEvent: onEvent})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := run(nil)
	got := run(func(ev protocol.Event) {
		if protocol.Type(ev) == protocol.EventCompleted {
			offset.Store(int64(2 * time.Hour)) // the first connection is now past its age
		}
	})
	if got.Reconnects != 1 {
		t.Errorf("%d reconnects, want 1", got.Reconnects)
	}
	if !slices.Equal(rolloutKey(t, got), rolloutKey(t, want)) || got.Text() != want.Text() {
		t.Errorf("rollout past the age limit\n%q\nwant\n%q", rolloutKey(t, got), rolloutKey(t, want))
	}
}

// TestRunRefused: a request the server refuses ends Run, in every mode, with
// an error that carries the server's code and param.
func TestRunRefused(t *testing.T) {
	t.Parallel()
	base := server(t, runtime.Options{})
	for _, mode := range clienttools.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			c := &clienttools.Client{BaseURL: base}
			_, err := c.Run(t.Context(), clienttools.Rollout{Mode: mode,
				Request: &protocol.CreateRequest{Model: "no-such-model", Input: userInput("Hello")}})
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeModelNotFound || pe.Param != "model" {
				t.Fatalf("err = %v, want a *protocol.Error %s (model)", err, protocol.CodeModelNotFound)
			}
		})
	}
}

// TestRunWires runs the 24-call replay trace with instant recorded tools
// in both connection designs over WebSocket and WebTransport, with JSON and
// with msgpack frames: the same calls, outputs, answer and events either
// way, and fewer bytes received with msgpack. The server transcodes in its
// writer, so a suspended rollout's frames are the same objects in either
// encoding.
func TestRunWires(t *testing.T) {
	t.Parallel()
	base, wt := serverWT(t, runtime.Options{}, true)
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	var tr *sampler.Trace
	for _, x := range traces {
		if x.Name == "calc-fix-24" {
			tr = x
		}
	}
	answers := map[callKey][]string{}
	for _, s := range tr.Steps {
		for _, c := range s.Calls {
			answers[callKey{c.Name, c.Arguments}] = append(answers[callKey{c.Name, c.Arguments}], c.Output)
		}
	}
	run := func(mode clienttools.Mode, tp clienttools.Transport, enc protocol.Encoding) (calls []callKey, text string, received int, types []protocol.EventType) {
		left := maps.Clone(answers)
		var mu sync.Mutex
		var funcs []clienttools.Func
		for _, f := range (&clienttools.Tools{}).Funcs() {
			f.Run = func(ctx context.Context, args string) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				k := callKey{f.Name, args}
				out := left[k][0]
				left[k] = left[k][1:]
				return out, nil
			}
			funcs = append(funcs, f)
		}
		c := &clienttools.Client{BaseURL: base, Encoding: enc}
		if tp == clienttools.TransportWebTransport {
			c = &clienttools.Client{BaseURL: wt.base, CertHash: wt.hash, Transport: tp, Encoding: enc}
		}
		res, err := c.Run(t.Context(), clienttools.Rollout{Mode: mode, Funcs: funcs,
			Request: &protocol.CreateRequest{Model: sampler.ReplayPrefix + tr.Name, Input: userInput(tr.Task)},
			OnEvent: func(ev protocol.Event) {
				if !strings.HasSuffix(string(protocol.Type(ev)), ".delta") { // merged as the client keeps up or not
					types = append(types, protocol.Type(ev))
				}
			}})
		if err != nil {
			t.Fatalf("%s over %s+%s: %v", mode, tp, enc, err)
		}
		for _, call := range res.Calls {
			calls = append(calls, callKey{call.Name, call.Arguments})
		}
		for _, tn := range res.Turns {
			received += tn.BytesReceived
		}
		return calls, res.Text(), received, types
	}
	for _, mode := range []clienttools.Mode{clienttools.ModeSuspend, clienttools.ModeTurns} {
		wsCalls, wsText, _, wsTypes := run(mode, clienttools.TransportWebSocket, protocol.EncodingJSON)
		if len(wsCalls) != 24 {
			t.Fatalf("%s: %d calls, want 24", mode, len(wsCalls))
		}
		for _, tp := range []clienttools.Transport{clienttools.TransportWebSocket, clienttools.TransportWebTransport} {
			jsCalls, jsText, jsBytes, jsTypes := run(mode, tp, protocol.EncodingJSON)
			mpCalls, mpText, mpBytes, mpTypes := run(mode, tp, protocol.EncodingMsgpack)
			for _, got := range []struct {
				enc   protocol.Encoding
				calls []callKey
				text  string
				types []protocol.EventType
			}{{protocol.EncodingJSON, jsCalls, jsText, jsTypes}, {protocol.EncodingMsgpack, mpCalls, mpText, mpTypes}} {
				if !slices.Equal(got.calls, wsCalls) || got.text != wsText || !slices.Equal(got.types, wsTypes) {
					t.Errorf("%s over %s+%s: %d calls and %d events besides deltas, WebSocket+JSON %d and %d; answers equal: %v",
						mode, tp, got.enc, len(got.calls), len(got.types), len(wsCalls), len(wsTypes), got.text == wsText)
				}
			}
			if mpBytes >= jsBytes {
				t.Errorf("%s over %s: received %d bytes of msgpack, %d of JSON", mode, tp, mpBytes, jsBytes)
			}
			t.Logf("%s over %s: %d bytes received as JSON, %d as msgpack", mode, tp, jsBytes, mpBytes)
		}
	}
}

// releaseCounter counts the responses that left their server for their
// checkpoint (runtime.StatusReleased): hibernations, here.
type releaseCounter struct{ n atomic.Int64 }

func (*releaseCounter) StepSampled(time.Duration, time.Duration)  {}
func (*releaseCounter) StepDispatched(time.Duration)              {}
func (*releaseCounter) Paused()                                   {}
func (*releaseCounter) FrameWritten(time.Duration, time.Duration) {}

func (c *releaseCounter) ResponseEnded(_ runtime.ServePath, status protocol.ResponseStatus, _ protocol.Timings) {
	if status == runtime.StatusReleased {
		c.n.Add(1)
	}
}

// TestRunTree: the kit runs a multi-agent response whose root spawns two
// sub-agents in each of its three forms. In inject mode it answers each
// agent's wait (response.waiting, naming the agent) with one inject; its
// turns are the create's, each sub-agent's first run (to its wait) and
// each inject's. Over HTTP (chained, background, stateless) the first
// response completes on both agents' calls, and the next requests bring
// their outputs. In each, the turns' usage adds up to the rollout's, the
// calls are the same (each agent's, by name, with ids of their own) and so
// is the answer, and the two sub-agents' calls run at once: each tool
// waits for the other to start, which a client running one agent's calls
// after the other's would never see.
func TestRunTree(t *testing.T) {
	t.Parallel()
	base := server(t, runtime.Options{})
	script := "Split the work.\n" +
		`spawn: a {"message": "call: grep {}"} | b {"message": "call: list_dir {}"}` + "\nwait: a, b\n"
	var answer string
	var calls []string
	for _, mode := range []clienttools.Mode{clienttools.ModeInject, clienttools.ModeChained, clienttools.ModeBackground, clienttools.ModeStateless} {
		var started sync.WaitGroup
		started.Add(2)
		both := make(chan struct{})
		go func() { started.Wait(); close(both) }()
		tool := func(name string) clienttools.Func {
			return clienttools.Func{Name: name, Parameters: []byte(`{"type":"object"}`),
				Run: func(ctx context.Context, _ string) (string, error) {
					started.Done()
					select {
					case <-both:
						return name + " done", nil
					case <-time.After(time.Minute):
						return "", errors.New("the other agent's call never started while this one ran")
					}
				}}
		}
		res, err := (&clienttools.Client{BaseURL: base}).Run(t.Context(), clienttools.Rollout{Mode: mode,
			Request: &protocol.CreateRequest{Model: "tether-scripted", Input: userInput(script), MultiAgent: &protocol.MultiAgent{Enabled: new(true)}},
			Funcs:   []clienttools.Func{tool("grep"), tool("list_dir")}})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		// Over HTTP both outputs go in the second request, or (one agent's
		// calls in before the other's) one each in the second and third.
		turns := map[clienttools.Mode][]int{clienttools.ModeInject: {5}, clienttools.ModeChained: {2, 3}, clienttools.ModeBackground: {2, 3}, clienttools.ModeStateless: {2, 3}}[mode]
		if res.Response.Status != protocol.ResponseCompleted || len(res.Calls) != 2 || !slices.Contains(turns, len(res.Turns)) {
			t.Fatalf("%s: %s after %d calls in %d turns; want completed, 2 calls, %v turns", mode, res.Response.Status, len(res.Calls), len(res.Turns), turns)
		}
		var sum protocol.Usage
		for _, tn := range res.Turns {
			sum.Add(tn.Usage)
		}
		if sum != res.Usage {
			t.Errorf("%s: the turns' usage adds up to %+v, the rollout's is %+v", mode, sum, res.Usage)
		}
		// The calls, by agent and name: their ids differ from one form to
		// the next (each response draws its own), and must be distinct.
		var ids []string
		seen := map[string]bool{}
		for _, c := range res.Calls {
			ids = append(ids, c.Agent+" "+c.Name)
			if c.CallID == "" || seen[c.CallID] {
				t.Errorf("%s: call id %q twice or empty", mode, c.CallID)
			}
			seen[c.CallID] = true
		}
		slices.Sort(ids)
		if strings.Contains(res.Text(), "never started") || !strings.HasPrefix(res.Text(), "/root/a said: ") {
			t.Errorf("%s: answer %q", mode, res.Text())
		}
		if answer == "" {
			answer, calls = res.Text(), ids
		} else if res.Text() != answer || !slices.Equal(ids, calls) {
			t.Errorf("%s: calls %q, answer %q; inject's %q, %q", mode, ids, res.Text(), calls, answer)
		}
	}
}
