package clienttools_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the client joins
// its tool goroutines and closes its connections. bleve's analysis
// workers (package hostedtools, through the runtime the tests serve) start
// when the package is initialized and live for the whole process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}
