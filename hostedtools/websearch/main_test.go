package websearch

import (
	"context"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/protocol"
)

// TestMain checks that no test leaves a goroutine behind: an Index stops its
// goroutines on Close, and SearXNG leaves none once its server is gone.
// bleve's analysis workers are started when the package is initialized and
// live for the whole process.
//
// The test binary is also the stdio MCP server TestMCPStdio starts.
func TestMain(m *testing.M) {
	mcptest.ServeStdioIfChild()
	code := m.Run()
	if stdlib.ix != nil {
		stdlib.ix.Close()
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// stdlib is the Index of DefaultCorpus, built once per test binary: it takes
// about a second, several under -race.
var stdlib struct {
	once sync.Once
	ix   *Index
	err  error
}

func stdlibIndex(tb testing.TB) *Index {
	tb.Helper()
	stdlib.once.Do(func() {
		docs, err := DefaultCorpus()
		if err != nil {
			stdlib.err = err
			return
		}
		stdlib.ix, stdlib.err = NewIndex(docs)
	})
	if stdlib.err != nil {
		tb.Fatalf("stdlib index: %v", stdlib.err)
	}
	return stdlib.ix
}

// newTestIndex builds an Index over docs and closes it when the test ends.
func newTestIndex(tb testing.TB, docs []Document) *Index {
	tb.Helper()
	ix, err := NewIndex(docs)
	if err != nil {
		tb.Fatalf("NewIndex: %v", err)
	}
	tb.Cleanup(func() { ix.Close() })
	return ix
}

// search runs ix.Search and fails the test on error.
func search(tb testing.TB, s Searcher, query string, limit int) []protocol.WebSearchSource {
	tb.Helper()
	got, err := s.Search(context.Background(), query, limit)
	if err != nil {
		tb.Fatalf("Search(%q): %v", query, err)
	}
	return got
}

func urls(sources []protocol.WebSearchSource) []string {
	out := make([]string, len(sources))
	for i, s := range sources {
		out[i] = s.URL
	}
	return out
}
