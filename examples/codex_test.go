package examples_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/internal/traceimport"
)

// TestCodexCLI runs the Codex CLI (npm @openai/codex, pinned in
// examples/codex) against tether as a custom provider, with the scripted
// model, over WebSocket and over HTTP: its warm-up, an exec_command call
// that Codex runs, a call of a function in Codex's own multi_agent_v1
// namespace, and the final message. .ci/run installs the package; without
// node or the package the test skips.
func TestCodexCLI(t *testing.T) {
	codexTransports(t, func(t *testing.T, codex, base string, ws bool) {
		work := t.TempDir()
		out, _ := runCodex(t, codex, base, ws, work, `call: exec_command {"cmd":"echo tether-ok > proof.txt"}`)
		if b, err := os.ReadFile(filepath.Join(work, "proof.txt")); err != nil || strings.TrimSpace(string(b)) != "tether-ok" {
			t.Fatalf("exec_command did not run: proof.txt %q, %v", b, err)
		}
		if cmd := codexItem(out, "command_execution"); cmd == nil || cmd["exit_code"] != float64(0) {
			t.Errorf("command item %v", cmd)
		}
		if msg := codexItem(out, "agent_message"); msg == nil || !strings.HasPrefix(msg["text"].(string), "exec_command returned:") {
			t.Errorf("final message %v", msg)
		}
		// The two turns, and on a WebSocket the warm-up before them
		// (generate: false), each once: nothing retried, nothing fell
		// back to the other transport.
		wantPaths(t, base, ws, map[bool]int{true: 3, false: 2}[ws])

		out, _ = runCodex(t, codex, base, ws, t.TempDir(), `call: multi_agent_v1.wait_agent {"targets":["agent_1"],"timeout_ms":1000}`)
		msg := codexItem(out, "agent_message")
		if msg == nil || !strings.HasPrefix(msg["text"].(string), "wait_agent returned:") || strings.Contains(msg["text"].(string), "unsupported call") {
			t.Errorf("after the namespaced call: %v (want the function_call_output Codex sent back)", msg)
		}
	})
}

// TestCodexApplyPatch has Codex edit files with its own apply_patch tool,
// over WebSocket and over HTTP: Codex offers the tool because tether's
// model catalog (GET /v1/models?client_version=…, the provider's
// model_catalog_url) says the model takes it in freeform, and the scripted
// model's directive calls it with a patch that adds one file and changes
// another, which the test reads back.
func TestCodexApplyPatch(t *testing.T) {
	codexTransports(t, func(t *testing.T, codex, base string, ws bool) {
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "greet.txt"), []byte("hello\nfrom codex\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		patch := "*** Begin Patch\n*** Add File: notes/new.txt\n+written by apply_patch\n*** Update File: greet.txt\n@@\n hello\n-from codex\n+from tether\n*** End Patch"
		arg, _ := json.Marshal(patch)
		out, _ := runCodex(t, codex, base, ws, work, "call: apply_patch "+string(arg))
		for file, want := range map[string]string{"notes/new.txt": "written by apply_patch\n", "greet.txt": "hello\nfrom tether\n"} {
			if b, err := os.ReadFile(filepath.Join(work, file)); err != nil || string(b) != want {
				t.Errorf("%s: %q, %v; want %q", file, b, err, want)
			}
		}
		if ch := codexItem(out, "file_change"); ch == nil || ch["status"] != "completed" {
			t.Errorf("file_change item %v", ch)
		}
		if msg := codexItem(out, "agent_message"); msg == nil || !strings.Contains(msg["text"].(string), "Success") {
			t.Errorf("final message %v (want the apply_patch output Codex sent back)", msg)
		}
		wantPaths(t, base, ws, map[bool]int{true: 3, false: 2}[ws])
	})
}

// codexTransports runs test with the Codex CLI against a tether of its
// own, once over WebSocket and once over HTTP, in parallel.
func codexTransports(t *testing.T, test func(t *testing.T, codex, base string, ws bool)) {
	t.Parallel()
	codex := codexCLI(t)
	for _, ws := range []bool{true, false} {
		t.Run(map[bool]string{true: "websocket", false: "http"}[ws], func(t *testing.T) {
			t.Parallel()
			test(t, codex, serve(t), ws)
		})
	}
}

// codexCLI is the pinned Codex CLI, or skips the test without it.
func codexCLI(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: skipping the Codex CLI")
	}
	codex, err := filepath.Abs("codex/node_modules/.bin/codex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(codex); err != nil {
		t.Skip("examples/codex/node_modules/.bin/codex is missing: run npm ci in examples/codex")
	}
	return codex
}

