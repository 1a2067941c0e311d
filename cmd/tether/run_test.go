package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// scriptedTask makes the scripted model call shell twice, a step each, with
// a command that takes a moment: the spinner has time to draw.
const scriptedTask = "Look around.\ncall: shell {\"command\":\"sleep 0.3; echo hello > hello.txt\"}\ncall: read_file {\"path\":\"hello.txt\"}"

// TestRunPlain: "tether run" on a writer that is not a terminal prints plain
// lines, without a control code, and a summary; the tools really ran in the
// work directory.
func TestRunPlain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--model", "tether-scripted", "--mode", "turns", "--workdir", dir, "--ttft", "0", "--tps", "0", scriptedTask}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\r") {
		t.Errorf("control codes in plain output: %q", s)
	}
	for _, want := range []string{"call shell {\"command\":\"sleep 0.3; echo hello > hello.txt\"}", "call read_file {\"path\":\"hello.txt\"}", "completed in", "2 tool calls", "time: model"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(data) != "hello\n" {
		t.Errorf("the shell call did not run in the workdir: %q, %v", data, err)
	}
}

// TestRunAgents: --agents splits the default replay trace's calls between
// sub-agents of a scripted root, in inject mode unless another is given;
// each call's line names its agent, the root answers from what they said,
// and a design a tree does not run in is refused.
func TestRunAgents(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "stateless"} {
		args := []string{"run", "--agents", "2", "--ttft", "0", "--tps", "0"}
		if mode != "" {
			args = append(args, "--mode", mode)
		}
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out.String(), errOut.String())
		}
		s := out.String()
		for _, want := range []string{"/root/helper_1 call ", "/root/helper_2 call ", "assistant: /root/helper_1 said: ", "completed in", "(" + cmp.Or(mode, "inject") + ", tether-scripted)"} {
			if !strings.Contains(s, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, s)
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"run", "--agents", "2", "--mode", "suspend"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--mode inject, chained, background or stateless") {
		t.Errorf("--mode suspend: exit %d: %s", code, errOut.String())
	}
}

// TestRunJSON: --json prints every event as a JSON line, then a summary.
func TestRunJSON(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--json", "--model", "tether-scripted", "--workdir", t.TempDir(), "--tps", "0", "--ttft", "0", scriptedTask}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var last map[string]any
	for _, l := range lines {
		last = nil
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
	}
	if last["type"] != "tether.summary" || last["status"] != "completed" || last["tool_calls"] != 2.0 {
		t.Errorf("summary %v", last)
	}
	if len(lines) < 20 {
		t.Errorf("%d lines: want every event", len(lines))
	}
}

// TestRunTerminal runs "tether run" with a pseudo-terminal as its output,
// in both WebSocket designs: the live view draws its spinner and styled
// call lines, and streams the model's text (on a terminal a message's text
// is printed only from its deltas, as they come).
func TestRunTerminal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"suspend", "turns"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Skipf("no pseudo-terminal here: %v", err)
			}
			defer ptmx.Close()
			var screen bytes.Buffer
			read := make(chan struct{})
			go func() { defer close(read); io.Copy(&screen, ptmx) }()
			var errOut bytes.Buffer
			code := run(context.Background(), []string{"run", "--mode", mode, "--model", "tether-scripted", "--workdir", t.TempDir(), "--ttft", "300ms", "--tps", "200", scriptedTask}, tty, &errOut)
			tty.Close()
			<-read
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			s := screen.String()
			for _, want := range []string{"\r\x1b[2K", "waiting for the model…", "running tools…", "\x1b[36m▸ shell\x1b[0m", "read_file returned: 1 hello", "completed in"} {
				if !strings.Contains(s, want) {
					t.Errorf("the terminal shows no %q:\n%q", want, s)
				}
			}
			if !strings.ContainsAny(s, string(spinnerFrames)) {
				t.Errorf("no spinner frame drawn: %q", s)
			}
		})
	}
}

