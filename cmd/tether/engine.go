package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// engineFlags are ablate's flags for an engine-model run (--engine).
type engineFlags struct {
	profile  *string
	clients  *string
	seeds    *int
	duration *time.Duration
	stagger  *time.Duration
	ttl      *time.Duration
}

// engineTrace is the workload of an engine-model run unless --workload
// names another: the longest embedded trace.
const engineTrace = "trace:calc-audit-50"

func declareEngineFlags(fs *flag.FlagSet) engineFlags {
	return engineFlags{
		profile: fs.String("engine", "", "an engine-model run instead of the comparison (simulated, no server): the workload's rollout run by many clients at once on a simulated inference engine of this profile ("+
			strings.Join(enginemodel.BuiltinProfiles(), ", ")+", or a JSON file), for each design and cache policy (discard, pin, swap) and each --engine-clients; the workload defaults to "+engineTrace),
		clients:  fs.String("engine-clients", "1,4,8,16,32,64", "with --engine: numbers of concurrent rollouts, comma-separated"),
		seeds:    fs.Int("engine-seeds", 5, "with --engine: runs of each design, policy and load, their clients started apart differently (the intervals are over them)"),
		duration: fs.Duration("engine-duration", 30*time.Minute, "with --engine: simulated time each run's clients start rollouts for"),
		stagger:  fs.Duration("engine-stagger", time.Minute, "with --engine: the clients' first rollouts start at random over this"),
		ttl:      fs.Duration("engine-ttl", 10*time.Second, "with --engine: how long the pin policy keeps a rollout's cache while its tools run"),
	}
}

// runEngine runs `tether ablate --engine`.
func runEngine(ctx context.Context, ef engineFlags, cfg ablate.Config, out string, stdout, stderr io.Writer) int {
	p, err := enginemodel.LoadProfile(*ef.profile)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate: --engine:", err)
		return 2
	}
	clients, err := parseClients(*ef.clients)
	if err != nil || *ef.seeds < 1 || *ef.duration <= 0 || *ef.stagger < 0 || *ef.ttl <= 0 {
		fmt.Fprintln(stderr, "tether: ablate: --engine-clients must be numbers above 0, --engine-seeds at least 1, --engine-duration and --engine-ttl above 0")
		return 2
	}
	tr := workloadTrace(cfg)
	if tr == nil {
		fmt.Fprintln(stderr, "tether: ablate: --engine runs a trace's rollout: give --workload trace:NAME")
		return 2
	}
	start := time.Now()
	run, err := ablate.RunEngine(ctx, ablate.EngineConfig{Profile: p, Trace: tr, Clients: clients, Seeds: *ef.seeds,
		Duration: *ef.duration, Stagger: *ef.stagger, TTL: *ef.ttl})
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "SIMULATED: the engine model %s (KV cache of %d tokens), %s: %d turns, a %d-token header, %d tokens at its last turn; %d runs a cell of %v each, in %.1f s\n\n",
		run.Profile, run.CapacityTokens, run.Trace, run.Turns, run.HeaderTokens, run.FinalPrompt, run.Seeds, *ef.duration, time.Since(start).Seconds())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\tpolicy\trollouts\tdone/min\tcompletion s\tp99 s\tTTFT p50 ms\tp99 ms\tcache hit\trecomputed/rollout\trecomputing\theld tokens\ttokens/s\t")
	for _, c := range run.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.1f\t%.0f\t%.0f\t%.1f%%\t%.0f\t%.0f%%\t%.0f\t%.0f\t\n", c.Design, c.Policy, c.Clients,
			ablate.WithInterval(c.JobsPerMin, c.JobsPerMinCI, 2), ablate.WithInterval(c.JCT, c.JCTCI, 1), c.JCTP99,
			c.TTFTP50, c.TTFTP99, 100*c.HitRate, c.RecomputedPerJob, 100*c.RecomputeShare, c.HeldTokens, c.TokensPerSec)
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	for _, c := range run.Conclusions {
		fmt.Fprintln(stdout, c)
	}
	chart, err := run.Chart()
	if err == nil {
		err = os.MkdirAll(out, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(out, chart.Name), chart.SVG, 0o644)
	}
	if err == nil {
		b, _ := json.MarshalIndent(run, "", "  ")
		err = os.WriteFile(filepath.Join(out, "engine.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote engine.json and %s to %s\n", chart.Name, out)
	return 0
}

// workloadTrace is the trace the run's workload replays, nil when it
// replays none (a synthetic workload).
func workloadTrace(cfg ablate.Config) *sampler.Trace {
	name, ok := strings.CutPrefix(cfg.Workload.Model, sampler.ReplayPrefix)
	for _, t := range cfg.Traces {
		if ok && t.Name == name {
			return t
		}
	}
	return nil
}
