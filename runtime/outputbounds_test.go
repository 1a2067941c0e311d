package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// TestOutputBounds: a small request cannot grow one response without
// bound. 300 hosted search steps with compact_threshold 64 (a threshold
// below what one step adds) end incomplete at the response's compaction
// bound (max_compactions) rather than compacting at every step; the same
// steps end at the output item bound (max_output_items), and at the bound
// on what the model streams (max_output_bytes), each before its next step.
func TestOutputBounds(t *testing.T) {
	t.Parallel()
	var script strings.Builder
	script.WriteString("Search it all.\n")
	for i := range 300 {
		fmt.Fprintf(&script, "call: web_search {\"query\":\"step %d of the parser's history\"}\n", i)
	}
	cases := []struct {
		name    string
		limits  runtime.Limits
		compact bool
		reason  string
		check   func(t *testing.T, items []string, bytes int)
	}{
		{"compactions", runtime.Limits{MaxCompactions: 8}, true, "max_compactions", func(t *testing.T, items []string, _ int) {
			if n := strings.Count(strings.Join(items, " "), "compaction"); n != 8 {
				t.Errorf("%d compactions, want the 8 of the bound", n)
			}
		}},
		{"items", runtime.Limits{MaxOutputItems: 50}, false, "max_output_items", func(t *testing.T, items []string, _ int) {
			if len(items) < 50 || len(items) > 51 {
				t.Errorf("%d output items, want the 50 of the bound (a step's last call may finish past it)", len(items))
			}
		}},
		{"bytes", runtime.Limits{MaxOutputBytes: 2000}, false, "max_output_bytes", func(t *testing.T, items []string, _ int) {
			if len(items) > 80 {
				t.Errorf("%d output items past a bound of 2,000 bytes streamed", len(items))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, runtime.Options{Limits: tc.limits, HostedTools: []runtime.Tool{searchTool()}})
			body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": script.String()}
			if tc.compact {
				body["context_management"] = []any{map[string]any{"type": "compaction", "compact_threshold": 64}}
			}
			code, b := h.post(t, "/responses", body)
			var resp struct {
				Status            string
				IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
				Output            []json.RawMessage
			}
			if err := json.Unmarshal(b, &resp); err != nil || code != 200 {
				t.Fatalf("%d %.300s", code, b)
			}
			if resp.Status != "incomplete" || resp.IncompleteDetails == nil || resp.IncompleteDetails.Reason != tc.reason {
				t.Fatalf("ended %s %+v with %d items, want incomplete, %s", resp.Status, resp.IncompleteDetails, len(resp.Output), tc.reason)
			}
			var types []string
			for _, it := range resp.Output {
				var typed struct{ Type string }
				json.Unmarshal(it, &typed)
				types = append(types, typed.Type)
			}
			t.Logf("%d output items, %d bytes", len(resp.Output), len(b))
			tc.check(t, types, len(b))
		})
	}
}
