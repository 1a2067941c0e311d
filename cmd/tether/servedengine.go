package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// servedEngineFlags are serve's flags for a served engine: the local
// models paced by a simulated inference engine (sampler.EngineModel).
type servedEngineFlags struct {
	profile, policy, order *string
	ttl                    *time.Duration
	speed                  *float64
}

func declareServedEngineFlags(fs *flag.FlagSet) servedEngineFlags {
	return servedEngineFlags{
		profile: fs.String("engine-model", "", "pace the local models by a simulated inference engine of this profile ("+
			strings.Join(enginemodel.BuiltinProfiles(), ", ")+", or a JSON file, as ablate --engine reads): a sample waits for room in its KV cache, prefills what the cache does not hold, and gets a token at each step, whose time grows with the batch; a model's --tps, --ttft and --prefill-rate are not used. Off by default. Labelled \"simulated engine\" in /v1/models, every response's timings and the log"),
		policy: fs.String("engine-policy", "discard", "with --engine-model: what becomes of a turn's KV cache while its rollout's tools run: discard (kept until the cache needs the room), pin (kept for --engine-ttl whatever it needs) or swap (to host memory, back at the profile's bandwidth); a suspended rollout's last turn is discarded at once"),
		order:  fs.String("engine-order", "arrival", "with --engine-model: the order waiting turns are admitted in: arrival, or rollout (the turns of rollouts begun earlier first; a rollout is a suspended response, a chain of responses, or a prompt_cache_key)"),
		ttl:    fs.Duration("engine-ttl", 10*time.Second, "with --engine-model and --engine-policy pin: how long a turn's cache is pinned"),
		speed:  fs.Float64("engine-speed", 1, "with --engine-model: how many simulated seconds pass in a real one; every figure the engine reports is in its own time"),
	}
}

// model is the served engine the flags ask for, nil when --engine-model is
// not given; set is the flags given.
func (f servedEngineFlags) model(set map[string]bool) (*sampler.EngineModel, error) {
	if *f.profile == "" {
		for _, name := range []string{"engine-policy", "engine-order", "engine-ttl", "engine-speed"} {
			if set[name] {
				return nil, fmt.Errorf("--%s is for --engine-model", name)
			}
		}
		return nil, nil
	}
	for _, name := range []string{"engine-step", "tps", "ttft", "prefill-rate"} {
		if set[name] {
			return nil, fmt.Errorf("--%s with --engine-model: the engine model's profile times the local models", name)
		}
	}
	p, err := enginemodel.LoadProfile(*f.profile)
	if err != nil {
		return nil, fmt.Errorf("--engine-model: %w", err)
	}
	var policy enginemodel.Policy
	switch *f.policy {
	case "discard":
	case "pin":
		policy = enginemodel.Policy{Kind: enginemodel.Pin, TTL: *f.ttl}
	case "swap":
		policy = enginemodel.Policy{Kind: enginemodel.Swap}
	default:
		return nil, fmt.Errorf("--engine-policy %q: want discard, pin or swap", *f.policy)
	}
	if set["engine-ttl"] && policy.Kind != enginemodel.Pin {
		return nil, fmt.Errorf("--engine-ttl is for --engine-policy pin")
	}
	if *f.order != "arrival" && *f.order != "rollout" {
		return nil, fmt.Errorf("--engine-order %q: want arrival or rollout", *f.order)
	}
	if *f.speed <= 0 {
		return nil, fmt.Errorf("--engine-speed %v: want more than 0", *f.speed)
	}
	return sampler.NewEngineModel(sampler.EngineModelOptions{Profile: p, Policy: policy, ByRollout: *f.order == "rollout", Speed: *f.speed})
}
