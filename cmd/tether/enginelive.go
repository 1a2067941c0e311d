package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// runEngineLive runs `tether ablate --load N --load-engine PROFILE`.
func runEngineLive(ctx context.Context, lf loadFlags, ef engineFlags, cfg ablate.Config, out string, stdout, stderr io.Writer) int {
	p, err := enginemodel.LoadProfile(*lf.engine)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate: --load-engine:", err)
		return 2
	}
	clients, err := strconv.Atoi(*lf.clients)
	if err != nil || clients < 1 || *lf.speed <= 0 || *ef.ttl <= 0 {
		fmt.Fprintln(stderr, "tether: ablate: --load-engine takes one number of clients (--load N), a --load-engine-speed and an --engine-ttl above 0")
		return 2
	}
	tr := workloadTrace(cfg)
	if tr == nil {
		fmt.Fprintln(stderr, "tether: ablate: --load-engine runs a trace's rollout: give --workload trace:NAME")
		return 2
	}
	exe, err := lf.binary()
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	start := time.Now()
	run, err := ablate.RunEngineLive(ctx, ablate.EngineLiveConfig{Profile: p, ProfileArg: *lf.engine, Trace: tr, Clients: clients,
		Speed: *lf.speed, TTL: *ef.ttl, Server: []string{exe, "serve"}, ServerEnv: serverEnv(),
		Progress: func(cell string) { fmt.Fprintf(stderr, "%s: %s…\n", time.Since(start).Round(time.Second), cell) }})
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "LIVE against SIMULATED: %d rollouts of %s at once on a served engine %s (time ×%g), one rollout each; the simulator's same cells beside; in %.0f s\n\n",
		run.Clients, run.Trace, run.Profile, run.Speed, time.Since(start).Seconds())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\tpolicy\tcompletion s live\tsimulated\tgap\tTTFT p50 ms live\tsimulated\tcache hit live\tsimulated\tprefilled/rollout live\tsimulated\terrors\t")
	for _, c := range run.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%+.1f%%\t%.0f\t%.0f\t%.1f%%\t%.1f%%\t%.0f\t%.0f\t%d\t\n", c.Design, c.Policy,
			c.Live.JCT, c.Simulated.JCT, 100*c.Gap, c.Live.TTFTP50, c.Simulated.TTFTP50,
			100*c.Live.HitRate, 100*c.Simulated.HitRate, c.Live.PrefilledPerRollout, c.Simulated.PrefilledPerRollout, c.Live.Errors)
	}
	tw.Flush()
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	b, _ := json.MarshalIndent(run, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "engine-live.json"), append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote engine-live.json to %s\n", out)
	return 0
}
