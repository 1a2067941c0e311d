package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
)

// TestServeUpstreamModels serves, from a --config file, two models that
// another tether samples (over chat completions and over Responses), with
// the API key taken from the environment variable the config names.
func TestServeUpstreamModels(t *testing.T) {
	const keyEnv = "TETHER_TEST_UPSTREAM_KEY"
	t.Setenv(keyEnv, "s3cret")
	srv, err := runtime.NewServer(runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer s3cret" {
			http.Error(w, `{"error":{"message":"bad key `+got+`"}}`, http.StatusUnauthorized)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	defer b.Close()
	cfg := map[string]any{"models": map[string]any{}}
	for name, api := range map[string]string{"remote-chat": "chat", "remote-resp": "responses"} {
		cfg["models"].(map[string]any)[name] = map[string]any{"upstream": map[string]any{
			"base_url": b.URL + "/v1", "api": api, "model": "tether-scripted", "api_key_env": keyEnv, "timeout": "30s"}}
	}
	path := writeConfig(t, cfg)

	base, stop := startServe(t, "--config", path)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	post := func(route, body string) map[string]any {
		t.Helper()
		resp, err := client.Post(base+route, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("%s: %d %s", route, resp.StatusCode, raw)
		}
		return out
	}
	for _, model := range []string{"remote-chat", "remote-resp"} {
		resp := post("/v1/responses", `{"model":"`+model+`","input":"call: lookup {\"id\":7}","tools":[{"type":"function","name":"lookup"}]}`)
		out, _ := json.Marshal(resp["output"])
		if resp["status"] != "completed" || !strings.Contains(string(out), `"arguments":"{\"id\":7}"`) || !strings.Contains(string(out), `"name":"lookup"`) {
			t.Errorf("%s: %s", model, out)
		}
		chat := post("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hello there"}]}`)
		if got, _ := json.Marshal(chat["choices"]); !strings.Contains(string(got), `"content":"You said: \"hello there\""`) {
			t.Errorf("%s chat: %s", model, got)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// A key variable that is not set stops serve before it listens.
	os.Unsetenv(keyEnv)
	var stderr strings.Builder
	if code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--config", path}, io.Discard, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), keyEnv+" is unset") {
		t.Errorf("without the key: exit %d, stderr %q", code, stderr.String())
	}
}

func writeConfig(t *testing.T, cfg any) string {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tether.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServe runs "tether serve --addr 127.0.0.1:0 ARGS" in process and
// returns its base URL and a stop function that returns its exit code.
func startServe(t *testing.T, args ...string) (base string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading the listening line: %v (stderr: %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	return strings.TrimPrefix(strings.TrimSpace(line), "listening on "), func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not stop after its context ended")
			return -1
		}
	}
}
