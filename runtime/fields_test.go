package runtime_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fieldsResponse is what these tests read of a response.
type fieldsResponse struct {
	Status            string
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Error             *struct{ Code, Message string }
	Output            []struct {
		Type, Status string
	}
	Usage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	ServiceTier          string  `json:"service_tier"`
	Truncation           string  `json:"truncation"`
	PromptCacheRetention *string `json:"prompt_cache_retention"`
}

// create posts a create to h and decodes the response, which must be a 200.
func (h *harness) respond(t *testing.T, body map[string]any) fieldsResponse {
	t.Helper()
	code, b := h.post(t, "/responses", body)
	var resp fieldsResponse
	if err := json.Unmarshal(b, &resp); err != nil || code != 200 {
		t.Fatalf("%d %.400s", code, b)
	}
	return resp
}

// TestPromptCacheRetention: prompt_cache_retention keeps a prompt's prefix
// in the model's cache as long as it asks, by the cache's clock, and is
// echoed. The same prompt again finds it all cached while it is kept (an
// in_memory one for 10 minutes idle, a 24h one for a day), and nothing
// cached once it has gone.
func TestPromptCacheRetention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		retention string
		kept      time.Duration // idle, and still cached
		gone      time.Duration // idle, and gone
	}{
		{protocol.CacheInMemory, 9 * time.Minute, sampler.DefaultInMemoryRetention},
		{protocol.Cache24h, 23 * time.Hour, sampler.Retention24h},
	}
	for _, tc := range cases {
		t.Run(tc.retention, func(t *testing.T) {
			t.Parallel()
			clock := newTestClock()
			model := sampler.NewScripted(nil, sampler.Timing{})
			model.Cache().Configure(sampler.PrefixCacheOptions{Now: clock.now})
			h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"m": model}})
			body := map[string]any{"model": "m", "store": false, "input": "Tell me about the cache.", "prompt_cache_retention": tc.retention}
			ask := func(idle time.Duration) fieldsResponse {
				t.Helper()
				clock.advance(idle)
				resp := h.respond(t, body)
				if resp.PromptCacheRetention == nil || *resp.PromptCacheRetention != tc.retention {
					t.Fatalf("prompt_cache_retention echoed %v, want %s", resp.PromptCacheRetention, tc.retention)
				}
				return resp
			}
			if resp := ask(0); resp.Usage.InputTokensDetails.CachedTokens != 0 {
				t.Fatalf("first: %d cached", resp.Usage.InputTokensDetails.CachedTokens)
			}
			if resp := ask(tc.kept); resp.Usage.InputTokensDetails.CachedTokens != resp.Usage.InputTokens {
				t.Errorf("after %s idle: %d of %d cached, want all", tc.kept, resp.Usage.InputTokensDetails.CachedTokens, resp.Usage.InputTokens)
			}
			if resp := ask(tc.gone); resp.Usage.InputTokensDetails.CachedTokens != 0 {
				t.Errorf("after %s idle: %d cached, want none", tc.gone, resp.Usage.InputTokensDetails.CachedTokens)
			}
		})
	}
}

// TestFieldsRefused: a field of a value the API does not take, or one the
// model cannot honour, is refused before anything starts, with the API's
// code and the field's param.
func TestFieldsRefused(t *testing.T) {
	t.Parallel()
	// bare keeps no prompt cache and passes nothing on.
	bare := samplerFunc(func(context.Context, *sampler.Request, func(sampler.Delta)) (sampler.Result, error) {
		return sampler.Result{}, nil
	})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(nil, sampler.Timing{}), "bare": bare}})
	cases := []struct {
		name   string
		fields map[string]any
		code   string
		param  string
	}{
		{"retention of no value the API has", map[string]any{"prompt_cache_retention": "1h"}, protocol.CodeInvalidValue, "prompt_cache_retention"},
		{"retention of a model without a cache", map[string]any{"model": "bare", "prompt_cache_retention": "24h"}, protocol.CodeUnsupportedParameter, "prompt_cache_retention"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{"model": "tether-scripted", "input": "hi"}
			for k, v := range tc.fields {
				body[k] = v
			}
			code, b := h.post(t, "/responses", body)
			var e struct {
				Error struct{ Code, Param, Message string }
			}
			if err := json.Unmarshal(b, &e); err != nil || code != 400 || e.Error.Code != tc.code || e.Error.Param != tc.param || e.Error.Message == "" {
				t.Errorf("got %d %s, want 400 %s (%s)", code, b, tc.code, tc.param)
			}
		})
	}
}
