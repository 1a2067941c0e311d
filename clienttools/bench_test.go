package clienttools_test

import (
	"context"
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
