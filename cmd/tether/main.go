// Command tether serves the OpenAI Responses API over WebSocket and HTTP, in
// both of the designs OpenAI described for agent rollouts, so that they can be
// measured side by side.
//
//	tether serve --addr 127.0.0.1:8080
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "ablate":
		return ablateCmd(ctx, args[1:], stdout, stderr)
	case "run":
		return runRollout(ctx, args[1:], stdout, stderr)
	case "trace":
		if len(args) > 1 && args[1] == "record" {
			return traceRecord(ctx, args[2:], stdout, stderr)
		}
		return traceCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version())
		return 0
	default:
		fmt.Fprintf(stderr, "tether: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
}

// version is the module's version and VCS revision, from the build info:
// "tether v0.3.0 (rev 1a2b3c4d5e6f, 2026-12-02T11:00:00Z) go1.26.0"; a
// build from a checkout with changes says "+dirty", one without VCS
// information says what it has.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tether (no build information) " + goruntime.Version()
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	out := "tether " + v
	if rev != "" {
		out += fmt.Sprintf(" (rev %.12s%s, %s)", rev, dirty, at)
	}
	return out + " " + bi.GoVersion
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: tether <command> [flags]

Commands:
  ablate  run one agent workload through every design side by side and show
          where the time goes (model, tools, API overhead, echo floor)
  serve   serve the Responses API over HTTP, SSE and WebSocket on /v1/responses
  run     run one agent rollout with the local tools in one design, shown live
  trace   list the embedded replay traces, show one's steps and token sizes,
          record a rollout of a model into a trace, or import agent sessions
  version print tether's version, VCS revision and Go version

Run "tether <command> -h" for a command's flags.
`)
}
