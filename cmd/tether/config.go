package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// Config is the file "tether serve --config FILE" reads: per-model settings,
// by model name. A model without upstream is served by the scripted backend
// with the model's timing; the timing flags, when given, override every
// model's. Unknown fields are errors, so a misspelt setting cannot be
// silently ignored.
//
//	{"models": {
//	  "fast":  {"tps": 1000, "ttft": "50ms", "prefill_rate": 20000},
//	  "gpt-x": {"ttft": "200ms", "upstream": {"base_url": "http://127.0.0.1:8000/v1",
//	            "api": "chat", "model": "qwen3", "api_key_env": "VLLM_KEY"}}}}
type Config struct {
	Models map[string]ModelConfig `json:"models"`
	// MCPServers are the MCP servers a request's mcp tool may name by
	// label alone: a URL, or a command that speaks MCP on stdio (the only
	// way tether runs a command for an MCP server).
	//
	//	"mcp_servers": {"fs": {"command": ["mcp-server-filesystem", "/srv/repo"]},
	//	                "docs": {"url": "http://docs.internal:8000/mcp"}}
	MCPServers map[string]mcp.ServerConfig `json:"mcp_servers,omitempty"`
	// Traces is a directory of trace files (*.jsonl, as tether trace
	// record writes them) served as replay:NAME besides the embedded
	// ones; serve --traces overrides it.
	Traces string `json:"traces,omitempty"`
}

// traceDir is the config's trace directory; a nil Config has none.
func (c *Config) traceDir() string {
	if c == nil {
		return ""
	}
	return c.Traces
}

// mcpServers is the configured MCP servers; a nil Config has none.
func (c *Config) mcpServers() map[string]mcp.ServerConfig {
	if c == nil {
		return nil
	}
	return c.MCPServers
}

// ModelConfig is one model's settings. A nil field takes the flag's value.
type ModelConfig struct {
	TPS         *float64        `json:"tps,omitempty"`          // output tokens per second; 0 is unpaced
	TTFT        *Duration       `json:"ttft,omitempty"`         // time to first token, "200ms"
	PrefillRate *float64        `json:"prefill_rate,omitempty"` // uncached prompt tokens per second; 0 is free
	Upstream    *UpstreamConfig `json:"upstream,omitempty"`     // serve the model from another server
	// ContextWindow is the most tokens of prompt the model reads, which
	// truncation fits requests to: a simulated model's (nil:
	// sampler.DefaultContextWindow), or the upstream's (nil: not known, and
	// truncation "auto" is refused).
	ContextWindow *int `json:"context_window,omitempty"`
}

// UpstreamConfig names an OpenAI-compatible server that samples a model.
type UpstreamConfig struct {
	BaseURL   string   `json:"base_url"`          // e.g. "http://127.0.0.1:8000/v1"
	API       string   `json:"api"`               // "chat" (POST /v1/chat/completions, the default) or "responses"
	Model     string   `json:"model"`             // the model's name upstream
	APIKeyEnv string   `json:"api_key_env"`       // name of the environment variable holding the key
	Timeout   Duration `json:"timeout,omitempty"` // 0 means the backend's default
}

// Upstream APIs.
const (
	UpstreamChat      = "chat"
	UpstreamResponses = "responses"
)

// Duration is a time.Duration written in JSON as a Go duration string,
// "200ms" or "1.5s".
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"200ms\" or \"1.5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"200ms\" or \"1.5s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads a config object, refusing unknown fields.
func (c *Config) UnmarshalJSON(b []byte) error {
	*c = Config{}
	var models, servers map[string]json.RawMessage
	if err := decodeObject(b, map[string]any{"models": &models, "mcp_servers": &servers, "traces": &c.Traces}); err != nil {
		return err
	}
	if servers != nil {
		c.MCPServers = make(map[string]mcp.ServerConfig, len(servers))
	}
	for _, label := range slices.Sorted(maps.Keys(servers)) {
		var s mcp.ServerConfig
		if err := decodeObject(servers[label], map[string]any{"url": &s.URL, "headers": &s.Headers, "command": &s.Command, "env": &s.Env}); err != nil {
			return fmt.Errorf("mcp_servers: %q: %w", label, err)
		}
		c.MCPServers[label] = s
	}
	if models != nil {
		c.Models = make(map[string]ModelConfig, len(models))
	}
	for _, name := range slices.Sorted(maps.Keys(models)) {
		var m ModelConfig
		if err := json.Unmarshal(models[name], &m); err != nil {
			return fmt.Errorf("models: %q: %w", name, plainJSONError(err))
		}
		c.Models[name] = m
	}
	return nil
}

