package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// readmeBlock is the first fenced code block of lang after the line of
// the README that contains marker.
func readmeBlock(t *testing.T, marker, lang string) string {
	t.Helper()
	return docBlock(t, "README.md", marker, lang)
}

// docBlock is the first fenced code block of lang after the line of the
// file (README.md, docs/NAME.md) that contains marker.
func docBlock(t *testing.T, file, marker, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("%s has no %q", file, marker)
	}
	s = s[i:]
	start := strings.Index(s, "```"+lang+"\n")
	if start < 0 {
		t.Fatalf("%s has no %s block after %q", file, lang, marker)
	}
	s = s[start+len("```"+lang+"\n"):]
	return s[:strings.Index(s, "```")]
}

// freePort is a loopback port nobody listens on (for a moment).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestWalkthrough runs the README's first session line by line, as a
// newcomer would (on a free port instead of 8080), with the built tether
// on PATH: the server starts, the request is answered, the suspended
// rollout completes with its summary, and the quick ablation prints its
// table.
func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tether ablate --quick (30 s): not in -short")
	}
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the walk-through uses curl, which this machine lacks")
	}
	script := readmeBlock(t, "## A first session", "sh")
	port := strconv.Itoa(freePort(t))
	script = strings.ReplaceAll(script, "127.0.0.1:8080", "127.0.0.1:"+port)
	// On a cold machine, with other packages' tests beside it, the
	// walk-through's builds and rollouts take minutes: it gets what the test
	// binary's deadline (-timeout) leaves, less room to report.
	ctx, cancel := t.Context(), context.CancelFunc(func() {})
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(tetherBinary(t))+":"+os.Getenv("PATH"))
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"listening on http://127.0.0.1:" + port,
		`You said: \"Hello, tether\"`,           // the request's answer
		"completed in",                          // tether run's summary
		"suspend rollout of replay:calc-fix-12", // its header
		"model and tools are",                   // tether ablate's conclusion
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walk-through's output lacks %q:\n%s", want, out)
		}
	}
}

// TestREADMEConfig: docs/models.md's example config starts a server as
// written: its upstream model needs no key (as vLLM serves by default)
// and no environment variable.
func TestREADMEConfig(t *testing.T) {
	t.Parallel()
	cfg := docBlock(t, "docs/models.md", "## Model time", "json")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startServeBinary(t, "--config", path)
	defer stop()
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		models.WriteString(sc.Text())
	}
	if !strings.Contains(models.String(), `"qwen"`) {
		t.Errorf("the config's model is not served: %s", models.String())
	}
}

// startServeBinary runs the built tether serve with args on a free port and
// returns its base URL (as it printed it) and how to stop it.
func startServeBinary(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, tetherBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		cancel()
		cmd.Wait()
		t.Fatalf("tether serve %v: %q %v\n%s", args, line, err, stderr.String())
	}
	return base, func() {
		cancel()
		cmd.Wait()
	}
}

// TestServeAnyAddress: on every interface, serve prints an address a
// client can use.
func TestServeAnyAddress(t *testing.T) {
	t.Parallel()
	base, stop := startServeBinary(t, "--addr", "0.0.0.0:0", "--insecure")
	defer stop()
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(base) {
		t.Fatalf("printed %q", base)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestServeTraces: a trace file in serve --traces DIR (as tether trace
// record writes one) is served as replay:NAME, listed by trace list
// --traces, and runs.
func TestServeTraces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	trace := `{"repo":"calc","task":"Look around.","trace":"myrec"}
{"text":"Looking.","calls":[{"name":"list_dir","arguments":"{\"path\":\".\"}","output":"README.md","duration_ms":1}]}
{"text":"Done: the repository has a README."}
`
	if err := os.WriteFile(filepath.Join(dir, "myrec.jsonl"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := tether(t, "trace", "list", "--traces", dir); code != 0 || !strings.Contains(out, "replay:myrec\t2 steps\t1 calls") {
		t.Errorf("trace list --traces: exit %d, %q %q", code, out, errOut)
	}
	base, stop := startServeBinary(t, "--traces", dir)
	defer stop()
	code, out, errOut := tether(t, "run", "--url", base, "--model", "replay:myrec", "--mode", "stateless", "--workdir", t.TempDir(), "Look around.")
	if code != 0 || !strings.Contains(out, "Done: the repository has a README.") || !strings.Contains(out, "call list_dir") {
		t.Errorf("tether run --model replay:myrec: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := tether(t, "serve", "--addr", "127.0.0.1:0", "--traces", filepath.Join(dir, "nope")); code == 0 || !strings.Contains(errOut, "not a directory") {
		t.Errorf("--traces of no directory: exit %d, %q", code, errOut)
	}
}

// TestServeLogs: --log-format json writes one JSON object a line on
// stderr, an access line per request among them, without the key.
func TestServeLogs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, tetherBinary(t), "serve", "--addr", "127.0.0.1:0", "--log-format", "json")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	base := strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
	req, _ := http.NewRequest("POST", base+"/v1/responses", strings.NewReader(`{"model":"tether-scripted","input":"hi"}`))
	req.Header.Set("Authorization", "Bearer sk-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	cmd.Wait()
	access := 0
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		if m["msg"] == "access" && m["path"] == "/v1/responses" && m["status"] == float64(200) && m["responses"] == float64(1) {
			access++
		}
	}
	if access != 1 || strings.Contains(stderr.String(), "sk-secret") {
		t.Errorf("%d access lines for the request, in:\n%s", access, stderr.String())
	}
}

// syncBuilder is a strings.Builder a command's output goroutine writes.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