// TestRunReplayDefaults: "tether run --model replay:calc-fix-12" needs
// nothing else: the task is the trace's, the tools act on a new copy of the
// fixture repository, and the rollout leaves it fixed, its tests passing.
func TestRunReplayDefaults(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--model", "replay:calc-fix-12", "--tps", "0", "--ttft", "0", "--keep"}, &out, &errOut)
	s := out.String()
	_, dir, ok := strings.Cut(s, "\nworkdir: ")
	dir = strings.TrimSpace(dir)
	if ok && strings.HasPrefix(dir, os.TempDir()) {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	if code != 0 || !ok {
		t.Fatalf("exit %d: %s%s", code, s, errOut.String())
	}
	if want := "kept the workdir " + dir; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q: %s", want, errOut.String())
	}
	if !strings.Contains(s, "completed in") || !strings.Contains(s, "12 tool calls") {
		t.Errorf("output:\n%s", s)
	}
	parser, err := os.ReadFile(filepath.Join(dir, "parser.go"))
	if err != nil || !bytes.Contains(parser, []byte("rightAssoc")) {
		t.Fatalf("parser.go in %s: %v", dir, err)
	}
	// The trace's own last check ran in the copy: its call line says it passed.
	if !strings.Contains(s, `call shell {"command":"gofmt -l . && go vet ./... && go test -count=1 -v ./..."}`) {
		t.Errorf("no final check in:\n%s", s)
	}
}

// TestRunRemovesFixtureCopy: the copy of the fixture repository a run
// makes when --workdir is empty is gone when the run ends, whether it
// completed or failed, and its summary does not name it; --keep keeps it
// and says where. A run that failed before anything ran sums up nothing.
func TestRunRemovesFixtureCopy(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		keep     bool
	}{
		{"completed", []string{"--model", "tether-scripted", "--ttft", "0", "--tps", "0", scriptedTask}, 0, false},
		{"failed", []string{"--url", "http://127.0.0.1:1/v1", "--model", "tether-scripted", scriptedTask}, 1, false},
		{"kept", []string{"--keep", "--model", "tether-scripted", "--ttft", "0", "--tps", "0", scriptedTask}, 0, true},
	} {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"run"}, tc.args...), &out, &errOut)
		if code != tc.wantCode {
			t.Fatalf("%s: exit %d, want %d: %s%s", tc.name, code, tc.wantCode, out.String(), errOut.String())
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		// The summary names no workdir it removed, and after a failure
		// before anything ran, no figures.
		if s := out.String(); strings.Contains(s, "workdir: ") != tc.keep || tc.wantCode != 0 && strings.Contains(s, "tokens: ") {
			t.Errorf("%s: summary:\n%s", tc.name, s)
		}
		if !tc.keep {
			if len(left) != 0 {
				t.Errorf("%s: the run left %v in $TMPDIR", tc.name, left)
			}
			continue
		}
		if len(left) != 1 {
			t.Fatalf("%s: $TMPDIR holds %v, want the kept workdir", tc.name, left)
		}
		kept := filepath.Join(tmp, left[0].Name())
		if want := "kept the workdir " + kept; !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: stderr lacks %q: %s", tc.name, want, errOut.String())
		}
		if _, err := os.Stat(filepath.Join(kept, "hello.txt")); err != nil {
			t.Errorf("%s: the kept workdir lacks the run's hello.txt: %v", tc.name, err)
		}
	}
}

