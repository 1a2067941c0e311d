package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// A benchmark's servers in a process of their own: the test binary, started
// again with benchServerEnv set to the model's time to its first token,
// serves tether and the echo (echoHandler) on two loopback ports, prints
// their WebSocket URLs on one line and serves until its stdin closes. Its
// client, in the benchmark's process, then shares no scheduler with them:
// as a client of a real server does, it reads on a thread of its own while
// the server goes on with its work.
const benchServerEnv = "TETHER_BENCH_SERVER"

// serveBenchIfChild serves and exits when the process was started by
// startBenchServer; TestMain calls it first.
func serveBenchIfChild() {
	spec, ok := os.LookupEnv(benchServerEnv)
	if !ok {
		return
	}
	if err := serveBench(spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveBench(spec string) error {
	ttft, err := time.ParseDuration(spec)
	if err != nil {
		return err
	}
	r, err := sharedRenderer()
	if err != nil {
		return err
	}
	opts := runtime.Options{Renderer: r}
	if ttft > 0 {
		opts.Models = map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(r, sampler.Timing{TTFT: ttft})}
	}
	srv, err := runtime.NewServer(opts)
	if err != nil {
		return err
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	echo := httptest.NewServer(echoHandler())
	defer echo.Close()
	fmt.Printf("%s/v1/responses %s\n", wsURL(hs.URL), wsURL(echo.URL))
	io.Copy(io.Discard, os.Stdin) // until the benchmark is done with us
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") }

// startBenchServer starts the benchmark's servers in a child process (see
// benchServerEnv) and returns their URLs: tether's responses endpoint and
// the echo's. The child ends with the benchmark.
func startBenchServer(b *testing.B, ttft time.Duration) (tether, echo string) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), benchServerEnv+"="+ttft.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("bench server: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	urls := strings.Fields(line)
	if err != nil || len(urls) != 2 {
		b.Fatalf("bench server said %q: %v", line, err)
	}
	return urls[0], urls[1]
}

// echoHandler is a WebSocket echo server that answers each frame with one
// of the length the frame asks for in its first 8 bytes: the floor under a
// round trip of the same frames on the same loopback, with the same
// WebSocket library on both ends, and no work between them.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(-1)
		out := bytes.Repeat([]byte("x"), 1<<16)
		for {
			_, in, err := c.Read(r.Context())
			if err != nil {
				return
			}
			n, _ := strconv.Atoi(strings.TrimSpace(string(in[:min(8, len(in))])))
			if err := c.Write(r.Context(), websocket.MessageText, out[:min(n, len(out))]); err != nil {
				return
			}
		}
	})
}
