package layering

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
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

// raceOnly are what runtime brings in the race build alone: goroutine ids,
// for the lock-order check (runtime/internal/lockrank), which a program
// built without -race does not link.
var raceOnly = []string{"github.com/petermattis/goid"}

// TestRuntimeDeps: runtime's dependencies, as go list counts them: none of
// an optional layer's, none of the race build's alone, at most maxDeps in
// all.
func TestRuntimeDeps(t *testing.T) {
	deps := runtimeDeps(t)
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("runtime depends on %s", d)
			}
		}
		if slices.Contains(raceOnly, d) {
			t.Errorf("runtime depends on %s outside the race build", d)
		}
	}
	if len(deps) > maxDeps {
		t.Errorf("runtime brings %d packages outside the standard library, more than %d:\n%s", len(deps), maxDeps, strings.Join(deps, "\n"))
	}
	t.Logf("%d packages outside the standard library", len(deps))
}

// TestRuntimeRaceDeps: the race build brings raceOnly, and nothing else
// more.
func TestRuntimeRaceDeps(t *testing.T) {
	deps, raceDeps := runtimeDeps(t), runtimeDeps(t, "-race")
	var more []string
	for _, d := range raceDeps {
		if !slices.Contains(deps, d) {
			more = append(more, d)
		}
	}
	slices.Sort(more)
	if want := slices.Sorted(slices.Values(raceOnly)); !slices.Equal(more, want) {
		t.Errorf("the race build brings %q more, want %q", more, want)
	}
}

// runtimeDeps lists the packages outside the standard library that runtime
// depends on, built with flags.
func runtimeDeps(t *testing.T, flags ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot list runtime's dependencies")
	}
	args := append(append([]string{"list"}, flags...), "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/tether-run/tether/runtime")
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// testHelpers are the packages under runtime/internal that import runtime:
// they test it, and nothing but tests imports them.
var testHelpers = []string{
	"github.com/tether-run/tether/runtime/internal/backgroundtest", // the suite every BackgroundStore passes
	"github.com/tether-run/tether/runtime/internal/checkpointtest", // the suite every Checkpoints store passes
	"github.com/tether-run/tether/runtime/internal/layering",       // this test
}

// TestInternalLeaves: a package under runtime/internal is a leaf that
// runtime uses through a narrow interface, and imports nothing of
// runtime's; only the test helpers import runtime.
func TestInternalLeaves(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot list runtime's internal packages")
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "github.com/tether-run/tether/runtime/internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const runtimePkg = "github.com/tether-run/tether/runtime"
	leaves := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		if !slices.Contains(deps, runtimePkg) {
			leaves++
			continue
		}
		if !slices.Contains(testHelpers, pkg) {
			t.Errorf("%s imports runtime: a package under runtime/internal is a leaf of runtime's, not a layer above it", pkg)
		}
	}
	if leaves == 0 {
		t.Error("no package under runtime/internal is a leaf: the listing is wrong")
	}
}
