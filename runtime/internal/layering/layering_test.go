package layering

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	_ "github.com/tether-run/tether/runtime"
)

// TestImportStartsNothing: a program that imports runtime has no goroutine
// of the import's (a search index's workers started by an init) and
// nothing registered on http.DefaultServeMux (net/http/pprof's init).
func TestImportStartsNothing(t *testing.T) {
	goleak.VerifyNone(t)
	for _, path := range []string{"/debug/pprof/", "/debug/vars", "/metrics"} {
		if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, path, nil)); pattern != "" {
			t.Errorf("importing runtime registers %s on the default mux (pattern %q)", path, pattern)
		}
	}
}

// maxDeps bounds the packages outside the standard library that runtime
// brings: the wire codecs, the tokenizer, the WebSocket, the safety
// classifier's matchers, x/sync and x/time.
const maxDeps = 60

// forbidden are what the optional layers bring, which runtime must not:
// each is a package of its own that imports runtime.
var forbidden = []string{
	"github.com/blevesearch/",                  // hostedtools/websearch
	"github.com/modelcontextprotocol/",         // hostedtools/mcp
	"github.com/quic-go/",                      // runtime/webtransport
	"github.com/redis/",                        // runtime/redisstore
	"github.com/prometheus/",                   // runtime/prommetrics
	"github.com/tether-run/tether/hostedtools", // a hosted tool plugs in as a runtime.Tool
}

// TestRuntimeDeps: runtime's dependencies, as go list counts them: none of
// an optional layer's, at most maxDeps in all.
func TestRuntimeDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot list runtime's dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/tether-run/tether/runtime").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("runtime depends on %s", d)
			}
		}
	}
	if len(deps) > maxDeps {
		t.Errorf("runtime brings %d packages outside the standard library, more than %d:\n%s", len(deps), maxDeps, strings.Join(deps, "\n"))
	}
	t.Logf("%d packages outside the standard library", len(deps))
}
