package main

import (
	"flag"
	"fmt"

	"github.com/tether-run/tether/runtime"
)

// costFlags declares the cost model's flags on fs (serve and ablate share
// them) and returns the function that reads them once fs is parsed.
func costFlags(fs *flag.FlagSet) func() (runtime.Cost, error) {
	safety := fs.String("safety", "on", "the lexical safety classifier over each request's new text (and the safety service's hop): on or off")
	hop := fs.Duration("hop-latency", 0, "latency of each simulated service call (model routing, safety service, billing), like 2ms; 0 makes none")
	post := fs.String("post-inference", "auto", "when the billing hop runs: sync (before the terminal event), async (after it), auto (sync over HTTP, async on a WebSocket or WebTransport)")
	storeTokens := fs.Bool("store-tokens", false, "keep rendered tokens with stored responses, so that chained HTTP requests do not render the chain again")
	return func() (runtime.Cost, error) {
		var c runtime.Cost
		switch *safety {
		case "on":
		case "off":
			c.NoSafety = true
		default:
			return c, fmt.Errorf("--safety %q: want on or off", *safety)
		}
		if *hop < 0 {
			return c, fmt.Errorf("--hop-latency %v: want a duration of 0 or more, like 2ms", *hop)
		}
		c.HopLatency = *hop
		m, err := runtime.ParsePostMode(*post)
		if err != nil {
			return c, fmt.Errorf("--post-inference: %w", err)
		}
		c.PostInference, c.StoreTokens = m, *storeTokens
		return c, nil
	}
}
