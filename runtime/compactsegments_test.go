package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/runtime"
)

// searchScript is a user message scripting n hosted web_search steps.
func searchScript(n int) string {
	var b strings.Builder
	b.WriteString("Search it all.\n")
	for i := range n {
		fmt.Fprintf(&b, "call: web_search {\"query\":\"step %d of the parser's history\"}\n", i)
	}
	return b.String()
}

// BenchmarkCompactionBytes measures one response of 300 hosted search
// steps with compact_threshold 64, a threshold below what one step adds, so
// that it compacts before nearly every step, with MaxCompactions and
// MaxOutputBytes raised out of the way: response-bytes is its JSON as a client reads it,
// largest-compaction-bytes its largest compaction item's content.
// search=corpus searches web_search's embedded corpus, as tether serve
// does, whose results quote the pages they found; search=stub finds two
// bare links a query.
func BenchmarkCompactionBytes(b *testing.B) {
	docs, err := websearch.DefaultCorpus()
	if err != nil {
		b.Fatal(err)
	}
	ix, err := websearch.NewIndex(docs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	for _, search := range []struct {
		name string
		tool runtime.Tool
	}{{"stub", searchTool()}, {"corpus", websearch.New(ix)}} {
		b.Run("search="+search.name, func(b *testing.B) { benchmarkCompactionBytes(b, search.tool) })
	}
}

func benchmarkCompactionBytes(b *testing.B, search runtime.Tool) {
	h := newHarness(b, runtime.Options{Limits: runtime.Limits{MaxCompactions: 1000, MaxOutputBytes: 1 << 30}, HostedTools: []runtime.Tool{search}})
	body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": searchScript(300),
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 64}}}
	b.ReportAllocs()
	for b.Loop() {
		code, resp := h.post(b, "/responses", body)
		var r struct {
			Status            string
			IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
			Output            []struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			}
		}
		if err := json.Unmarshal(resp, &r); err != nil || code != 200 || r.Status != "completed" {
			b.Fatalf("%d %s %+v %.300s", code, r.Status, r.IncompleteDetails, resp)
		}
		compactions, largest := 0, 0
		for _, it := range r.Output {
			if it.Type == "compaction" {
				compactions++
				largest = max(largest, len(it.EncryptedContent))
			}
		}
		b.ReportMetric(float64(len(resp)), "response-bytes")
		b.ReportMetric(float64(largest), "largest-compaction-bytes")
		b.ReportMetric(float64(compactions), "compactions")
	}
}