// TestRunMCP: "tether run --mcp" offers an MCP server; the call asks for
// approval, which the run gives (or, with --mcp-deny, refuses), and shows.
func TestRunMCP(t *testing.T) {
	t.Parallel()
	url, _ := mcptest.HTTP(t)
	task := "Add.\ncall: calc.add {\"a\":40,\"b\":2}"
	for _, tc := range []struct {
		deny bool
		want []string
	}{
		{false, []string{"mcp calc: 5 tools", `approved mcp calc.add {"a":40,"b":2}`, `mcp calc.add {"a":40,"b":2} → 42`, "assistant: calc.add returned: 42"}},
		{true, []string{`denied mcp calc.add`, "assistant: add was not approved"}},
	} {
		args := []string{"run", "--model", "tether-scripted", "--mode", "suspend", "--workdir", t.TempDir(), "--ttft", "0", "--tps", "0", "--mcp", "calc=" + url}
		if tc.deny {
			args = append(args, "--mcp-deny")
		}
		var out, errOut bytes.Buffer
		if code := run(t.Context(), append(args, task), &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"run", "--mcp", "calc"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "want LABEL=URL") {
		t.Errorf("--mcp calc: exit %d, %s", code, errOut.String())
	}
}

// TestRunBranches: --branches forks the rollout at its first pause; each
// branch runs the paused call and the rest in a workdir of its own. Every
// line a branch prints starts with its label (the branches' lines
// interleave); with --json every event names its lane and each summary
// its branch.
func TestRunBranches(t *testing.T) {
	t.Parallel()
	task := "Write.\ncall: shell {\"command\":\"echo $PWD > where.txt\"}\ncall: read_file {\"path\":\"where.txt\"}"
	for _, mode := range []string{"suspend", "turns"} {
		dir := filepath.Join(t.TempDir(), "w")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"run", "--model", "tether-scripted", "--mode", mode, "--workdir", dir, "--ttft", "0", "--tps", "0", "--branches", "2", task}, &out, &errOut)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", mode, code, out.String(), errOut.String())
		}
		// After the header, every line is a branch's (the scripted
		// prefix prints none): its label starts it.
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		for _, line := range lines[1:] {
			if !strings.HasPrefix(line, "b0 ") && !strings.HasPrefix(line, "b1 ") {
				t.Errorf("%s: a line without its branch's label: %q", mode, line)
			}
		}
		// Each branch's summary names its copy of the workdir.
		dirs := make([]string, 2)
		for i := range dirs {
			for _, line := range lines {
				if d, ok := strings.CutPrefix(line, fmt.Sprintf("b%d workdir: ", i)); ok {
					dirs[i] = d
					t.Cleanup(func() { os.RemoveAll(d) })
				}
			}
		}
		if dirs[0] == "" || dirs[0] == dirs[1] || !strings.Contains(filepath.Base(dirs[0]), "w-b0-") {
			t.Fatalf("%s: branch workdirs %q:\n%s", mode, dirs, out.String())
		}
		for i, b := range dirs {
			if data, err := os.ReadFile(filepath.Join(b, "where.txt")); err != nil || strings.TrimSpace(string(data)) != b {
				t.Errorf("%s: branch %d wrote %q, %v", mode, i, data, err)
			}
			for _, want := range []string{
				fmt.Sprintf("b%d call shell ", i),
				fmt.Sprintf("b%d call read_file ", i),
				fmt.Sprintf("b%d assistant: read_file returned: 1 %s", i, b),
				fmt.Sprintf("b%d completed in ", i),
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("%s: output lacks %q:\n%s", mode, want, out.String())
				}
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "where.txt")); err == nil {
			t.Errorf("%s: the paused call ran in the original workdir", mode)
		}

		out.Reset()
		code = run(t.Context(), []string{"run", "--json", "--model", "tether-scripted", "--mode", mode, "--workdir", dir, "--ttft", "0", "--tps", "0", "--branches", "2", task}, &out, &errOut)
		if code != 0 {
			t.Fatalf("%s --json: exit %d: %s%s", mode, code, out.String(), errOut.String())
		}
		summaries := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var obj struct {
				Type     string `json:"type"`
				StreamID string `json:"stream_id"`
				Branch   string `json:"branch"`
				Workdir  string `json:"workdir"`
			}
			if err := json.Unmarshal([]byte(line), &obj); err != nil {
				t.Fatalf("%s --json: not a JSON line: %q", mode, line)
			}
			switch {
			case obj.Type == "tether.summary":
				summaries[obj.Branch] = true
				t.Cleanup(func() { os.RemoveAll(obj.Workdir) })
			case obj.StreamID != "root" && obj.StreamID != "b0" && obj.StreamID != "b1":
				t.Errorf("%s --json: an event on no lane: %q", mode, line)
			}
		}
		if !summaries["b0"] || !summaries["b1"] || len(summaries) != 2 {
			t.Errorf("%s --json: summaries of %v", mode, summaries)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"run", "--mode", "chained", "--branches", "2"}, &out, &errOut); code != 2 {
		t.Errorf("--mode chained --branches 2: exit %d", code)
	}
}

