// Compare runs the same agent task in every design of the client kit and prints, for
// each, what the rollout cost the client: wall time, split into the
// model's time (as the server reports it), time spent waiting on client
// tools, and the rest, the API overhead (Result.Breakdown); turns
// (requests sent), client tool calls, kilobytes each way, and time to
// first event (from sending a request to the first event that answered
// it).
//
// The model replay:calc-fix-12 replays a recorded coding-agent rollout of
// 12 tool calls; the local tools (list_dir, read_file, grep, apply_patch,
// shell) run them for real on a fresh copy of the fixture repository for
// each mode, so every mode does the same work. shell runs "go test", so Go
// must be on PATH.
//
// Run a server in one shell and the example in another, from the root of
// the tether repository:
//
//	go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//	go run ./examples/compare
//
// -url (default $TETHER_URL, else http://127.0.0.1:8080/v1) points it at
// another server; -repo at the fixture repository (default: tether's
// sampler/traces/repo, looked for from the current directory up).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

const task = "In the calc repository, `2^3^2` evaluates to 64 but the README says `^` is right associative, " +
	"so it should be 512. Find the bug, fix it, and make sure the tests pass."

func main() {
	url := flag.String("url", defaultURL(), "base URL of the server, as OpenAI clients take it")
	repo := flag.String("repo", "", "the fixture repository the trace was recorded on (default: sampler/traces/repo, found from the current directory up)")
	model := flag.String("model", "replay:calc-fix-12", "model to run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, *repo, *model); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, repo, model string) error {
	if repo == "" {
		var err error
		if repo, err = findRepo(); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
		return fmt.Errorf("-repo %s: not a directory", repo)
	}
	fmt.Printf("%s at %s, tools on copies of %s\n\n", model, url, repo)
	const row = "%-10s %9s %9s %9s %12s %6s %6s %10s %14s %12s %12s\n"
	fmt.Printf(row, "mode", "wall", "model", "tools", "API overhead", "turns", "calls", "sent (kB)", "received (kB)", "first event", "summed")
	warmUp(ctx, url)
	for _, mode := range clienttools.Modes {
		res, err := runMode(ctx, mode, url, repo, model)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		var sent, received int
		var firstEvent time.Duration // summed over the turns
		for _, t := range res.Turns {
			sent += t.BytesSent
			received += t.BytesReceived
			firstEvent += t.FirstEvent
		}
		b := res.Breakdown()
		model, overhead := "-", "-" // the server reports no timings
		if b.Model > 0 {
			model, overhead = round(b.Model), round(b.Overhead)
		}
		fmt.Printf(row, mode, round(res.Elapsed), model, round(b.Tools), overhead, strconv.Itoa(len(res.Turns)), strconv.Itoa(len(res.Calls)),
			kB(sent), kB(received), res.Turns[0].FirstEvent.Round(time.Microsecond), firstEvent.Round(time.Microsecond))
	}
	fmt.Println("\nmodel: the server's sampling time, as it reports it (- when it does not); tools: time waiting on client tools;\n" +
		"API overhead: wall - model - tools; first event: from sending the first request to its first event; summed: over every turn")
	return nil
}

// round rounds d to the millisecond, or to the microsecond below one.
func round(d time.Duration) string {
	if d < time.Millisecond && d > -time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// kB is n bytes in kilobytes, to the tenth.
func kB(n int) string { return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) }

// runMode runs the task in one mode with the tools acting on a fresh copy
// of repo.
func runMode(ctx context.Context, mode clienttools.Mode, url, repo, model string) (*clienttools.Result, error) {
	dir, err := os.MkdirTemp("", "tether-compare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, os.DirFS(repo)); err != nil {
		return nil, fmt.Errorf("copy %s: %w", repo, err)
	}
	c := &clienttools.Client{BaseURL: url}
	return c.Run(ctx, clienttools.Rollout{
		Mode: mode,
		Request: &protocol.CreateRequest{Model: model, Include: []string{protocol.IncludeTimings},
			Input: protocol.Items{protocol.UserMessage(task)}},
		Funcs: (&clienttools.Tools{Dir: dir}).Funcs(),
	})
}

// warmUp runs a one-turn rollout, without tools, in each transport, so that
// the first mode measured does not pay for the process's first connection
// and first encodings. It needs the server's tether-scripted model; without
// it, it does nothing.
func warmUp(ctx context.Context, url string) {
	for _, mode := range []clienttools.Mode{clienttools.ModeSuspend, clienttools.ModeChained} {
		c := &clienttools.Client{BaseURL: url}
		c.Run(ctx, clienttools.Rollout{Mode: mode, Request: &protocol.CreateRequest{Model: "tether-scripted",
			Input: protocol.Items{protocol.UserMessage("Hello")}}})
	}
}

// findRepo looks for tether's sampler/traces/repo from the current
// directory up.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "sampler", "traces", "repo")
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("sampler/traces/repo not found from the current directory up: run from the tether repository or pass -repo DIR")
		}
		dir = parent
	}
}

func defaultURL() string {
	if u := os.Getenv("TETHER_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:8080/v1"
}
