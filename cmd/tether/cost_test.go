package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/tether-run/tether/runtime/cost"
)

// TestCostArgs: the cost settings ablate gives a child serve (--load,
// --park) parse back to the same settings, whatever serve's defaults are.
func TestCostArgs(t *testing.T) {
	t.Parallel()
	for _, want := range []costSettings{
		{Options: cost.Options{Safety: true}},
		{Options: cost.Options{HopLatency: 2 * time.Millisecond, PostInference: cost.PostAsync}, StoreTokens: true},
		{},
	} {
		for _, serveDefault := range []string{"on", "off"} {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			read := costFlags(fs, serveDefault)
			if err := fs.Parse(want.args()); err != nil {
				t.Fatalf("%v: %v", want.args(), err)
			}
			got, err := read()
			if err != nil || got.Safety != want.Safety || got.HopLatency != want.HopLatency || got.PostInference != want.PostInference || got.StoreTokens != want.StoreTokens {
				t.Errorf("%v with serve's safety default %s: %+v, %v; want %+v", want.args(), serveDefault, got, err, want)
			}
		}
	}
}
