package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

func valuePtr[T any](v T) *T { return &v }

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		json    string
		want    *Config // nil: only check for wantErr
		wantErr string  // substring; "" means valid
	}{
		{"timing and upstream", `{"models": {
			"fast":  {"tps": 1000, "ttft": "50ms", "prefill_rate": 20000},
			"gpt-x": {"ttft": "1.5s", "upstream": {"base_url": "http://127.0.0.1:8000/v1", "api": "responses",
			          "model": "qwen3", "api_key_env": "VLLM_KEY", "timeout": "2m"}}}}`,
			&Config{Models: map[string]ModelConfig{
				"fast": {TPS: valuePtr(1000.0), TTFT: valuePtr(Duration(50 * time.Millisecond)), PrefillRate: valuePtr(20000.0)},
				"gpt-x": {TTFT: valuePtr(Duration(1500 * time.Millisecond)), Upstream: &UpstreamConfig{
					BaseURL: "http://127.0.0.1:8000/v1", API: "responses", Model: "qwen3", APIKeyEnv: "VLLM_KEY", Timeout: Duration(2 * time.Minute)}},
			}}, ""},
		{"zero rates", `{"models": {"m": {"tps": 0, "prefill_rate": 0, "ttft": "0s"}}}`,
			&Config{Models: map[string]ModelConfig{"m": {TPS: valuePtr(0.0), TTFT: valuePtr(Duration(0)), PrefillRate: valuePtr(0.0)}}}, ""},
		{"empty model", `{"models": {"m": {}}}`, &Config{Models: map[string]ModelConfig{"m": {}}}, ""},
		{"context window", `{"models": {"m": {"context_window": 8192}}}`, &Config{Models: map[string]ModelConfig{"m": {ContextWindow: valuePtr(8192)}}}, ""},
		{"context window of none", `{"models": {"m": {"context_window": 0}}}`, nil, `models: "m": context_window: 0: want a positive number of tokens`},
		{"no models", `{}`, &Config{}, ""},
		{"mcp servers", `{"mcp_servers": {"fs": {"command": ["mcp-fs", "/srv"], "env": ["A=1"]}, "docs": {"url": "http://10.0.0.2:8000/mcp", "headers": {"X-Key": "k"}}}}`,
			&Config{MCPServers: map[string]mcp.ServerConfig{"fs": {Command: []string{"mcp-fs", "/srv"}, Env: []string{"A=1"}},
				"docs": {URL: "http://10.0.0.2:8000/mcp", Headers: map[string]string{"X-Key": "k"}}}}, ""},
		{"mcp server with neither", `{"mcp_servers": {"fs": {}}}`, nil, `mcp_servers: "fs": give url`},
		{"mcp server with both", `{"mcp_servers": {"fs": {"url": "http://h/mcp", "command": ["x"]}}}`, nil, `give url or command, not both`},
		{"mcp server bad url", `{"mcp_servers": {"fs": {"url": "h/mcp"}}}`, nil, `url: want an http or https URL`},
		{"mcp server bad label", `{"mcp_servers": {"a b": {"url": "http://h/mcp"}}}`, nil, `a label is 1-64 letters`},
		{"mcp server unknown field", `{"mcp_servers": {"fs": {"cmd": ["x"]}}}`, nil, `mcp_servers: "fs": unknown field "cmd" (known: command, env, headers, url)`},

		{"unknown top-level field", `{"models": {}, "model": {}}`, nil, `unknown field "model" (known: mcp_servers, models, traces)`},
		{"unknown model field", `{"models": {"fast": {"tsp": 1000}}}`, nil,
			`models: "fast": unknown field "tsp" (known: context_window, prefill_rate, tps, ttft, upstream)`},
		{"unknown upstream field", `{"models": {"u": {"upstream": {"base_url": "http://h/v1", "apikey": "x"}}}}`, nil,
			`models: "u": upstream: unknown field "apikey"`},
		{"field names are case-sensitive", `{"models": {"m": {"TPS": 1}}}`, nil, `unknown field "TPS"`},
		{"rate is a string", `{"models": {"m": {"tps": "fast"}}}`, nil, `models: "m": tps: want a number, got a JSON string`},
		{"ttft is a number", `{"models": {"m": {"ttft": 200}}}`, nil, `models: "m": ttft: want a duration string such as "200ms"`},
		{"ttft has no unit", `{"models": {"m": {"ttft": "200"}}}`, nil, `ttft: want a duration string such as "200ms" or "1.5s", got "200"`},
		{"negative tps", `{"models": {"m": {"tps": -1}}}`, nil, `models: "m": tps: -1: want 0 or a positive number`},
		{"negative prefill rate", `{"models": {"m": {"prefill_rate": -5}}}`, nil, `prefill_rate: -5: want 0 or a positive number`},
		{"negative ttft", `{"models": {"m": {"ttft": "-1s"}}}`, nil, `ttft: -1s is negative`},
		{"rate out of range", `{"models": {"m": {"tps": 1e400}}}`, nil, `tps: 1e400 is out of range`},
		{"model is not an object", `{"models": {"m": 5}}`, nil, `models: "m": want a JSON object, got 5`},
		{"models is not an object", `{"models": []}`, nil, `models: want an object, got a JSON array`},
		{"blank model name", `{"models": {" m": {}}}`, nil, `models: " m": a model name must be non-empty`},
		{"upstream without base_url", `{"models": {"u": {"upstream": {"api": "chat"}}}}`, nil, `upstream: base_url: want an http or https URL`},
		{"upstream base_url not http", `{"models": {"u": {"upstream": {"base_url": "ftp://h/v1"}}}}`, nil, `base_url: want an http or https URL`},
		{"upstream unknown api", `{"models": {"u": {"upstream": {"base_url": "http://h/v1", "api": "grpc"}}}}`, nil, `api: want "chat"`},
		{"upstream negative timeout", `{"models": {"u": {"upstream": {"base_url": "http://h/v1", "timeout": "-1s"}}}}`, nil, `timeout: -1s is negative`},
		{"syntax error", "{\n  \"models\": {\n    \"m\": {,}}}", nil, `line 3, column 11: invalid character ','`},
		{"trailing data", `{"models": {}} {}`, nil, `unexpected data after the top-level object`},
		{"empty file", ``, nil, `empty file`},
		{"not an object", `[]`, nil, `want a JSON object, got []`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfig([]byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil && !reflect.DeepEqual(cfg, tt.want) {
				t.Errorf("got %+v, want %+v", cfg, tt.want)
			}
			// What Marshal writes, ParseConfig reads back the same.
			b, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseConfig(b)
			if err != nil || !reflect.DeepEqual(again, cfg) {
				t.Errorf("round trip through %s: %+v, %v", b, again, err)
			}
		})
	}
}

