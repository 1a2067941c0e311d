package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/prommetrics"
	"github.com/tether-run/tether/sampler"
)

// These tests build each Go example and run it as a user would, with -url
// pointing at an in-process tether on loopback (the scripted model, the
// replay traces unpaced, web_search over the embedded corpus), and check
// its exit code and output. The Node example runs when node and its
// node_modules are there.

// goExamples are the Go examples, by directory.
var goExamples = []string{"minimal", "websearch", "compare", "openai-go", "browser", "fork"}

// untilDeadline is t's context, ended a little before the test binary's
// deadline (-timeout), with room left to report and clean up. A program a
// test runs gets that long, not a fixed time: on a cold machine, with other
// packages' tests beside it, Chromium's first start and the go test runs
// of a replayed rollout take minutes; a warm run finishes long before.
// reportRoom is what a test keeps of the test binary's deadline to print
// what the program wrote and shut its servers down.
const reportRoom = 30 * time.Second

func untilDeadline(t *testing.T) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(t.Context(), d.Add(-reportRoom))
	}
	return context.WithCancel(t.Context())
}

var binDir string // where build puts the examples' binaries; removed by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tether-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if index.ix != nil {
		index.ix.Close()
	}
	// No test leaves a goroutine behind: servers are shut down, examples
	// waited for. bleve's analysis workers live for the whole process.
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// build builds every Go example, and tether for the tests that run it as
// a user would (binary(t, "tether")), once, with one go command, into
// binDir.
var build = sync.OnceValue(func() error {
	args := []string{"build", "-o", binDir + string(filepath.Separator), "./cmd/tether"}
	for _, name := range goExamples {
		args = append(args, "./examples/"+name)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ".." // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
})

// binary is the path of the built example name.
func binary(t *testing.T, name string) string {
	t.Helper()
	if err := build(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(binDir, filepath.Base(name))
}

var sharedRenderer = sync.OnceValues(sampler.NewRenderer)

// index is the web_search index of the embedded corpus, built once (it
// takes seconds under -race) and closed by TestMain.
var index struct {
	once sync.Once
	ix   *websearch.Index
	err  error
}

func sharedIndex() (*websearch.Index, error) {
	index.once.Do(func() {
		docs, err := websearch.DefaultCorpus()
		if err != nil {
			index.err = err
			return
		}
		index.ix, index.err = websearch.NewIndex(docs)
	})
	return index.ix, index.err
}

// serve starts a tether as `tether serve` configures it, unpaced, and
// returns its base URL.
func serve(t *testing.T) string {
	t.Helper()
	return serveTiming(t, sampler.Timing{})
}

// serveTiming is serve with the models paced by timing.
func serveTiming(t *testing.T, timing sampler.Timing) string {
	t.Helper()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := sharedIndex()
	if err != nil {
		t.Fatal(err)
	}
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, timing)}
	for _, tr := range traces {
		models[sampler.ReplayPrefix+tr.Name] = sampler.NewReplay(r, timing, tr)
	}
	metrics := prommetrics.New() // wantPaths reads /metrics
	srv, err := runtime.NewServer(runtime.Options{Models: models, Renderer: r, Observer: metrics,
		HostedTools: []runtime.Tool{websearch.New(ix)}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("GET /metrics", metrics.Handler())
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	return hs.URL + "/v1"
}

// run runs a program from dir and returns its stdout, its stderr and its
// exit code.
func run(t *testing.T, dir string, env []string, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := untilDeadline(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, &out, &errb)
	}
	t.Logf("%s %s (exit %d)\n%s%s", filepath.Base(name), strings.Join(args, " "), code, &out, &errb)
	return out.String(), errb.String(), code
}

// runOK runs an example that must succeed and returns its stdout.
func runOK(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	stdout, stderr, code := run(t, dir, env, name, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	return stdout
}

// wantLines checks that out has a line matching each pattern, in order.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	i := 0
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for i < len(lines) && !re.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			t.Errorf("no line matching %q (after the lines matched before it) in:\n%s", p, out)
			return
		}
		i++
	}
}