// UnmarshalJSON reads a model object, refusing unknown fields.
func (m *ModelConfig) UnmarshalJSON(b []byte) error {
	*m = ModelConfig{}
	return decodeObject(b, map[string]any{"tps": &m.TPS, "ttft": &m.TTFT, "prefill_rate": &m.PrefillRate, "upstream": &m.Upstream,
		"context_window": &m.ContextWindow})
}

// UnmarshalJSON reads an upstream object, refusing unknown fields.
func (u *UpstreamConfig) UnmarshalJSON(b []byte) error {
	*u = UpstreamConfig{}
	return decodeObject(b, map[string]any{"base_url": &u.BaseURL, "api": &u.API, "model": &u.Model,
		"api_key_env": &u.APIKeyEnv, "timeout": &u.Timeout})
}

// decodeObject decodes the JSON object b into the fields it names, in the
// order they appear, and refuses a field it does not name. Errors say which
// field failed; nested objects prefix their own.
func decodeObject(b []byte, fields map[string]any) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("want a JSON object, got %s", abbrev(b))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("want a JSON object, got %s", abbrev(b))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		dst, ok := fields[name]
		if !ok {
			return fmt.Errorf("unknown field %q (known: %s)", name, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return fmt.Errorf("%s: %w", name, plainJSONError(err))
		}
	}
	return nil
}

// plainJSONError says what a type mismatch is without Go type names.
func plainJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := jsonKind(te.Type.Kind().String())
		if want == "a number" && strings.HasPrefix(te.Value, "number") {
			return fmt.Errorf("%s is out of range", strings.TrimPrefix(te.Value, "number "))
		}
		return fmt.Errorf("want %s, got a JSON %s", want, te.Value)
	}
	return err
}

func jsonKind(goKind string) string {
	switch goKind {
	case "float64", "int":
		return "a number"
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	}
	return goKind
}

func abbrev(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and validates a config. A syntax error says on which
// line and column it is.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&cfg); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset-1) // Offset is just past the bad byte
			return nil, fmt.Errorf("line %d, column %d: %v", line, col, se)
		}
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: want a JSON object such as {\"models\": {}}")
		}
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the top-level object")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// position is the 1-based line and column of the byte at offset off in data.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// Validate checks every value, and reports the first bad one of the first
// model (by name) that has one.
func (c *Config) Validate() error {
	for _, name := range slices.Sorted(maps.Keys(c.Models)) {
		if err := c.Models[name].validate(); err != nil {
			return fmt.Errorf("models: %q: %w", name, err)
		}
		if strings.TrimSpace(name) == "" || strings.TrimSpace(name) != name {
			return fmt.Errorf("models: %q: a model name must be non-empty, without leading or trailing spaces", name)
		}
	}
	for _, label := range slices.Sorted(maps.Keys(c.MCPServers)) {
		if err := validateMCPServer(label, c.MCPServers[label]); err != nil {
			return fmt.Errorf("mcp_servers: %q: %w", label, err)
		}
	}
	return nil
}

// validateMCPServer checks a configured MCP server: a label a request can
// name, and one of a URL and a command.
func validateMCPServer(label string, s mcp.ServerConfig) error {
	if !mcpLabel.MatchString(label) {
		return errors.New("a label is 1-64 letters, digits, underscores or hyphens, as a request's server_label")
	}
	switch {
	case s.URL != "" && len(s.Command) > 0:
		return errors.New("give url or command, not both")
	case len(s.Command) > 0:
		if s.Command[0] == "" {
			return errors.New("command: the first element is the program")
		}
	case s.URL != "":
		p, err := url.Parse(s.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("url: want an http or https URL such as \"http://127.0.0.1:8000/mcp\", got %q", s.URL)
		}
	default:
		return errors.New("give url (a Streamable HTTP server) or command (a stdio server: the program and its arguments)")
	}
	return nil
}