// TestCodexSessionReplay runs a real Codex CLI session against tether (two
// steps of exec_command calls, one of them two calls at once), imports the
// rollout file Codex wrote (tether trace import's traceimport.Codex) and
// replays it through all four designs: every design makes the session's
// calls and waits their recorded durations (a step, its longest call's).
func TestCodexSessionReplay(t *testing.T) {
	t.Parallel()
	codex := codexCLI(t)
	base := serve(t)
	_, home := runCodex(t, codex, base, true, t.TempDir(),
		"call: exec_command {\"cmd\":\"sleep 0.2; echo one\"}\ncall: exec_command {\"cmd\":\"ls\"} | exec_command {\"cmd\":\"sleep 0.3; pwd\"}")
	var files []string
	filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "rollout-") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("rollout files %v, want one", files)
	}
	rollout, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	traces, rep, err := traceimport.Codex(bytes.NewReader(rollout), "codex-session")
	if err != nil {
		t.Fatalf("%v\n%s", err, rollout)
	}
	if len(traces) != 1 || len(traces[0].Steps) != 3 || traces[0].Calls() != 3 {
		t.Fatalf("imported %d traces (%+v), report %+v: want one of 3 steps and 3 calls\n%s", len(traces), traces, rep, rollout)
	}
	t.Logf("imported: %+v", rep)
	tr := traces[0]
	// recorded is the tool time a replay waits: a step's calls run at
	// once, so each step waits for its longest.
	var recorded time.Duration
	for i, want := range [][]string{{`{"cmd":"sleep 0.2; echo one"}`}, {`{"cmd":"ls"}`, `{"cmd":"sleep 0.3; pwd"}`}} {
		st := tr.Steps[i]
		var longest time.Duration
		for j, args := range want {
			if c := st.Calls[j]; c.Name != "exec_command" || c.Arguments != args || c.Output == "" {
				t.Errorf("step %d call %d: %+v, want exec_command %s", i, j, c, args)
			}
			longest = max(longest, time.Duration(st.Calls[j].DurationMS)*time.Millisecond)
		}
		recorded += longest
	}
	if recorded < 500*time.Millisecond {
		t.Errorf("the recorded calls took %v: the sleeps alone are 500 ms", recorded)
	}

	// As a user would: the import, the trace's summary, and ablate --quick
	// replaying it through the four designs with the recorded durations.
	traceDir, out := t.TempDir(), t.TempDir()
	tether := binary(t, "tether")
	runOK(t, ".", nil, tether, "trace", "import", "--out", traceDir, "--name", "codex-session", files[0])
	file := filepath.Join(traceDir, "codex-session.jsonl")
	if show := runOK(t, ".", nil, tether, "trace", "show", file); !strings.Contains(show, "3 steps, 3 calls") || !strings.Contains(show, "imported from codex rollout") {
		t.Errorf("trace show:\n%s", show)
	}
	if _, stderr, code := run(t, ".", nil, tether, "ablate", "--quick", "--workload", "trace:"+file, "--tools", "replay", "--out", out); code != 0 {
		t.Fatalf("ablate: exit %d\n%s", code, stderr) // stderr is its progress
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res ablate.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, tri := range res.Trials {
		modes[tri.Mode] = true
		if tri.Calls != 3 || time.Duration(tri.ToolsUS)*time.Microsecond < recorded*9/10 {
			t.Errorf("%s: %d calls, %v waiting on tools; want 3 calls and the recorded %v", tri.Mode, tri.Calls, time.Duration(tri.ToolsUS)*time.Microsecond, recorded)
		}
	}
	if len(modes) != 4 || len(res.Trials) != 4 {
		t.Errorf("trials %d in modes %v: want one in each of the four designs", len(res.Trials), modes)
	}
}

// runCodex runs codex exec --json in work with a throw-away CODEX_HOME whose
// config makes tether at base its model provider, and returns its JSON
// events and that CODEX_HOME. It fails the test unless the turn completed.
func runCodex(t *testing.T, codex, base string, ws bool, work, prompt string) ([]map[string]any, string) {
	t.Helper()
	home := t.TempDir()
	config := `model = "tether-scripted"
model_provider = "tether"

[model_providers.tether]
name = "tether"
base_url = "` + base + `"
model_catalog_url = "` + base + `/models"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = ` + strconv.FormatBool(ws) + `

[features]
api_key_model_discovery = true
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, work, []string{"CODEX_HOME=" + home, "OPENAI_API_KEY=sk-tether-test"},
		codex, "exec", "--json", "--skip-git-repo-check", "--sandbox", "danger-full-access", prompt)
	if code != 0 {
		t.Fatalf("codex exit %d:\n%s", code, stderr)
	}
	if regexp.MustCompile(`(?i)retry|reconnect|fall(ing)? ?back to`).MatchString(stderr) {
		t.Errorf("codex retried or fell back:\n%s", stderr)
	}
	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("codex --json line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
		if ev["type"] == "turn.failed" || ev["type"] == "error" {
			t.Fatalf("codex: %v", ev)
		}
		if it, ok := ev["item"].(map[string]any); ok && it["type"] == "error" {
			t.Errorf("codex: %v", it) // such as "Model metadata for `tether-scripted` not found"
		}
	}
	if len(events) == 0 || events[len(events)-1]["type"] != "turn.completed" {
		t.Fatalf("the turn did not complete:\n%s", stdout)
	}
	return events, home
}

// codexItem is the last completed item of a type in codex's events.
func codexItem(events []map[string]any, typ string) map[string]any {
	var found map[string]any
	for _, ev := range events {
		if it, ok := ev["item"].(map[string]any); ok && ev["type"] == "item.completed" && it["type"] == typ {
			found = it
		}
	}
	return found
}

// wantPaths checks tether's response counters: n responses, every one on
// the transport Codex was configured for.
func wantPaths(t *testing.T, base string, ws bool, n int) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := map[bool]string{true: `transport="ws"`, false: `transport="http"`}[ws]
	total := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "tether_responses_total{") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.Atoi(f[len(f)-1])
		if !strings.Contains(line, want) || !strings.Contains(line, `status="completed"`) {
			t.Errorf("a response off the expected path: %s", line)
		}
		total += v
	}
	if total != n {
		t.Errorf("%d responses, want %d (a retry or a fallback adds some):\n%s", total, n, b)
	}
}