// TestMinimal: minimal asks for the word counts of two sentences, and its
// answer reports both: the model counts them in one step of two calls,
// which the client runs and answers with one append.
func TestMinimal(t *testing.T) {
	t.Parallel()
	out := runOK(t, ".", nil, binary(t, "minimal"), "-url", serve(t))
	wantLines(t, out,
		`^call  word_count \{"text":"The quick brown fox jumps over the lazy dog"\} -> "9" \(`,
		`^call  word_count \{"text":"Suspended rollouts pause on client tools"\} -> "6" \(`,
		`^answer "word_count returned: 9; word_count returned: 6"$`,
		`^response resp_\w+ completed: 2 turns, 2 calls, \d+\+\d+ tokens, `,
		`^turn 0: first event \S+, stream \S+, tools \S+, 2 calls, \d+ B sent, \d+ B received$`,
		`^turn 1: .*, 0 calls, `,
	)
}

func TestWebsearch(t *testing.T) {
	t.Parallel()
	out := runOK(t, ".", nil, binary(t, "websearch"), "-url", serve(t))
	wantLines(t, out,
		`response\.web_search_call\.in_progress ws_\w+$`,
		`response\.web_search_call\.searching ws_\w+$`,
		`response\.web_search_call\.completed ws_\w+$`,
		`web_search "http server graceful shutdown": [1-9]\d* sources$`,
		`^\s+https://pkg\.go\.dev/net/http#Server  net/http\.Server`, // the embedded Go docs

	)
	wantLines(t, out,
		`response\.done: paused for 1 client call\(s\)$`,
		`client call save_note \{"text":"look up Server\.Shutdown"\} -> "saved note 1"$`,
		`response\.web_search_call\.in_progress ws_\w+$`,
		`response\.web_search_call\.completed ws_\w+$`,
		`web_search "Server Shutdown context deadline": [1-9]\d* sources$`,
		`^answer "save_note returned: saved note 1; searching for .* \[url_citation https://pkg\.go\.dev/context`,
		`^response resp_\w+ completed: 2 turns, 1 client calls, notes \["look up Server\.Shutdown"\], `,
	)
}

func TestCompare(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: compare runs a 12-call rollout with real go test runs in each of six designs")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the replayed rollout runs go test in the repository: go is not on PATH")
	}
	out := runOK(t, ".", nil, binary(t, "compare"), "-url", serve(t), "-repo", "../sampler/traces/repo")
	header := regexp.MustCompile(`(?m)^mode\s+wall\s+model\s+tools\s+API overhead\s+turns\s+calls\s+sent \(kB\)\s+received \(kB\)\s+first event\s+summed$`)
	if !header.MatchString(out) {
		t.Errorf("no header naming the columns mode, wall, model, tools, API overhead, turns, calls, sent (kB), received (kB), first event, summed:\n%s", out)
	}
	row := regexp.MustCompile(`(?m)^(suspend|inject|turns|chained|background|stateless)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+\.\d)\s+(\d+\.\d)\s+(\S+)\s+(\S+)$`)
	sent := map[string]float64{}
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		mode := m[1]
		if m[6] != "11" || m[7] != "12" {
			t.Errorf("%s: %s turns, %s calls; want the trace's 11 and 12", mode, m[6], m[7])
		}
		var d [5]time.Duration // wall, model, tools, API overhead, first event
		for i, s := range []string{m[2], m[3], m[4], m[5], m[10]} {
			var err error
			if d[i], err = time.ParseDuration(s); err != nil {
				t.Errorf("%s: %q is not a duration", mode, s)
			}
		}
		if _, err := time.ParseDuration(m[11]); err != nil {
			t.Errorf("%s: %q is not a duration", mode, m[11])
		}
		// The columns split the wall time (each rounded to the millisecond).
		if sum := d[1] + d[2] + d[3]; sum < d[0]-2*time.Millisecond || sum > d[0]+2*time.Millisecond || d[1] <= 0 {
			t.Errorf("%s: model %v + tools %v + API overhead %v is not the wall time %v", mode, d[1], d[2], d[3], d[0])
		}
		sent[mode], _ = strconv.ParseFloat(m[8], 64)
	}
	if len(sent) != 6 {
		t.Fatalf("%d mode rows, want 6:\n%s", len(sent), out)
	}
	// The baseline re-sends the whole history each turn; the suspended
	// rollout sends only the tool outputs.
	if !(sent["suspend"] < sent["turns"] && sent["inject"] < sent["turns"] && sent["turns"] < sent["stateless"]) {
		t.Errorf("bytes sent %v: want suspend and inject < turns < stateless", sent)
	}
}

