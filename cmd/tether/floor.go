package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/internal/streamfloor"
	"github.com/tether-run/tether/sampler"
)

// ablateFloor runs "tether ablate floor": the streaming floor a load run
// measures tether against, served from a recording.
func ablateFloor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCommand("ablate floor", `Usage: tether ablate floor --recording FILE [flags]

Serves the streaming floor that tether ablate --load and --park run beside
tether: a WebSocket server on /v1/responses that answers each message with
the next step of a recorded rollout (the frames a tether sent for it, as
ablate records them before the run, floor-recording.json), each token's
frame when the same engine as tether's models releases the token, and does
nothing else: no decoding, no tokenizing, no store. Its cost is the
machine's for those bytes at that cadence, and what --cost-step and
--cost-token add. It prints "listening on
http://HOST:PORT" (https with --tls-cert) once it serves, and serves /metrics,
/debug/pprof/heap, /debug/pprof/profile and /debug/pprof/trace as tether serve --pprof does.`, `tether ablate floor --recording out/floor-recording.json --tps 1000`, 0)
	addr := fs.String("addr", "127.0.0.1:0", "listen address; port 0 picks a free port")
	recording := fs.String("recording", "", "the recorded rollout to serve (floor-recording.json)")
	tps := fs.Float64("tps", 0, "output tokens per second, as tether serve's; 0 is unpaced")
	ttft := fs.Duration("ttft", 0, "fixed time to first token, as tether serve's")
	prefillRate := fs.Float64("prefill-rate", 0, "uncached prompt tokens read per second, as tether serve's; 0 is free")
	step := fs.Duration("engine-step", 0, "least time between two engine steps, as tether serve's")
	costStep := fs.Duration("cost-step", 0, "CPU to spend, spinning, on each message a client sends, before its step streams: a costlier server's work on a round trip (docs/measuring.md, \"A floor as costly\")")
	tlsCert := fs.String("tls-cert", "", "certificate chain (PEM): given, the floor serves HTTPS and WSS with it, as tether serve --tls-cert does (ablate --load-tls)")
	tlsKey := fs.String("tls-key", "", "private key (PEM) of --tls-cert")
	costToken := fs.Duration("cost-token", 0, "CPU to spend, spinning, on each token as the engine releases it: a costlier server's work on each event")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *recording == "" {
		fs.fail(stderr, "--recording is required")
		return 2
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fs.fail(stderr, "--tls-cert and --tls-key go together")
		return 2
	}
	b, err := os.ReadFile(*recording)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate floor:", err)
		return 1
	}
	var rec streamfloor.Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		fmt.Fprintf(stderr, "tether: ablate floor: %s: %v\n", *recording, err)
		return 1
	}
	srv, err := streamfloor.NewServer(&rec, sampler.Timing{TPS: *tps, TTFT: *ttft, PrefillRate: *prefillRate}, *step)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate floor:", err)
		return 1
	}
	srv.SetCost(streamfloor.Cost{Step: *costStep, Token: *costToken})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate floor:", err)
		return 1
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	scheme, serve := "http", func() error { return hs.Serve(ln) }
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate floor: --tls-cert:", err)
			return 1
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme, serve = "https", func() error { return hs.ServeTLS(flushers.Listener(ln), "", "") } // as tether serves it
	}
	fmt.Fprintf(stdout, "listening on %s://%s\n", scheme, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case <-ctx.Done():
		hs.Close()
		srv.Close()
		return 0
	case err := <-done:
		fmt.Fprintln(stderr, "tether: ablate floor:", err)
		return 1
	}
}
