package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// TestBrowser runs the browser example's page in headless Chromium against
// a tether that requires API keys: the example's server mints the page a
// client secret with its key, the page connects over WebTransport with it
// and the certificate pinned by its hash, runs a suspended rollout whose
// client tool runs in the page, and reports the completed response to the
// example's server, which exits 0 only then.
func TestBrowser(t *testing.T) {
	t.Parallel()
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no chromium on PATH (.ci/run installs Debian's): the page is not run")
	}
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	// With API keys: the page gets a client secret from the example's
	// server, which holds the key.
	keys := new(runtime.Keys)
	keys.Store(map[string]string{"sk-page-backend": "web"})
	srv, err := runtime.NewServer(runtime.Options{Renderer: r, OriginPatterns: []string{"127.0.0.1:*"}, Keys: keys,
		Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{TPS: 200})}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := webtransport.SelfSignedCertificate(webtransport.MaxCertificateHashValidity, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(srv) // where the example's server mints the page's secret
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		wt.Close()
		api.Close()
	})

	// Chromium's first start on a cold machine, with other packages' tests
	// beside it, takes minutes: the page gets what the test binary's
	// deadline leaves.
	ctx, cancel := untilDeadline(t)
	defer cancel()
	example := exec.CommandContext(ctx, binary(t, "browser"), "-url", wt.URL(), "-hash", wt.CertificateHash(), "-once",
		"-api", api.URL+"/v1", "-api-key", "sk-page-backend")
	example.WaitDelay = time.Second
	out, err := example.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := example.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "open http://") {
		t.Fatalf("the example printed %q, want open http://…", lines.Text())
	}
	page := strings.TrimPrefix(lines.Text(), "open ")
	// What the page gets: a client secret, never the key.
	if resp, err := http.Get(page); err != nil {
		t.Fatal(err)
	} else {
		html, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(html, []byte(`"secret":"ek_`)) || bytes.Contains(html, []byte("sk-page-backend")) {
			t.Fatalf("the page's config: %s", html[bytes.Index(html, []byte("const config")):][:200])
		}
	}

	chrome := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--enable-logging=stderr", "--v=0", page)
	var chromeErr bytes.Buffer
	chrome.Stderr = &chromeErr
	if err := chrome.Start(); err != nil {
		t.Fatal(err)
	}
	// chromeLog stops Chromium, and then reads what it wrote: its stderr
	// is written by exec's goroutine until it has exited.
	stopped := false
	chromeLog := func() string {
		if !stopped {
			stopped = true
			chrome.Process.Kill()
			chrome.Wait()
		}
		return chromeErr.String()
	}
	defer chromeLog()

	var report strings.Builder
	for lines.Scan() {
		report.WriteString(lines.Text() + "\n")
	}
	err = example.Wait()
	t.Logf("the example: %s", report.String())
	if err != nil {
		t.Fatalf("the page did not complete its rollout (%v): %s\nchromium's log:\n%s", err, report.String(), tail(chromeLog(), 4000))
	}
	if !strings.Contains(report.String(), "status completed") || !strings.Contains(report.String(), "page_info returned") {
		t.Errorf("the page reported %q", report.String())
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