// TestOpenAIGo: the official Go SDK runs the cached-state turns with its
// typed API and the suspended rollout through its raw escape hatches.
func TestOpenAIGo(t *testing.T) {
	t.Parallel()
	out := runOK(t, ".", nil, binary(t, "openai-go"), "-url", serve(t))
	wantSDKOutput(t, out)
}

// TestOpenAINode runs the openai-node example with the official npm
// package, when node and the example's node_modules are there (.ci/run
// installs them): the SDK examples' turns, then responses.inputTokens.count
// and a structured answer through responses.parse.
func TestOpenAINode(t *testing.T) {
	t.Parallel()
	out := runNodeExample(t, "openai-node", "openai")
	wantSDKOutput(t, out)
	wantLines(t, out, `^input tokens of the first turn's request: [1-9]\d* \(response\.input_tokens\)$`,
		`^parsed: `+weatherObject+`$`)
}

// TestOpenAINodeSteer runs examples/openai-node/steer.mjs: openai-node's
// ResponsesWS sends response.steer into a running response (which ends
// incomplete, "steered", and a successor that continues it answers the
// steering), into one that then completes on a
// call (pending after response.completed; the stubs filled and sent with
// previous_response_id), and into a parked suspended rollout (accepted and
// pending at once; the steering joins the context with the outputs). The
// model takes a second to its first token, so that each steer comes while
// its response runs.
func TestOpenAINodeSteer(t *testing.T) {
	t.Parallel()
	base := serveTiming(t, sampler.Timing{TTFT: time.Second, TPS: 200})
	out := runNodeScript(t, "openai-node", "openai", "steer.mjs", base)
	wantLines(t, out,
		`^running resp_\w+: accepted steer_\w+, incomplete \(steered\) with "You said: \\"Write a summary\.\\""; successor resp_\w+ continues it: true, answers "You said: \\"Focus on the parser\.\\""$`,
		`^on a call resp_\w+: accepted, completed, pending waiting_for_required_input \[function_call_output call_\w+ get_weather\]$`,
		`^continued resp_\w+: \[function_call\], input \[function_call_output message\]$`,
		`^parked resp_\w+: accepted and pending \[function_call_output call_\w+ get_weather\]; completed with the steering in its context: true$`,
	)
}

// TestAISDK runs the ai-sdk example with the real Vercel AI SDK (ai and
// @ai-sdk/openai), when node and the example's node_modules are there
// (.ci/run installs them): four chat turns with a function tool, the
// shell tool and web search, whose provider sends the earlier assistant,
// shell and web search items back as item_reference items by id (tether
// finds them in its store, and a shell call's output answers the call its
// reference stands for), then a structured answer.
func TestAISDK(t *testing.T) {
	t.Parallel()
	out := runNodeExample(t, "ai-sdk", "ai")
	wantLines(t, out,
		`^turn 1: \[get_weather\] "get_weather returned: Sunny, 21°C in Paris"$`,
		`^turn 2: \[shell\] "shell returned: sandbox: ls"$`,
		`^turn 3: \[web_search\] "searching for \\"read a file in Go\\" found .*os\.ReadFile`,
		`^turn 4: \[get_weather\] ".+"$`,
		`^structured: `+weatherObject+`$`,
	)
}

// TestAgentsJS runs the agents-js example with the real OpenAI Agents SDK
// for JavaScript: an agent with a tool and a structured final output
// (outputType), over HTTP and over the Responses WebSocket, each
// continued with a json: directive that sets the answer.
func TestAgentsJS(t *testing.T) {
	t.Parallel()
	out := runNodeExample(t, "agents-js", "@openai/agents")
	for _, transport := range []string{"http", "websocket"} {
		wantLines(t, out,
			`^`+transport+`: \[get_weather\] `+weatherObject+`$`,
			`^`+transport+` json: \{"city":"Oslo","temperature_c":-3,"conditions":"cloudy"\}$`,
		)
	}
}