// TestModelTiming: each timing value comes from its flag when the command
// line set it, else from the model's config, else from the flag's default.
func TestModelTiming(t *testing.T) {
	t.Parallel()
	fast := ModelConfig{TPS: valuePtr(1000.0), TTFT: valuePtr(Duration(50 * time.Millisecond)), PrefillRate: valuePtr(20000.0)}
	flagTiming := sampler.Timing{TPS: 10, TTFT: 7 * time.Millisecond, PrefillRate: 300}
	tests := []struct {
		name  string
		model ModelConfig
		set   []string
		want  sampler.Timing
	}{
		{"config wins over defaults", fast, nil, sampler.Timing{TPS: 1000, TTFT: 50 * time.Millisecond, PrefillRate: 20000}},
		{"explicit flags win", fast, []string{"tps", "ttft", "prefill-rate"}, flagTiming},
		{"one explicit flag", fast, []string{"ttft"}, sampler.Timing{TPS: 1000, TTFT: 7 * time.Millisecond, PrefillRate: 20000}},
		{"unset config values take the flags", ModelConfig{TPS: valuePtr(0.0)}, nil, sampler.Timing{TPS: 0, TTFT: 7 * time.Millisecond, PrefillRate: 300}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := timingFlags{timing: flagTiming, set: map[string]bool{}}
			for _, name := range tt.set {
				f.set[name] = true
			}
			if got := f.model(tt.model); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestConfiguredModelsPace samples the models serve builds, in fake time:
// a configured model paces with its config's timing (one value overridden
// by an explicit flag), tether-scripted with the flags'.
func TestConfiguredModelsPace(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`{"models": {"fast": {"tps": 100, "ttft": "50ms", "prefill_rate": 1000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	flags := timingFlags{timing: sampler.Timing{TPS: 50, TTFT: 10 * time.Millisecond}, set: map[string]bool{"ttft": true}}
	ms := time.Millisecond
	tests := []struct {
		model string
		want  func(prompt, output int) time.Duration
	}{
		// ttft from the flag (set), tps and prefill from the config.
		{"fast", func(prompt, output int) time.Duration {
			return 10*ms + time.Duration(prompt)*ms + time.Duration(output-1)*10*ms
		}},
		// the flags' timing: prefill free, 20 ms a token.
		{sampler.ScriptedModel, func(_, output int) time.Duration { return 10*ms + time.Duration(output-1)*20*ms }},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				// Models of their own: the engine that paces them steps
				// one bubble's samples (its goroutine lives in the bubble).
				served, err := models(cfg, flags, r, sampler.NewEngine())
				if err != nil {
					t.Fatal(err)
				}
				req := &sampler.Request{Model: tt.model, Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser,
					Content: protocol.Contents{&protocol.InputText{Text: "how long does this take?"}}}}}
				start := time.Now()
				res, err := served[tt.model].Sample(t.Context(), req, func(sampler.Delta) {})
				if err != nil {
					t.Fatal(err)
				}
				if res.PromptTokens == 0 || res.CachedPromptTokens != 0 || res.OutputTokens < 2 {
					t.Fatalf("Result %+v: want a prompt, nothing cached, a few tokens", res)
				}
				if took, want := time.Since(start), tt.want(res.PromptTokens, res.OutputTokens); took != want {
					t.Errorf("took %v, want %v", took, want)
				}
			})
		})
	}
}

// TestServeConfig runs serve with a config file: a configured model is
// served; a bad file or flag stops serve before it listens, saying why.
func TestServeConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"models": {"slow": {"ttft": "400ms", "prefill_rate": 1000000}}}`)
	bad := write("bad.json", `{"models": {"fast": {"tsp": 1000}}}`)

	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown field", []string{"--config", bad}, 1, `config ` + bad + `: models: "fast": unknown field "tsp"`},
		{"missing file", []string{"--config", filepath.Join(dir, "none.json")}, 1, "no such file"},
		{"negative tps", []string{"--tps", "-1"}, 2, "--tps -1: want 0 or a positive number"},
		{"negative prefill rate", []string{"--prefill-rate", "-1"}, 2, "--prefill-rate -1: want 0 or a positive number"},
		{"negative ttft", []string{"--ttft", "-1s"}, 2, "--ttft -1s is negative"},
		{"negative bound", []string{"--max-lanes", "-3"}, 2, "--max-lanes -3: want 0 (the default) or more"},
		{"negative timeout", []string{"--resume-window", "-1m"}, 2, "--resume-window -1m0s: want 0 (the default) or more"},
		{"bad prefix cache", []string{"--prefix-cache", "shared"}, 2, `--prefix-cache "shared": want on or off`},
		{"engine policy alone", []string{"--engine-policy", "pin"}, 2, "--engine-policy is for --engine-model"},
		{"engine model and step", []string{"--engine-model", "llama3-8b-a100", "--engine-step", "5ms"}, 2, "--engine-step with --engine-model"},
		{"engine model and tps", []string{"--engine-model", "llama3-8b-a100", "--tps", "100"}, 2, "--tps with --engine-model"},
		{"engine model unknown", []string{"--engine-model", "gpt-9"}, 2, `--engine-model: enginemodel: profile "gpt-9": not one of llama3-8b-a100`},
		{"engine policy unknown", []string{"--engine-model", "llama3-8b-a100", "--engine-policy", "lru"}, 2, `--engine-policy "lru": want discard, pin or swap`},
		{"engine ttl without pin", []string{"--engine-model", "llama3-8b-a100", "--engine-ttl", "5s"}, 2, "--engine-ttl is for --engine-policy pin"},
		{"engine order unknown", []string{"--engine-model", "llama3-8b-a100", "--engine-order", "random"}, 2, `--engine-order "random": want arrival or rollout`},
		{"engine speed zero", []string{"--engine-model", "llama3-8b-a100", "--engine-speed", "0"}, 2, "--engine-speed 0: want more than 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			args := append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...)
			if code := run(context.Background(), args, io.Discard, &stderr); code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}

	// A configured model is served with its timing, unless a flag given
	// explicitly overrides it: fs.Visit must tell "--ttft 0" from no flag.
	for _, tt := range []struct {
		name     string
		args     []string
		min, max time.Duration
	}{
		{"config timing", []string{"--config", good}, 400 * time.Millisecond, time.Hour},
		{"flag overrides", []string{"--config", good, "--ttft", "0"}, 0, 400 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, stop := serveInProcess(t, tt.args...)
			client := &http.Client{Transport: &http.Transport{}}
			start := time.Now()
			resp, err := client.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"slow","input":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"completed"`) {
				t.Errorf("model slow: %d %s", resp.StatusCode, body)
			}
			if took < tt.min || took >= tt.max {
				t.Errorf("the response took %v, want [%v, %v)", took, tt.min, tt.max)
			}
			client.CloseIdleConnections()
			stop()
		})
	}
}

// TestUpstreamTimingFloor: an upstream model with a timing is paced by it (a
// floor under the upstream's speed); without one it runs at the upstream's
// own speed.
func TestUpstreamTimingFloor(t *testing.T) {
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	tps := 100.0
	cfg := &Config{Models: map[string]ModelConfig{
		"slowed": {TPS: &tps, Upstream: &UpstreamConfig{BaseURL: "http://127.0.0.1:1/v1", API: "chat", Model: "m"}},
		"raw":    {Upstream: &UpstreamConfig{BaseURL: "http://127.0.0.1:1/v1", API: "chat", Model: "m"}},
	}}
	ms, err := models(cfg, timingFlags{set: map[string]bool{}}, r, sampler.NewEngine())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ms["slowed"].(*sampler.Floored); !ok {
		t.Errorf("slowed is %T, want *sampler.Floored", ms["slowed"])
	}
	if _, ok := ms["raw"].(*sampler.Upstream); !ok {
		t.Errorf("raw is %T, want *sampler.Upstream", ms["raw"])
	}
}

// TestConfiguredWindows: a model's context_window sets its context window,
// a simulated one's, an upstream's and a paced upstream's alike; a
// simulated model without one has the default, an upstream none known.
func TestConfiguredWindows(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	tps := 100.0
	up := &UpstreamConfig{BaseURL: "http://127.0.0.1:1/v1", API: "chat", Model: "m"}
	cfg := &Config{Models: map[string]ModelConfig{
		"small":      {ContextWindow: valuePtr(4096)},
		"up":         {Upstream: up, ContextWindow: valuePtr(32768)},
		"up paced":   {Upstream: up, TPS: &tps, ContextWindow: valuePtr(65536)},
		"up unknown": {Upstream: up},
	}}
	ms, err := models(cfg, timingFlags{set: map[string]bool{}}, r, sampler.NewEngine())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"small": 4096, "up": 32768, "up paced": 65536, "up unknown": 0, sampler.ScriptedModel: sampler.DefaultContextWindow} {
		if got := ms[name].(runtime.WindowSampler).ContextWindow(); got != want {
			t.Errorf("%s: a context window of %d, want %d", name, got, want)
		}
	}
}

// TestAllowHosts: --mcp-allow's patterns: loopback, host patterns, *.
func TestAllowHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		patterns []string
		url      string
		want     bool
	}{
		{[]string{"loopback"}, "http://127.0.0.1:9/mcp", true},
		{[]string{"loopback"}, "http://[::1]:9/mcp", true},
		{[]string{"loopback"}, "http://localhost/mcp", true},
		{[]string{"loopback"}, "http://10.0.0.1/mcp", false},
		{[]string{"loopback", "*.internal.example.com"}, "https://docs.internal.example.com/mcp", true},
		{[]string{"*.internal.example.com"}, "https://example.com/mcp", false},
		{[]string{"*"}, "https://mcp.example.org/mcp", true},
		{nil, "http://127.0.0.1/mcp", false},
	} {
		u, _ := url.Parse(tc.url)
		if got := allowHosts(tc.patterns)(u); got != tc.want {
			t.Errorf("%v allows %s: %v", tc.patterns, tc.url, got)
		}
	}
}
