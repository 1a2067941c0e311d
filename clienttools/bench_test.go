package clienttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// BenchmarkClientRoundTrip runs suspended rollouts of 16 one-call steps
// through Client.Run against an in-process, unpaced tether, with a tool that
// returns at once. One op is one tool round trip (pause to pause).
// wait-ns/rt is from sending an append to reading the next pause: the
// server's work, the loopback, and the client decoding the step's events
// (events/rt of them, each costing what BenchmarkClientEvents says);
// client-ns/rt is the client's own part after the pause, until the outputs
// are ready to send (the tool itself costs nothing here).
func BenchmarkClientRoundTrip(b *testing.B) {
	base := server(b, runtime.Options{})
	var script strings.Builder
	script.WriteString("Fix the build.\n")
	const steps = 16
	for i := range steps {
		fmt.Fprintf(&script, "call: read_file {\"path\":\"pkg/file%d.go\"}\n", i)
	}
	c := &clienttools.Client{BaseURL: base}
	ro := clienttools.Rollout{
		Mode:    clienttools.ModeSuspend,
		Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput(script.String())},
		Funcs: []clienttools.Func{{Name: "read_file", Parameters: []byte(`{"type":"object"}`),
			Run: func(context.Context, string) (string, error) { return "package config\n", nil }}},
	}
	var wait, client time.Duration
	trips, events := 0, 0
	ro.OnEvent = func(protocol.Event) { events++ }
	b.ReportAllocs()
	b.ResetTimer()
	for trips < b.N {
		res, err := c.Run(context.Background(), ro)
		if err != nil {
			b.Fatal(err)
		}
		for i, t := range res.Turns {
			if i > 0 {
				wait += t.FirstEvent + t.Stream
			}
			if t.Calls > 0 {
				client += t.Tools
				trips++
			}
		}
	}
	b.ReportMetric(float64(wait.Nanoseconds())/float64(trips), "wait-ns/rt")
	b.ReportMetric(float64(events)/float64(trips), "events/rt")
	b.ReportMetric(float64(client.Nanoseconds())/float64(trips), "client-ns/rt")
}

// BenchmarkEager measures eager start on two workloads, each run in suspend
// mode with the local tools executed for real on a copy of the fixture
// repository and the model paced at 200 tokens/s, with and without eager
// start. One op is one rollout; tools-wait-ms is the time the rollout waited
// on client tools after their steps ended.
//
//   - calc-fix-24 replays the trace (24 calls in 18 steps). Its slow calls
//     (shell running the tests) are each the last call of their step, so
//     eager start has nothing to overlap them with.
//   - vet-then-patch is six steps of two parallel calls, a slow one first
//     (shell: go vet ./...) and then one whose arguments stream for a while
//     (apply_patch adding a 300-token file): eager start runs the vet while
//     the patch streams.
//
// Slow: run it with -bench Eager -benchtime 2x.
func BenchmarkEager(b *testing.B) {
	r, err := sharedRenderer()
	if err != nil {
		b.Fatal(err)
	}
	traces, err := sampler.LoadTraces()
	if err != nil {
		b.Fatal(err)
	}
	var trace *sampler.Trace
	for _, t := range traces {
		if t.Name == "calc-fix-24" {
			trace = t
		}
	}
	pace := sampler.Timing{TPS: 200}
	base := server(b, runtime.Options{Models: map[string]runtime.Sampler{
		"replay":   sampler.NewReplay(r, pace, trace),
		"scripted": sampler.NewScripted(r, pace),
	}})
	var script strings.Builder
	script.WriteString("Vet the module and write the notes.\n")
	for i := range 6 {
		var patch strings.Builder
		fmt.Fprintf(&patch, "*** Begin Patch\n*** Add File: notes/n%d.md\n", i)
		for j := range 30 {
			fmt.Fprintf(&patch, "+Note %d.%d: the evaluator keeps its operands in order.\n", i, j)
		}
		patch.WriteString("*** End Patch\n")
		args, _ := json.Marshal(map[string]string{"patch": patch.String()})
		fmt.Fprintf(&script, "call: shell {\"command\":\"go vet ./...\"} | apply_patch %s\n", args)
	}
	workloads := []struct {
		name, model, task string
		calls             int
	}{
		{"calc-fix-24", "replay", trace.Task, 24},
		{"vet-then-patch", "scripted", script.String(), 12},
	}
	for _, w := range workloads {
		for _, eager := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/eager=%v", w.name, eager), func(b *testing.B) {
				var wait time.Duration
				for range b.N {
					b.StopTimer()
					dir := copyTree(b, fixtureRepo)
					b.StartTimer()
					c := &clienttools.Client{BaseURL: base, Eager: eager}
					res, err := c.Run(context.Background(), clienttools.Rollout{
						Mode:    clienttools.ModeSuspend,
						Request: &protocol.CreateRequest{Model: w.model, Input: userInput(w.task)},
						Funcs:   (&clienttools.Tools{Dir: dir}).Funcs(),
					})
					if err != nil || len(res.Calls) != w.calls {
						b.Fatalf("%v, %d calls", err, len(res.Calls))
					}
					for _, c := range res.Calls {
						if c.Err != nil {
							b.Fatalf("%s: %v", c.Name, c.Err)
						}
					}
					for _, t := range res.Turns {
						wait += t.Tools
					}
				}
				b.ReportMetric(float64(wait.Milliseconds())/float64(b.N), "tools-wait-ms")
			})
		}
	}
}
