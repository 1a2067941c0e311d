package ablate

import (
	"fmt"
	"maps"

	"github.com/tether-run/tether/clienttools"
)

// paths reads the in-process server's counters of responses served, by
// transport/design/state, and of pauses; nil with a server at a URL.
func (tg *target) paths() (map[string]int, error) {
	if tg.srv == nil {
		return nil, nil
	}
	mfs, err := tg.metrics.Registry().Gather()
	if err != nil {
		return nil, fmt.Errorf("ablate: reading the server's metrics: %w", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "tether_responses_total":
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				out[l["transport"]+"/"+l["design"]+"/"+l["state"]] += int(m.GetCounter().GetValue())
			}
		case "tether_pauses_total":
			for _, m := range mf.GetMetric() {
				out["pauses"] += int(m.GetCounter().GetValue())
			}
		}
	}
	return out, nil
}

// pathsDelta is what changed from before to after, without zeros.
func pathsDelta(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// checkPaths says whether a trial of mode with turns turns went the way its
// design goes: stateless sends the whole history every turn, chained and
// background load every turn after the first from the store (a background
// response is served as the same request would be in the foreground),
// turns finds it in the connection cache, and suspend is one response that
// paused between turns.
func checkPaths(d Design, turns int, got map[string]int) error {
	var want map[string]int
	conn := "ws"
	if d.webTransport() {
		conn = "wt"
	}
	switch mode := d.Mode; mode {
	case clienttools.ModeStateless:
		want = map[string]int{"http/stateless/none": turns}
	case clienttools.ModeChained, clienttools.ModeBackground:
		want = map[string]int{"http/stateless/none": 1, "http/chained/store": turns - 1}
	case clienttools.ModeTurns:
		want = map[string]int{conn + "/turns/none": 1, conn + "/turns/cache": turns - 1}
	case clienttools.ModeSuspend, clienttools.ModeInject:
		want = map[string]int{conn + "/suspend/none": 1, "pauses": turns - 1}
	}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("ablate: %s took the server's paths %v, want %v", d, got, want) // fmt sorts map keys
	}
	return nil
}