var mcpLabel = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (m ModelConfig) validate() error {
	if m.TPS != nil {
		if err := checkRate(*m.TPS); err != nil {
			return fmt.Errorf("tps: %w", err)
		}
	}
	if m.PrefillRate != nil {
		if err := checkRate(*m.PrefillRate); err != nil {
			return fmt.Errorf("prefill_rate: %w", err)
		}
	}
	if m.TTFT != nil && *m.TTFT < 0 {
		return fmt.Errorf("ttft: %v is negative", time.Duration(*m.TTFT))
	}
	if m.ContextWindow != nil && *m.ContextWindow < 1 {
		return fmt.Errorf("context_window: %d: want a positive number of tokens", *m.ContextWindow)
	}
	if u := m.Upstream; u != nil {
		if err := u.validate(); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
	}
	return nil
}

func (u *UpstreamConfig) validate() error {
	if _, err := protocol.APIBase(u.BaseURL); err != nil {
		return fmt.Errorf("base_url: want an http or https URL such as \"http://127.0.0.1:8000/v1\", got %q", u.BaseURL)
	}
	if u.API != "" && u.API != UpstreamChat && u.API != UpstreamResponses {
		return fmt.Errorf("api: want %q (POST /v1/chat/completions, the default) or %q (POST /v1/responses), got %q", UpstreamChat, UpstreamResponses, u.API)
	}
	if u.Timeout < 0 {
		return fmt.Errorf("timeout: %v is negative", time.Duration(u.Timeout))
	}
	return nil
}

// checkRate accepts a rate in tokens per second: 0 (no wait) or positive.
func checkRate(v float64) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%v: want 0 or a positive number of tokens per second", v)
	}
	return nil
}

// timingFlags are the --tps, --ttft and --prefill-rate values, and which of
// them the command line set.
type timingFlags struct {
	timing sampler.Timing
	set    map[string]bool // by flag name
}

// model is a model's timing: each value from the flag when it was given,
// else from the model's config, else the flag's default.
func (f timingFlags) model(m ModelConfig) sampler.Timing {
	t := f.timing
	if m.TPS != nil && !f.set["tps"] {
		t.TPS = *m.TPS
	}
	if m.TTFT != nil && !f.set["ttft"] {
		t.TTFT = time.Duration(*m.TTFT)
	}
	if m.PrefillRate != nil && !f.set["prefill-rate"] {
		t.PrefillRate = *m.PrefillRate
	}
	return t
}

// models builds the served models: tether-scripted and every trace
// (embedded, and the config's directory's) as "replay:NAME", with the
// flags' timing (or their config entry's),
// and every model the config names. An upstream model with a timing is
// paced by it as a floor (never faster than the timing model). Each scripted
// model keeps its own prefix cache, as each model of an engine keeps its own
// KV blocks; e steps all their samples as one batch.
func models(cfg *Config, flags timingFlags, r *sampler.Renderer, e *sampler.Engine) (map[string]runtime.Sampler, error) {
	scripted := func(t sampler.Timing) *sampler.Scripted {
		s := sampler.NewScripted(r, t)
		s.SetEngine(e)
		return s
	}
	replay := func(t sampler.Timing, tr *sampler.Trace) *sampler.Replay {
		p := sampler.NewReplay(r, t, tr)
		p.SetEngine(e)
		return p
	}
	out := map[string]runtime.Sampler{sampler.ScriptedModel: scripted(flags.timing)}
	traces, err := loadTraces(cfg.traceDir())
	if err != nil {
		return nil, err
	}
	replays := map[string]*sampler.Trace{}
	for _, t := range traces {
		replays[sampler.ReplayPrefix+t.Name] = t
		out[sampler.ReplayPrefix+t.Name] = replay(flags.timing, t)
	}
	if cfg == nil {
		return out, nil
	}
	// window sets a model's context window to the config's, when it says.
	window := func(model interface{ SetContextWindow(int) }, m ModelConfig) {
		if m.ContextWindow != nil {
			model.SetContextWindow(*m.ContextWindow)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Models)) {
		m := cfg.Models[name]
		if m.Upstream != nil {
			up, err := upstream(m.Upstream, os.Getenv)
			if err != nil {
				return nil, fmt.Errorf("config: model %q: upstream: %w", name, err)
			}
			window(up, m)
			if t := flags.model(m); t.Paced() {
				// The timing model is a floor under the upstream's own speed.
				out[name] = sampler.NewFloored(up, r, t)
			} else {
				out[name] = up
			}
			continue
		}
		if t, ok := replays[name]; ok {
			p := replay(flags.model(m), t)
			window(p, m)
			out[name] = p
			continue
		}
		s := scripted(flags.model(m))
		window(s, m)
		out[name] = s
	}
	return out, nil
}