// TestAgentsJSConversations runs three turns of an agent whose session is
// the Agents SDK's OpenAIConversationsSession, kept in tether's
// Conversations API: after each the session reads back all it holds, and
// tether's conversation holds each turn's message, call, output and answer
// in order; the last turn's request carried the two before it.
func TestAgentsJSConversations(t *testing.T) {
	t.Parallel()
	base := serve(t)
	out := runNodeScript(t, "agents-js", "@openai/agents", "conversations.mjs", base)
	wantLines(t, out,
		`^turn 1: \[get_weather\] items=4 "get_weather returned: Sunny, 21°C in Paris"$`,
		`^turn 2: \[get_weather\] items=8 "get_weather returned: Sunny, 21°C in Oslo"$`,
		`^turn 3: \[get_weather\] items=12 "get_weather returned: [^"]+"$`,
	)
	m := regexp.MustCompile(`(?m)^conversation (conv_\w+) last (resp_\w+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no conversation line in:\n%s", out)
	}
	types := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var list struct {
			Data []struct{ Type, Role, ID string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		var parts []string
		for _, it := range list.Data {
			if it.ID == "" {
				t.Errorf("GET %s: an item without an id", path)
			}
			parts = append(parts, strings.TrimSuffix(it.Type+"/"+it.Role, "/"))
		}
		return strings.Join(parts, " ")
	}
	turn := "message/user function_call function_call_output message/assistant"
	if got, want := types("/conversations/"+m[1]+"/items?order=asc&limit=100"), strings.Repeat(turn+" ", 3); got+" " != want {
		t.Errorf("the conversation's items:\n%s\nwant\n%s", got, want)
	}
	if got := types("/responses/" + m[2] + "/input_items?order=asc&limit=100"); !strings.HasPrefix(got, strings.Repeat(turn+" ", 2)+"message/user") {
		t.Errorf("the last turn's input: %s", got)
	}
}

// TestLangChain runs the langchain example with the real LangChain
// ChatOpenAI over the Responses API: a tool loop, then
// withStructuredOutput answered from the schema and set by a directive.
func TestLangChain(t *testing.T) {
	t.Parallel()
	out := runNodeExample(t, "langchain", "@langchain/openai")
	wantLines(t, out,
		`^tools: \[get_weather\] "get_weather returned: Sunny, 21°C in Lyon"$`,
		`^structured: \{"city":"[^"]+","conditions":"(sunny|cloudy|rain)","temperature_c":-?\d+\}$`,
		`^json: \{"city":"Rome","temperature_c":24,"conditions":"sunny"\}$`,
	)
}

// weatherObject is the structured answer the Node examples print: the
// JSON the scripted model makes from their weather schema.
const weatherObject = `\{"city":"[^"]+","temperature_c":-?\d+,"conditions":"(sunny|cloudy|rain)"\}`

// runNodeExample runs examples/dir/index.mjs against a tether of its own
// and returns its output; it skips without node, or without the npm
// package pkg installed in the example (.ci/run installs it).
func runNodeExample(t *testing.T, dir, pkg string) string {
	t.Helper()
	return runNodeScript(t, dir, pkg, "index.mjs", serve(t))
}

// runNodeScript runs examples/dir/script against the tether at base, as
// runNodeExample does.
func runNodeScript(t *testing.T, dir, pkg, script, base string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: skipping examples/" + dir)
	}
	if _, err := os.Stat(dir + "/node_modules/" + pkg + "/package.json"); err != nil {
		t.Skipf("examples/%s/node_modules/%s is missing: run npm ci in examples/%s", dir, pkg, dir)
	}
	return runOK(t, dir, []string{"TETHER_URL=" + base}, node, script)
}

