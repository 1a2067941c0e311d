package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/internal/ablate"
)

// showRun prints a run's headline (and with wide its tables) and writes
// its files to out.
func showRun(w io.Writer, res *ablate.Results, wide bool, out string) error {
	printAblation(w, res, wide)
	if err := res.WriteFiles(out); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote results.json, turns.csv, overhead.svg, overhead-ci.svg, e2e.svg, waterfall.svg and report.html to %s\n", out)
	return nil
}

// printAblation prints the run's headline: a table of at most seven
// columns, every figure with its 95% interval, and a sentence per design
// that says what it shows and how sure. wide adds the tables behind it.
func printAblation(w io.Writer, res *ablate.Results, wide bool) {
	c := res.Config
	prefill := "free"
	if c.Prefill > 0 {
		prefill = strconv.FormatFloat(c.Prefill, 'f', -1, 64) + " tok/s"
	}
	fmt.Fprintf(w, "%s (%s, %s), %s, ttft %v, prefill %s; %d CPUs, %s\n", c.Workload, c.Model, ablate.Count(c.Calls, "call"), ablate.Count(c.Reps, "round"),
		time.Duration(c.TTFTUS*1e3), prefill, res.Machine.CPUs, res.Machine.GoVersion)
	speeds := speedsOf(res.Summary)
	for _, tps := range speeds {
		fmt.Fprintln(w)
		if len(speeds) > 1 {
			fmt.Fprintf(w, "at %s tok/s:\n", rate(tps))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "mode\tend to end (computed), ms\tvs stateless\tAPI overhead, ms\tvs stateless\t× echo floor\tµs per 1k ctx tokens\t")
		for _, s := range res.Summary {
			if s.TPS != tps {
				continue
			}
			floor, slope := "-", "-" // a tree's turns overlap: no round trip of its own to set against the floor
			if s.RoundTrips > 0 {
				floor, slope = ablate.WithInterval(s.FloorRatioMedian, s.FloorRatioMedianCI, 1), "needs "+strconv.Itoa(ablate.MinSlopeRoundTrips)+" round trips"
			}
			if s.SlopeCarried {
				slope = ablate.WithInterval(s.SlopeUSPer1kTokens, s.SlopeCI, 0)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Mode,
				ablate.WithInterval(s.EndToEndUS/1e3, [2]float64{s.EndToEndCI[0] / 1e3, s.EndToEndCI[1] / 1e3}, 1), vsStateless(s.EndToEndVsStateless, s.EndToEndVsStatelessCI, 3),
				ablate.WithInterval(s.APIOverheadUS/1e3, [2]float64{s.APIOverheadCI[0] / 1e3, s.APIOverheadCI[1] / 1e3}, 1), vsStateless(s.APIOverheadVsStateless, s.APIOverheadVsStatelessCI, 2),
				floor, slope)
		}
		tw.Flush()
		fmt.Fprintln(w)
		for _, s := range res.Summary {
			if s.TPS == tps {
				if line := ablate.Conclusion(s); line != "" {
					fmt.Fprintln(w, line)
				}
			}
		}
		for _, s := range res.Summary {
			if s.TPS == tps {
				if line := ablate.JournalLine(s); line != "" {
					fmt.Fprintln(w, line)
				}
			}
		}
	}
	for _, p := range res.Precision {
		at := ""
		if len(speeds) > 1 {
			at = " at " + rate(p.TPS) + " tok/s"
		}
		over := "interval"
		if p.OverRounds {
			over = "interval over rounds"
		}
		if p.Reached {
			fmt.Fprintf(w, "Precision ±%s reached%s after %s: every headline figure's %s is within it.\n", strconv.FormatFloat(100*p.Target, 'f', -1, 64)+"%", at, ablate.Count(p.Rounds, "round"), over)
		} else {
			fmt.Fprintf(w, "Precision ±%s not reached%s in --max-time (%s): still wider: %s.\n", strconv.FormatFloat(100*p.Target, 'f', -1, 64)+"%", at, ablate.Count(p.Rounds, "round"), strings.Join(p.Left, ", "))
		}
	}
	fmt.Fprint(w, `
End to end is a rollout's model and tool time (the designs' shared median) plus
its API overhead: its turns times their mean overhead (a turn's latency less its
model time) and the client's time between turns. × echo
floor sets the round trips' median overhead against an echo of the same bytes
and frames on the same loopback; µs per 1k ctx tokens is how a round trip's
overhead grows with the context the step read (Theil-Sen). In brackets: 95%
intervals (bootstrap over the turns; for medians, between order statistics):
the noise within this run, not between runs. --wide prints the tables behind.
`)
	if res.Config.Agents > 0 {
		fmt.Fprint(w, `A multi-agent rollout's agents sample and call side by side: its model and
tool time are those of its critical path (the chain of agents whose own sampling
and tools add up to most), and its API overhead is the rest of its wall time,
one figure a rollout (bootstrap over the rollouts).
`)
	}
	if wide {
		printWide(w, res)
	}
}