// TestRunAPIKeyHint: against a server that wants an API key, a run without
// one fails with an error that says how to give it, in every mode, and so
// does ablate --url; with the key it completes.
func TestRunAPIKeyHint(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-test": "alice"})
	srv, err := runtime.NewServer(runtime.Options{Renderer: r, Keys: keys,
		Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{})}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
	})
	for _, mode := range []string{"suspend", "turns", "chained", "stateless"} {
		args := []string{"run", "--url", hs.URL + "/v1", "--mode", mode, "--model", "tether-scripted", "--workdir", t.TempDir()}
		var out, errOut bytes.Buffer
		code := run(t.Context(), append(args, "--api-key", "", scriptedTask), &out, &errOut)
		if s := out.String() + errOut.String(); code != 1 || !strings.Contains(s, "--api-key") || !strings.Contains(s, "OPENAI_API_KEY") {
			t.Errorf("%s without a key: exit %d, want 1 and an error naming --api-key and OPENAI_API_KEY:\n%s", mode, code, s)
		}
		out.Reset()
		errOut.Reset()
		if code := run(t.Context(), append(args, "--api-key", "sk-test", scriptedTask), &out, &errOut); code != 0 {
			t.Errorf("%s with the key: exit %d: %s%s", mode, code, out.String(), errOut.String())
		}
	}
	// ablate --url says the same.
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"ablate", "--url", hs.URL + "/v1", "--api-key", "", "--workload", "synthetic", "--calls", "1", "--reps", "1", "--tps", "0", "--modes", "stateless"}, &out, &errOut)
	if s := errOut.String(); code != 1 || !strings.Contains(s, "--api-key") || !strings.Contains(s, "OPENAI_API_KEY") {
		t.Errorf("ablate --url without a key: exit %d:\n%s", code, s)
	}
}

// TestRunErrorText: when a run fails (no server on the port, a URL that is
// not a Responses API, a model the server does not have, a flag value),
// its error says what was being done, in every mode, and names no Go
// package.
func TestRunErrorText(t *testing.T) {
	t.Parallel()
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	refused := "http://127.0.0.1:1/v1"
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string // by mode
		code int
	}{
		{"no server", []string{"--url", refused}, map[string]string{
			"suspend":   "error: dial ws://127.0.0.1:1/v1/responses: dial tcp 127.0.0.1:1: connect: connection refused",
			"turns":     "error: dial ws://127.0.0.1:1/v1/responses: dial tcp 127.0.0.1:1: connect: connection refused",
			"chained":   `error: Post "http://127.0.0.1:1/v1/responses": dial tcp 127.0.0.1:1: connect: connection refused`,
			"stateless": `error: Post "http://127.0.0.1:1/v1/responses": dial tcp 127.0.0.1:1: connect: connection refused`,
		}, 1},
		{"not a Responses API", []string{"--url", notFound.URL + "/v1"}, map[string]string{
			"suspend":   "error: dial ws" + strings.TrimPrefix(notFound.URL, "http") + "/v1/responses: 404 Not Found, not a WebSocket upgrade",
			"turns":     "error: dial ws" + strings.TrimPrefix(notFound.URL, "http") + "/v1/responses: 404 Not Found, not a WebSocket upgrade",
			"chained":   "error: POST " + notFound.URL + "/v1/responses: 404 Not Found: 404 page not found",
			"stateless": "error: POST " + notFound.URL + "/v1/responses: 404 Not Found: 404 page not found",
		}, 1},
		{"no such model", []string{"--model", "nosuch", "--ttft", "0", "--tps", "0"}, map[string]string{
			"suspend":   "error: the server sent an error: model_not_found (model): The model 'nosuch' does not exist.",
			"turns":     "error: the server sent an error: model_not_found (model): The model 'nosuch' does not exist.",
			"chained":   "/v1/responses: 404 Not Found: model_not_found (model): The model 'nosuch' does not exist.",
			"stateless": "/v1/responses: 404 Not Found: model_not_found (model): The model 'nosuch' does not exist.",
		}, 1},
		{"no such mode", nil, map[string]string{
			"bogus": `tether: run: unknown mode "bogus" (want suspend, inject, turns, chained, background or stateless)`,
		}, 2},
	} {
		for mode, want := range tc.want {
			t.Run(tc.name+" "+mode, func(t *testing.T) {
				t.Parallel()
				args := append([]string{"run", "--mode", mode, "--model", "tether-scripted", "--workdir", t.TempDir()}, tc.args...)
				var out, errOut bytes.Buffer
				code := run(t.Context(), append(args, "hi"), &out, &errOut)
				s := out.String() + errOut.String()
				if code != tc.code || !strings.Contains(s, want) {
					t.Errorf("exit %d, want %d and %q in:\n%s", code, tc.code, want, s)
				}
				if strings.Contains(s, "clienttools") {
					t.Errorf("the output names the package clienttools:\n%s", s)
				}
			})
		}
	}
}

