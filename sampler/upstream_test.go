package sampler

import (
	"strings"
	"testing"
)

// These tests cover an upstream's configuration and how it maps an upstream's
// HTTP errors; upstream_stream_test.go decodes its streams and
// upstream_request_test.go checks the bodies it sends.

func TestErrorBodyMessage(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"error":{"message":"The model 'x' does not exist.","type":"invalid_request_error","code":"model_not_found"}}`: "The model 'x' does not exist.",
		`{"error":"model \"x\" not found, try pulling it first"}`:                                                       `model "x" not found, try pulling it first`,
		`{"object":"error","message":"maximum context length is 4096","code":400}`:                                      "maximum context length is 4096",
		`{"detail":"Not Found"}`:        "Not Found",
		`{"detail":[{"loc":["body"]}]}`: `[{"loc":["body"]}]`,
		"upstream connect error\n":      "upstream connect error",
		"":                              "(no message)",
		strings.Repeat("é", 600):        strings.Repeat("é", 500) + "…",
	} {
		if got := errorBodyMessage([]byte(body)); got != want {
			t.Errorf("errorBodyMessage(%.40q) = %q, want %q", body, got, want)
		}
	}
}

func TestUpstreamErrorStatus(t *testing.T) {
	t.Parallel()
	for upstream, want := range map[int]int{400: 400, 413: 400, 422: 400, 429: 429, 401: 502, 404: 502, 500: 502, 503: 502, 0: 502} {
		if got := upstreamError(upstream, "x").Status; got != want {
			t.Errorf("upstream %d: status %d, want %d", upstream, got, want)
		}
	}
}

func TestNewUpstreamConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg      UpstreamConfig
		endpoint string
	}{
		{UpstreamConfig{BaseURL: "http://127.0.0.1:8080/v1"}, "http://127.0.0.1:8080/v1/chat/completions"},
		{UpstreamConfig{BaseURL: "https://api.openai.com/v1/", API: UpstreamResponses}, "https://api.openai.com/v1/responses"},
		{UpstreamConfig{BaseURL: "localhost:11434/v1"}, ""},
		{UpstreamConfig{BaseURL: "http:///v1"}, ""},
		{UpstreamConfig{BaseURL: "http://h/v1", API: "completions"}, ""},
	} {
		u, err := NewUpstream(tc.cfg)
		switch {
		case tc.endpoint == "" && err == nil:
			t.Errorf("%+v: no error", tc.cfg)
		case tc.endpoint != "" && (err != nil || u.endpoint != tc.endpoint || u.timeout != DefaultUpstreamTimeout):
			t.Errorf("%+v: %v, %+v", tc.cfg, err, u)
		}
	}
}