// vsStateless is a ratio to stateless with its interval to prec
// decimals, "-" for none and for stateless itself.
func vsStateless(r float64, ci [2]float64, prec int) string {
	if r == 0 || ci == [2]float64{1, 1} {
		return "-"
	}
	return ablate.WithInterval(r, ci, prec) + "×"
}

// speedsOf is the speeds of summaries, in the order they ran.
func speedsOf(sums []ablate.Summary) []float64 {
	var out []float64
	for _, s := range sums {
		if !slices.Contains(out, s.TPS) {
			out = append(out, s.TPS)
		}
	}
	return out
}

// printWide prints the tables behind the headline: each mode's trials as
// measured, and its round trips against the echo floor.
func printWide(w io.Writer, res *ablate.Results) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tok/s\tmode\ttrials\tend to end p50 (measured), ms\tmax, ms\tmodel p50, ms\ttools p50, ms\tAPI overhead p50, ms\tof e2e\tsent\treceived\tCPU/turn, µs\t")
	for _, s := range res.Summary {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f%%\t%s\t%s\t%.0f\t\n", rate(s.TPS), s.Mode, s.Trials, s.ElapsedMedianUS/1e3, s.ElapsedMaxUS/1e3,
			s.ModelMedianUS/1e3, s.ToolsMedianUS/1e3, s.OverheadMedianUS/1e3, 100*ratio(s.OverheadMedianUS, s.ElapsedMedianUS),
			size(int(s.BytesSentMedian)), size(int(s.BytesReceivedMedian)), s.CPUPerTurnUS)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "tok/s\tmode\tround trips\toverhead p50, µs\tp99 (or max), µs\tfloor p50, µs\t× floor p50\t× floor p99\ttokenize p50, µs\t× floor without\twarm floor, µs\t× warm\tpacer late, µs\tline at first, µs\tat last, µs\t")
	for _, s := range res.Summary {
		tail, p99ratio := "max "+strconv.FormatFloat(s.RoundTripMaxUS, 'f', 0, 64), "-"
		if s.RoundTripP99US > 0 {
			tail, p99ratio = strconv.FormatFloat(s.RoundTripP99US, 'f', 0, 64), ablate.WithInterval(s.FloorRatioP99, s.FloorRatioP99CI, 1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.0f\t%s\t%s\t%.0f\t%.1f\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t\n", rate(s.TPS), s.Mode, s.RoundTrips,
			ablate.WithInterval(s.RoundTripMedianUS, s.RoundTripMedianCI, 0), tail, s.FloorMedianUS,
			ablate.WithInterval(s.FloorRatioMedian, s.FloorRatioMedianCI, 1), p99ratio,
			s.RenderMedianUS, s.FloorRatioExRender, s.WarmFloorMedianUS, s.WarmFloorRatio,
			s.PacerLateMedianUS, s.FitFirstUS, s.FitLastUS)
	}
	tw.Flush()
	fmt.Fprint(w, `
Per trial: medians over the trials, and the slowest (max); API overhead = end to
end - model - tools, where model time is the timing model's for each step's
uncached prompt and output tokens, plus how late the simulated model's last
token came (pacer late: Go's timers wake up to 1 ms late here). Per round trip
(a turn that ends in a pause for tools: all but the first and the last): floor
is an echo of the same bytes and frames on the same loopback, measured in the
same run after as long an idle as the round trip's request followed (the
client's tool time, up to 50 ms: an idle machine answers slower); p99 only
where the round trips carry it (its interval inside the sample), their maximum
otherwise; tokenize is the server's tokenizing of the round trip's new items,
which a real server does as well, and the next column the floor ratio without
it; warm floor is the fastest of three echoes back to back, the transport's
best case. The line is overhead against the context each step read
(Theil-Sen), at the first and the last round trip. CPU/turn counts the whole
process: the client and the in-process server.
`)
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// count is n and noun, the noun plural (with an s) unless n is 1.
func rate(r float64) string {
	if r == 0 {
		return "unpaced"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
