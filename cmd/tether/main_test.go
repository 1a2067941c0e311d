package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// serveInProcess runs "tether serve --addr 127.0.0.1:0" with args in
// process and returns its base URL (http://127.0.0.1:PORT) and the function
// that stops it, as a signal would, and checks that it exits 0.
func serveInProcess(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	lines, stop := serveLines(t, 1, args...)
	return strings.TrimPrefix(lines[0], "listening on "), stop
}

// serveLines is serveInProcess returning the first n lines serve prints
// (the listening line, then, with --wt-addr, the webtransport line),
// without their newlines.
func serveLines(t *testing.T, n int, args ...string) (lines []string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, &stderr)
		pw.Close()
	}()
	r := bufio.NewReader(pr)
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("reading serve's line %d: %v (stderr: %s)", len(lines)+1, err, stderr.String())
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	go io.Copy(io.Discard, r)
	return lines, func() {
		t.Helper()
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d, stderr %s", code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not stop after its context ended")
		}
	}
}

// TestServe starts "tether serve --addr 127.0.0.1:0" in process, reads the
// "listening on" line, uses the server, and stops it with the context, as a
// signal would.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--tps", "0"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listening line: %v (stderr: %s)", err, stderr.String())
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") || strings.HasSuffix(base, ":0") {
		t.Fatalf("first line %q, want listening on http://127.0.0.1:PORT", line)
	}
	go io.Copy(io.Discard, pr)

	resp, err := http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"no-such-model","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"code":"model_not_found"`) {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Post(base+"/v1/responses", "application/json", strings.NewReader(`{"model":"tether-scripted","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d, stderr: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}

func TestUsage(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "serve") {
		t.Fatalf("no args: code %d, stderr %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{"bogus"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command: code %d", code)
	}
	if code := run(context.Background(), []string{"serve", "--no-such-flag"}, &out, &errOut); code != 2 {
		t.Fatalf("bad flag: code %d", code)
	}
}

// TestServeIdleTimeout: an idle keep-alive connection is closed after
// --idle-timeout instead of holding a goroutine for as long as the client
// likes.
func TestServeIdleTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--idle-timeout", "300ms"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening on http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on the test, not the thing measured
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive: %v after %s, want the server to close it", err, time.Since(start))
	}
	cancel()
	<-done
}

// TestServeWebTransport: "tether serve --wt-addr" prints the WebTransport
// line after the listening line, with the certificate's hash, and a client
// that pins that hash runs a suspended rollout over it; HTTP/3 serves the
// other endpoints on the same address.
func TestServeWebTransport(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--wt-addr", "127.0.0.1:0", "--tps", "0"}, pw, &stderr)
		pw.Close()
	}()
	r := bufio.NewReader(pr)
	first, _ := r.ReadString('\n')
	second, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "listening on http://127.0.0.1:") {
		t.Fatalf("lines %q %q: %v (stderr: %s)", first, second, err, stderr.String())
	}
	m := regexp.MustCompile(`^webtransport on (https://127\.0\.0\.1:\d+) sha256=([0-9a-f]{64})\n$`).FindStringSubmatch(second)
	if m == nil || strings.HasSuffix(m[1], ":0") {
		t.Fatalf("second line %q, want webtransport on https://127.0.0.1:PORT sha256=HEX", second)
	}
	go io.Copy(io.Discard, pr)

	c := &clienttools.Client{BaseURL: m[1] + "/v1", Transport: clienttools.TransportWebTransport, CertHash: m[2]}
	res, err := c.Run(ctx, clienttools.Rollout{Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage("call: echo {\"x\":1}")}},
		Funcs:   []clienttools.Func{{Name: "echo", Run: func(_ context.Context, args string) (string, error) { return args, nil }}}})
	if err != nil || res.Response.Status != protocol.ResponseCompleted || len(res.Calls) != 1 {
		t.Fatalf("a suspended rollout over WebTransport: %v, %+v", err, res)
	}
	wrong := &clienttools.Client{BaseURL: m[1] + "/v1", Transport: clienttools.TransportWebTransport, CertHash: strings.Repeat("ab", 32)}
	if _, err := wrong.Run(ctx, clienttools.Rollout{Mode: clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage("hi")}}}); err == nil ||
		!strings.Contains(err.Error(), "not the pinned") {
		t.Errorf("a client pinning another certificate: %v", err)
	}

	tlsConf, err := clienttools.PinCertificate(m[2])
	if err != nil {
		t.Fatal(err)
	}
	h3 := &http3.Transport{TLSClientConfig: tlsConf}
	defer h3.Close()
	resp, err := (&http.Client{Transport: h3}).Get(m[1] + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/3.0" || !strings.Contains(string(body), "tether-scripted") {
		t.Errorf("GET /v1/models over HTTP/3: %s %d %s", resp.Proto, resp.StatusCode, body)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d, stderr: %s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}
