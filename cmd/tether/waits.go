package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/internal/waits"
)

// ablateWaits is "tether ablate waits TRACE...": how long each server's
// goroutines waited for a core, from execution traces.
func ablateWaits(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("ablate waits", `Usage: tether ablate waits TRACE...

Reads Go execution traces, such as tether serve --pprof and tether ablate
floor serve on /debug/pprof/trace, and prints for each how long its
goroutines waited for a P once runnable, by what made them runnable: a
network read found by a P's own poll (it ran out of goroutines, and
polled) or by the runtime's monitor (sysmon, which polls when no P has for
10 ms and queues what it finds globally, where a busy P looks once in 61
schedules), a goroutine started, woken by another, woken by the runtime,
or preempted; and how much of the time the Ps were idle. Under load a
server's round trip is mostly such waits, above all its reader's for the
client's message (docs/measuring.md, "Where a step's time goes under
load"). Tracing costs the server CPU while it lasts: take a few seconds,
in a run whose CPU figures are not the ones reported.`, `tether serve --pprof --addr 127.0.0.1:8080 &
tether ablate --load 500 --url http://127.0.0.1:8080 --duration 30s --tools instant --out load &
sleep 15; curl -o tether.trace 'http://127.0.0.1:8080/debug/pprof/trace?seconds=3'
tether ablate waits tether.trace`, -1)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.fail(stderr, "give at least one trace file")
		return 2
	}
	for i, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate waits:", err)
			return 1
		}
		rep, err := waits.Read(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "tether: ablate waits: %s: %v\n", path, err)
			return 1
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s: %v traced; Ps idle %.1f%% of it, each going idle every %v\n", path, rep.Span.Round(time.Millisecond), 100*rep.Idle, rep.IdleEvery.Round(time.Microsecond))
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "waits\tmean\tp50\tp90\tmax\t  runnable by")
		for _, s := range rep.Kinds {
			fmt.Fprintf(tw, "%d\t%v\t%v\t%v\t%v\t  %s\n", s.N, roundWait(s.Mean), roundWait(s.P50), roundWait(s.P90), roundWait(s.Max), s.Kind)
		}
		tw.Flush()
	}
	return 0
}

// roundWait keeps a wait's three significant places or so: µs under a ms.
func roundWait(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Microsecond)
}
