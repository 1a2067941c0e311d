package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tether-run/tether/internal/ablate"
)

// runSweep runs the comparison once per value of --sweep's knob and prints
// each design's end-to-end gain against stateless and against chained,
// value by value, and where the gains reach the published ones.
func runSweep(ctx context.Context, cfg ablate.Config, sweep, out string, stdout, stderr io.Writer) int {
	knob, list, ok := strings.Cut(sweep, "=")
	values := strings.Split(list, ",")
	if !ok || len(values) < 2 {
		fmt.Fprintf(stderr, "tether: ablate: --sweep %q: want KNOB=V1,V2,... with two values or more, such as hop-latency=0ms,2ms,10ms\n", sweep)
		return 2
	}
	seen := map[float64]bool{}
	for _, v := range values { // refused before the first run, not after it
		c := cfg
		x, err := c.SetKnob(knob, v)
		if err == nil && seen[x] {
			err = fmt.Errorf("%s=%s is given twice", knob, v)
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate: --sweep:", err)
			return 2
		}
		seen[x] = true
	}
	bar := newProgress(stderr)
	cfg.Progress = bar.update
	sw, err := ablate.Sweep(ctx, cfg, knob, values)
	bar.end()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	if err := showSweep(stdout, sw, out); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	return 0
}

// showSweep prints a sweep's tables and writes its files to out.
func showSweep(w io.Writer, sw *ablate.SweepResults, out string) error {
	printSweep(w, sw)
	names, err := sw.WriteFiles(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s to %s\n", strings.Join(names, ", "), out)
	return nil
}

// printSweep prints a table per baseline: a row per value of the knob, a
// column per design, each gain with its 95% interval; then the knob value
// at which each design reaches each published gain.
func printSweep(w io.Writer, sw *ablate.SweepResults) {
	c := sw.Runs[0].Config
	fmt.Fprintf(w, "%s (%s, %s), %s per value; sweep of %s (%s)\n", c.Workload, c.Model, ablate.Count(c.Calls, "call"), ablate.Count(c.Reps, "round"), sw.Knob, sw.Unit)
	for _, baseline := range []string{"stateless", "chained"} {
		gains := sw.Speedups(baseline)
		if len(gains) == 0 {
			continue
		}
		var modes []string
		for _, g := range gains {
			if !slices.Contains(modes, g.Mode) {
				modes = append(modes, g.Mode)
			}
		}
		fmt.Fprintf(w, "\nend-to-end gain against %s, %%:\n", baseline)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\t%s\t\n", sw.Knob, strings.Join(modes, "\t"))
		for i, v := range sw.Labels {
			row := []string{v}
			for _, m := range modes {
				cell := "-"
				for _, g := range gains {
					if g.Mode == m && g.Value == sw.Values[i] {
						cell = ablate.WithInterval(100*g.Gain, [2]float64{100 * g.GainCI[0], 100 * g.GainCI[1]}, 1)
					}
				}
				row = append(row, cell)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	for _, ref := range ablate.References {
		var reached []string
		ran := len(sw.Speedups(ref.Baseline)) > 0
		if !ran {
			reached = append(reached, ref.Baseline+" did not run")
		}
		for _, m := range c.Modes {
			if m == ref.Baseline || !ran {
				continue
			}
			if x, ok := sw.Reaches(ref, m); ok {
				reached = append(reached, m+" at "+strconv.FormatFloat(x, 'g', 3, 64)+" "+sw.Unit)
			} else {
				best := math.Inf(-1)
				for _, g := range sw.Speedups(ref.Baseline) {
					if g.Mode == m {
						best = max(best, g.Gain)
					}
				}
				reached = append(reached, fmt.Sprintf("%s not by %s (%.1f%% at most)", m, sw.Labels[len(sw.Labels)-1], 100*best))
			}
		}
		fmt.Fprintf(w, "%s (%s, %.0f%% against %s): %s.\n", ref.Source, ref.Claim, 100*ref.Gain, ref.Baseline, strings.Join(reached, "; "))
	}
}