// TestRunCertHashHint: "tether run --transport webtransport" against tether
// serve's self-signed certificate without --cert-hash (or with another
// certificate's) fails on the certificate, with an error that says to pass
// the hash serve prints, and on which line; with that hash it completes.
func TestRunCertHashHint(t *testing.T) {
	t.Parallel()
	lines, stop := serveLines(t, 2, "--wt-addr", "127.0.0.1:0", "--tps", "0", "--ttft", "0")
	defer stop()
	m := regexp.MustCompile(`^webtransport on (https://\S+) sha256=([0-9a-f]{64})$`).FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("serve's second line %q, want webtransport on https://HOST:PORT sha256=HEX", lines[1])
	}
	wtBase, hash := m[1]+"/v1", m[2]
	hint := regexp.MustCompile("\\(pass --cert-hash HEX, as tether serve prints it on its `(webtransport on https://… sha256=HEX)` line\\)$")
	runWT := func(args ...string) (int, string) {
		args = append([]string{"run", "--transport", "webtransport", "--url", wtBase, "--model", "tether-scripted", "--workdir", t.TempDir()}, args...)
		var out, errOut bytes.Buffer
		code := run(t.Context(), append(args, "hi"), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // on the error line, before the hint
	}{
		{"no --cert-hash", nil, "error: dial " + wtBase + "/responses: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"another certificate's hash", []string{"--cert-hash", strings.Repeat("ab", 32)},
			"error: dial " + wtBase + "/responses: tls: failed to verify certificate: the server's certificate has SHA-256 " + hash + ", not the pinned " + strings.Repeat("ab", 32)},
	} {
		code, s := runWT(tc.args...)
		line, _, _ := strings.Cut(s[strings.Index(s, "error: "):], "\n")
		if code != 1 || !strings.HasPrefix(line, tc.want+" ") || !hint.MatchString(line) || strings.Contains(s, "clienttools") || strings.Contains(s, "CRYPTO_ERROR") {
			t.Errorf("%s: exit %d, want 1 and the line\n%s (pass --cert-hash HEX, …)\nin:\n%s", tc.name, code, tc.want, s)
			continue
		}
		// The hint shows serve's line as serve prints it.
		shown := strings.NewReplacer("https://…", m[1], "HEX", hash).Replace(hint.FindStringSubmatch(line)[1])
		if shown != lines[1] {
			t.Errorf("%s: the hint's line, filled in, is %q; serve printed %q", tc.name, shown, lines[1])
		}
	}
	if code, s := runWT("--cert-hash", hash); code != 0 || !strings.Contains(s, "completed in") {
		t.Errorf("--cert-hash %s: exit %d:\n%s", hash, code, s)
	}
	if code, s := runWT("--cert-hash", "abc"); code != 2 || !strings.Contains(s, `tether: run: --cert-hash: certificate hash "abc": want a SHA-256 in hex`) {
		t.Errorf("--cert-hash abc: exit %d, want 2 and an error naming the flag:\n%s", code, s)
	}
}

// TestBaseURL: run and ablate take --url as OpenAI clients take their base
// URL (…/v1); the responses endpoint under it is refused before anything
// is dialed, with the base URL to give instead.
func TestBaseURL(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "--url", "http://127.0.0.1:1/v1/responses"},
		{"ablate", "--url", "http://127.0.0.1:1/v1/responses/"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "give the base URL, http://127.0.0.1:1/v1, not the responses endpoint") {
			t.Errorf("%v: exit %d: %s", args, code, errOut.String())
		}
	}
}
