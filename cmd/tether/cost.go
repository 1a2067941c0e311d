package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost"
)

// costSettings are the cost model's flags as parsed: the work around
// inference (cost.Options) and whether stored responses keep their tokens.
type costSettings struct {
	cost.Options
	StoreTokens bool
}

// hooks is the server's runtime.Hooks for s, telling onHop of each
// simulated call: nil when s asks for no work around inference.
func (s costSettings) hooks(onHop func(string)) (runtime.Hooks, error) {
	if !s.Safety && s.HopLatency == 0 {
		return nil, nil
	}
	opts := s.Options
	opts.OnHop = onHop
	return cost.New(opts)
}

// args are s as the command line of a child tether serve, every setting
// explicit, so that the child serves what the parent measures whatever the
// child's defaults are.
func (s costSettings) args() []string {
	safety := map[bool]string{true: "on", false: "off"}[s.Safety]
	return []string{"--safety", safety, "--hop-latency", s.HopLatency.String(),
		"--post-inference", s.PostInference.String(), "--store-tokens=" + strconv.FormatBool(s.StoreTokens)}
}

// costFlags declares the cost model's flags on fs (serve and ablate share
// them; safety is their --safety default: off for serve, on for ablate,
// which measures it) and returns the function that reads them once fs is
// parsed.
func costFlags(fs *flag.FlagSet, safety string) func() (costSettings, error) {
	on := fs.String("safety", safety, "the lexical safety classifier over each request's new text (and the safety service's hop): on or off")
	hop := fs.Duration("hop-latency", 0, "latency of each simulated service call (model routing, safety service, billing), like 2ms; 0 makes none")
	post := fs.String("post-inference", "auto", "when the billing hop runs: sync (before the terminal event), async (after it), auto (sync over HTTP, async on a WebSocket or WebTransport)")
	storeTokens := fs.Bool("store-tokens", false, "keep rendered tokens with stored responses, so that chained HTTP requests do not render the chain again")
	return func() (costSettings, error) {
		var c costSettings
		switch *on {
		case "on":
			c.Safety = true
		case "off":
		default:
			return c, fmt.Errorf("--safety %q: want on or off", *on)
		}
		if *hop < 0 {
			return c, fmt.Errorf("--hop-latency %v: want a duration of 0 or more, like 2ms", *hop)
		}
		c.HopLatency = *hop
		m, err := cost.ParsePostMode(*post)
		if err != nil {
			return c, fmt.Errorf("--post-inference: %w", err)
		}
		c.PostInference, c.StoreTokens = m, *storeTokens
		return c, nil
	}
}
