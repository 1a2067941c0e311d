package ablate

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
)

// TestReport writes a run's files and checks them: every chart is
// well-formed SVG with shapes in it, and report.html, opened in headless
// Chromium, draws every chart it holds.
func TestReport(t *testing.T) {
	t.Parallel()
	w, err := SyntheticWorkload(4, 2, time.Millisecond, 200)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), Config{Workload: w, Modes: Designs(clienttools.Modes...), Speeds: []float64{0, 4000}, Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	charts, err := res.Charts()
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) != 4 {
		t.Fatalf("%d charts, want 4", len(charts))
	}
	for _, c := range charts {
		b, err := os.ReadFile(filepath.Join(dir, c.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, c.SVG) {
			t.Errorf("%s on disk differs from the chart", c.Name)
		}
		checkSVG(t, c.Name, b)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "suspend", "stateless", "End to end", "end to end, computed", "(computed)", "4 client calls), 2 rounds per mode", SchemaVersion} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	browser := chromium()
	if browser == "" {
		t.Skip("no chromium on PATH (.ci/run installs Debian's): report.html not rendered")
	}
	// Chromium's first start on a cold machine, with other packages' tests
	// beside it, takes minutes: it gets what the test binary's deadline
	// (-timeout) leaves, less room to report.
	ctx, cancel := t.Context(), context.CancelFunc(func() {})
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--window-size=1280,4000", "--dump-dom", "file://"+filepath.Join(dir, "report.html"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.Bytes())
	}
	m := regexp.MustCompile(`data-charts-drawn="(\d+)" data-charts="(\d+)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not run in chromium: %.500s", dom)
	}
	if string(m[1]) != "4" || string(m[2]) != "4" {
		t.Errorf("chromium drew %s of %s charts, want 4 of 4", m[1], m[2])
	}
	width := regexp.MustCompile(`data-scroll-width="(\d+)" data-view-width="(\d+)"`).FindSubmatch(dom)
	if width == nil {
		t.Fatalf("the page did not say its width: %.500s", dom)
	}
	if scroll, view := atoi(t, width[1]), atoi(t, width[2]); view != 1280 || scroll > view {
		t.Errorf("report.html lays out %d px wide in a %d px window: it scrolls sideways", scroll, view)
	}
}

func atoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkSVG checks that b is well-formed XML with an svg root and shapes.
func checkSVG(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root, shapes := "", 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Errorf("%s: not well-formed: %v", name, err)
			return
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "path" || se.Name.Local == "rect" {
				shapes++
			}
		}
	}
	if root != "svg" || shapes < 10 {
		t.Errorf("%s: root <%s>, %d shapes", name, root, shapes)
	}
}

// chromium is the path of a Chromium binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