// wantSDKOutput checks the output of the SDK examples: two chained turns,
// then one suspended response that pauses twice and completes.
func wantSDKOutput(t *testing.T, out string) {
	t.Helper()
	wantLines(t, out,
		`^turn 1 (resp_\w+): get_weather \{"location":"Paris"\} -> "Sunny, 21°C in Paris" \(`,
		`^turn 2 resp_\w+ \(previous resp_\w+\): "get_weather returned: Sunny, 21°C in Paris", \d+ input tokens \(\d+ cached\) \(`,
		`^suspended resp_\w+ paused at event \d+: get_weather \{"location":"Lyon"\} -> "Sunny, 21°C in Lyon" \(`,
		`^suspended resp_\w+ paused at event \d+: get_weather \{"location":"Oslo"\} -> "Sunny, 21°C in Oslo" \(`,
		`^suspended resp_\w+ completed after \d+ events in one response: "get_weather returned: Sunny, 21°C in Oslo" \(`,
	)
	turn1 := regexp.MustCompile(`(?m)^turn 1 (resp_\w+):`).FindStringSubmatch(out)
	turn2 := regexp.MustCompile(`(?m)^turn 2 resp_\w+ \(previous (resp_\w+)\)`).FindStringSubmatch(out)
	if turn1 == nil || turn2 == nil || turn1[1] != turn2[1] {
		t.Errorf("turn 2 does not continue turn 1")
	}
	// The pauses and the end are one response.
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^suspended (resp_\w+) `).FindAllStringSubmatch(out, -1) {
		ids[m[1]] = true
	}
	if len(ids) != 1 {
		t.Errorf("the suspended rollout spans %d responses, want 1", len(ids))
	}
}

// TestBadInput: a wrong flag value or an unreachable server ends an
// example with exit code 1 and a one-line message, not a panic.
func TestBadInput(t *testing.T) {
	t.Parallel()
	type badCase struct {
		example string
		args    []string
		want    string // in stderr
	}
	var cases []badCase
	for _, name := range goExamples {
		if name == "browser" { // a page server, which takes tether's WebTransport address: its cases follow
			continue
		}
		cases = append(cases,
			badCase{name, []string{"-url", "localhost:8080"}, ""},
			badCase{name, []string{"-url", "http://127.0.0.1:1/v1"}, "refused"},
		)
	}
	cases = append(cases,
		badCase{"compare", []string{"-url", "http://127.0.0.1:1/v1", "-repo", "no/such/dir"}, "-repo no/such/dir: not a directory"},
		badCase{"minimal", []string{"-url", serve(t) + "/nope"}, "/nope/responses: 404 Not Found"},
		badCase{"browser", []string{"-url", "https://127.0.0.1:8443/v1"}, "give -hash"},
		badCase{"browser", []string{"-url", "https://127.0.0.1:8443/v1", "-hash", "abc"}, "64 hex digits"},
		badCase{"browser", []string{"-url", "localhost:8443", "-hash", strings.Repeat("ab", 32)}, "want tether's WebTransport address"},
	)
	for _, c := range cases {
		t.Run(c.example+" "+strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			_, stderr, code := run(t, ".", nil, binary(t, c.example), c.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.HasPrefix(stderr, c.example+": ") || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "panic") {
				t.Errorf("stderr %q, want one line %q", stderr, c.example+": ...")
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q does not say %q", stderr, c.want)
			}
		})
	}
}

// TestForkExample: the best-of-4 search forks its parked rollout four ways,
// every fork parks on the same call and answers with its own output, the
// best is picked, and the original is cancelled.
func TestForkExample(t *testing.T) {
	t.Parallel()
	out := runOK(t, ".", nil, binary(t, "fork"), "-url", serve(t))
	wantLines(t, out,
		`^rollout resp_\w+ parked on call_\w+$`,
		`^fork resp_\w+ on b\d parked on the same call`,
		`^fork on b\d answered: read_config returned: timeout`,
		`^best: b3 \(resp_\w+\)$`,
		`^rollout resp_\w+ cancelled$`,
	)
	if n := strings.Count(out, "parked on the same call"); n != 4 {
		t.Errorf("%d forks parked, want 4:\n%s", n, out)
	}
}
