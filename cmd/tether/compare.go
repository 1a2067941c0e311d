package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tether-run/tether/internal/ablate"
)

// ablateCompare is "tether ablate compare A.json B.json": two runs set
// side by side, figure by figure, as benchstat sets two builds.
func ablateCompare(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("ablate compare", `Usage: tether ablate compare A/results.json B/results.json

Sets run B against run A (two builds, two configurations, or the same
twice) for every mode and speed both ran: end to end and API overhead per
rollout, and the round trips' median overhead. Each figure has its 95%
interval, and the change B/A its interval (the two runs' turns resampled
apart) and its p-value, Holm-adjusted over every figure compared: "~"
where the change is not significant at 5%. Two runs one after the other
also differ by the machine's drift between them; for two configurations,
run them interleaved with --sweep and compare the results it writes.
Runs of different workloads, models or rounds are refused, each
difference named, unless --force; the settings that differ (speed,
timing, cost model) are listed above the table.`, `tether ablate --sweep hop-latency=0ms,1ms --out sweep
tether ablate compare sweep/hop-latency=0ms/results.json sweep/hop-latency=1ms/results.json`, 2)
	force := fs.Bool("force", false, "compare runs of different workloads, models or rounds all the same")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 2 {
		fs.fail(stderr, "give two results.json files, A then B")
		return 2
	}
	var runs [2]*ablate.Results
	for i, path := range fs.Args() {
		var err error
		if runs[i], err = readPath(path, ablate.ReadResults); err != nil {
			fs.fail(stderr, "%s: %v", path, err)
			return 1
		}
	}
	measured, knobs := ablate.ConfigDiff(runs[0], runs[1])
	if len(measured) > 0 && !*force {
		fs.fail(stderr, "the runs measured different things (%s): their figures are not one rollout's in two builds or settings; give --force to compare them all the same", strings.Join(measured, "; "))
		return 1
	}
	changes, err := ablate.Compare(runs[0], runs[1])
	if err != nil {
		fs.fail(stderr, "%v", err)
		return 1
	}
	for i, r := range runs {
		fmt.Fprintf(stdout, "%c: %s, %s, %s; %s\n", 'A'+i, fs.Arg(i), r.Config.Workload, ablate.Count(r.Config.Reps, "round"), r.Started.Format("2006-01-02 15:04 UTC"))
	}
	if len(measured)+len(knobs) > 0 {
		fmt.Fprintf(stdout, "B differs from A in %s\n", strings.Join(append(measured, knobs...), "; "))
	}
	fmt.Fprintln(stdout)
	printChanges(stdout, changes)
	return 0
}

// printChanges prints changes as a table: each figure in A and in B with
// its interval, the change in percent with its interval, and p; then the
// change's interval and p with the runs' rounds resampled whole, which
// says whether it is beyond what two runs of one build differ by.
func printChanges(w io.Writer, changes []ablate.Change) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tok/s\tmode\tfigure\tA\tB\tchange\tp\tover rounds\t")
	for _, c := range changes {
		prec := 1
		if c.Unit == "µs" {
			prec = 0
		}
		verdict := "p=" + strconv.FormatFloat(c.P, 'f', 3, 64)
		if !c.Significant {
			verdict = "~ (" + verdict + ")"
		}
		rounds := "-"
		if c.RatioRoundsCI != [2]float64{} {
			rounds = "[" + percent(c.RatioRoundsCI[0]-1) + ", " + percent(c.RatioRoundsCI[1]-1) + "] p=" + strconv.FormatFloat(c.PRounds, 'f', 3, 64)
			if !c.SignificantRounds {
				rounds = "~ (" + rounds + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s, %s\t%s\t%s\t%s\t%s\t%s\t\n", rate(c.TPS), c.Mode, c.Figure, c.Unit,
			ablate.WithInterval(c.A, c.ACI, prec), ablate.WithInterval(c.B, c.BCI, prec),
			percent(c.Ratio-1)+" ["+percent(c.RatioCI[0]-1)+", "+percent(c.RatioCI[1]-1)+"]", verdict, rounds)
	}
	tw.Flush()
}

// percent is a signed change in percent.
func percent(x float64) string {
	s := strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
	if x >= 0 {
		s = "+" + s
	}
	return s
}

// ablateReport is "tether ablate report --out DIR RESULTS.json": a run's
// tables, charts and report.html drawn again from its results.json, by
// this tether (after an upgrade, or on another machine).
func ablateReport(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("ablate report", `Usage: tether ablate report [flags] RESULTS.json

Draws a run's headline, charts and report.html again from its results.json
(or a sweep's tables and charts from its sweep.json): the figures are
computed again from its trials, by this tether.`, `tether ablate report --out a2 a/results.json`, 1)
	out := fs.String("out", "", "directory to write results.json, turns.csv, the SVG charts and report.html into; without it, the headline only")
	wide := fs.Bool("wide", false, "print the wide tables too")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.fail(stderr, "give one results.json")
		return 2
	}
	if filepath.Base(fs.Arg(0)) == "sweep.json" {
		return sweepReport(fs, fs.Arg(0), *out, stdout, stderr)
	}
	res, err := readPath(fs.Arg(0), ablate.ReadResults)
	if err != nil {
		fs.fail(stderr, "%v", err)
		return 1
	}
	if err := showRun(stdout, res, *wide, *out); err != nil {
		fs.fail(stderr, "%v", err)
		return 1
	}
	return 0
}

// sweepReport draws a sweep.json's tables and charts again.
func sweepReport(fs *command, path, out string, stdout, stderr io.Writer) int {
	sw, err := readPath(path, ablate.ReadSweep)
	if err != nil {
		fs.fail(stderr, "%v", err)
		return 1
	}
	if err := showSweep(stdout, sw, out); err != nil {
		fs.fail(stderr, "%v", err)
		return 1
	}
	return 0
}

// readPath reads the file at path with read.
func readPath[T any](path string, read func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return read(f)
}
