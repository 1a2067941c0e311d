package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// ablateCmd runs "tether ablate": one workload through every design, side
// by side, and a table of where the time went.
func ablateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return ablateCompare(args[1:], stdout, stderr)
		case "report":
			return ablateReport(args[1:], stdout, stderr)
		case "floor":
			return ablateFloor(ctx, args[1:], stdout, stderr)
		}
	}
	fs := newCommand("ablate", `Usage: tether ablate [flags]

Runs one agent workload through every design of the Responses API
(stateless HTTP, chained HTTP, WebSocket turns, one suspended response)
against a tether it starts in-process on loopback (or --url), interleaving
the modes round by round, and prints where the time went: end to end, model,
client tools and API overhead, and each round trip's overhead against the
echo floor of the same bytes on the same loopback.

Commands:
  compare     set two runs' results.json side by side, figure by figure
  report      draw a run's headline, charts and report.html again
  floor       serve the streaming floor --load and --park run beside tether`, `tether ablate --quick
		tether ablate --workload trace:calc-audit-50 --tps 65,1000 --out results`, 0)
	workload := fs.String("workload", "trace:calc-fix-24", "trace:NAME (a replay trace, embedded or in --traces; see tether trace list), trace:FILE.jsonl (a trace file, such as tether trace import writes), synthetic, or agents:NAME (a multi-agent rollout: a root spawns --agents sub-agents, each making --calls calls that take trace NAME's recorded calls' durations and outputs, and waits for them; designs inject, chained, background and stateless)")
	agents := fs.Int("agents", 4, "agents:NAME: the sub-agents the root spawns")
	traceDir := fs.String("traces", "", "directory of more trace files (*.jsonl: tether trace record's, tether trace import's) for --workload trace:NAME; the servers ablate starts serve them too")
	tools := fs.String("tools", ablate.ToolsReplay, "trace workloads: real (run on a copy of the fixture repository), replay (recorded outputs after the recorded durations) or instant (recorded outputs at once)")
	calls := fs.Int("calls", 20, "synthetic: client tool calls; agents:NAME: each sub-agent's (6 unless given)")
	parallel := fs.Int("parallel", 1, "synthetic: calls per step")
	toolLatency := fs.Duration("tool-latency", 50*time.Millisecond, "synthetic: simulated time each call takes")
	outputBytes := bytesFlag(fs.FlagSet, "output-bytes", 2000, "synthetic: bytes of each call's output")
	modes := fs.String("modes", "stateless,chained,turns,suspend", "designs to run, comma-separated: stateless, chained, background (chained, as background responses whose streams the client cuts and resumes every turn), turns, suspend, inject (suspend in the multi-agent beta's dialect: response.inject); wt-turns, wt-suspend, wt-inject (over WebTransport); and any of the last six with +msgpack (msgpack frames), like suspend+msgpack; suspend+durable and inject+durable (against an in-process server that checkpoints every pause, in memory or --store's Redis)")
	speeds := fs.String("tps", "1000", "model output tokens per second, comma-separated; 0 is unpaced")
	ttft := fs.Duration("ttft", 0, "model time to first token")
	prefillRate := fs.Float64("prefill-rate", 0, "uncached prompt tokens read per second; 0 is free")
	reps := fs.Int("reps", 3, "rounds: trials per mode and speed")
	precision := fs.String("precision", "", "add rounds past --reps, the modes interleaved, until every headline figure (end to end and API overhead, and their ratios to stateless) is within ±this of it at 95%, such as 5%; or until --max-time")
	precisionOver := fs.String("precision-over", "turns", "with --precision: the intervals held to it, turns (within the run) or rounds (from 5 rounds: resampling whole rounds, so that they hold the run-to-run spread)")
	maxTime := fs.Duration("max-time", 10*time.Minute, "with --precision: stop adding rounds once the run has taken this long, and say which figures are still wider")
	builds := fs.String("builds", "", "run the comparison against a tether serve of each of these builds at once (tether binaries, comma-separated, two at least), each a child process, the first too, from a copy of its own, started afresh each round, their trials interleaved round by round as --sweep interleaves values; --out gets each build's results.json (build-1, build-2, …), and each later build is set against the first as compare does, its changes over rounds paired round by round")
	sweep := fs.String("sweep", "", "run the comparison once per value of a cost knob, KNOB=V1,V2,..., the values interleaved in one run (a server each): hop-latency, ttft (durations), tps, prefill-rate, safety (on, off), tool-scale (a factor of the simulated tools' time); prints each design's end-to-end gain against stateless and chained per value, and where it reaches the published gains (OpenAI, xAI, SGLang); --out gets sweep.json, a chart per baseline and each value's results.json")
	wide := fs.Bool("wide", false, "print the wide tables too: end to end as measured per trial, and each round trip against the echo floor")
	quick := fs.Bool("quick", false, "a quick look: trace:calc-fix-12, instant tools, one round (flags given explicitly still win)")
	var urls []string
	fs.Var(urlList{&urls}, "url", "base URL of a running server instead of an in-process one; its timing must match --tps (one value), --ttft and --prefill-rate, which the warm-up checks. With --load, give it again for each server of a set that shares one Redis: each client starts on one of them, and resumes a suspended rollout on the next when its server goes (handovers are counted)")
	apiKey := fs.String("api-key", "", "bearer token for --url (default: $OPENAI_API_KEY)")
	store := fs.String("store", "memory", "the in-process server's store: memory, or redis://HOST:PORT/DB (chained mode then keeps its chain in Redis); with --park --hibernate-after, the served tether's Redis")
	wtURL := fs.String("wt-url", "", "with --url: that server's WebTransport base URL (https://HOST:PORT/v1, as tether serve --wt-addr prints it), for the wt- designs")
	certHash := fs.String("cert-hash", "", "with --wt-url: the SHA-256 (hex) that pins its certificate, as tether serve prints it")
	out := fs.String("out", "", "directory to write results.json, turns.csv, the SVG charts and report.html into (default: a new ablate-DATE-TIME in the working directory)")
	encoding := fs.String("encoding", "json", "the WebSocket modes' frames: json, or msgpack (binary frames of the same objects); --modes suspend+msgpack,turns+msgpack runs them beside the JSON ones")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to this file")
	cost := costFlags(fs.FlagSet, "on")
	load := declareLoadFlags(fs.FlagSet)
	engine := declareEngineFlags(fs.FlagSet)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *apiKey == "" { // read here, not as the flag's default, which -h prints
		*apiKey = os.Getenv("OPENAI_API_KEY")
	}
	if *out == "" {
		*out = reportDir(".", time.Now())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *load.clients != "" && !set["tools"] {
		*tools = ablate.ToolsInstant // streams that run on without idling on tools
	}
	if *engine.profile != "" && !set["workload"] {
		*workload = engineTrace
	}
	if *quick {
		if !set["workload"] {
			*workload = "trace:calc-fix-12"
		}
		if !set["tools"] {
			*tools = ablate.ToolsInstant
		}
		if !set["reps"] {
			*reps = 1
		}
	}
	if strings.HasPrefix(*workload, "agents:") {
		if !set["calls"] {
			*calls = 6
		}
		if !set["modes"] {
			*modes = "stateless,chained,inject"
		}
	}
	cfg, err := ablateConfig(*workload, *traceDir, *tools, *agents, *calls, *parallel, *toolLatency, *outputBytes, *modes, *speeds)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 2
	}
	if *reps < 1 || *ttft < 0 || checkRate(*prefillRate) != nil {
		fmt.Fprintln(stderr, "tether: ablate: --reps must be at least 1, --ttft and --prefill-rate not negative")
		return 2
	}
	if len(urls) > 1 && *load.clients == "" {
		fmt.Fprintln(stderr, "tether: ablate: --url more than once is for --load, against a set of servers")
		return 2
	}
	for _, u := range urls {
		if err := baseURL("url", u); err != nil {
			fmt.Fprintln(stderr, "tether: ablate:", err)
			return 2
		}
	}
	if len(urls) > 0 {
		cfg.URL, cfg.Fallbacks = urls[0], urls[1:]
	}
	if *precision != "" {
		p, err := parsePercent(*precision)
		switch {
		case err != nil || p <= 0 || p >= 1:
			fmt.Fprintf(stderr, "tether: ablate: --precision %q: want a share between 0 and 100%%, such as 5%% or 0.05\n", *precision)
			return 2
		case *maxTime <= 0:
			fmt.Fprintln(stderr, "tether: ablate: --precision needs a --max-time above 0: a figure may never narrow that far")
			return 2
		case *sweep != "" || *builds != "" || *load.clients != "" || *load.park > 0 || *load.hol > 0:
			fmt.Fprintln(stderr, "tether: ablate: --precision is for a comparison run, not with --sweep, --builds, --load, --park or --hol")
			return 2
		case *precisionOver != "turns" && *precisionOver != "rounds":
			fmt.Fprintf(stderr, "tether: ablate: --precision-over %q: want turns or rounds\n", *precisionOver)
			return 2
		}
		cfg.Precision, cfg.PrecisionOverRounds, cfg.MaxTime = p, *precisionOver == "rounds", *maxTime
	}
	cfg.Reps, cfg.TTFT, cfg.PrefillRate, cfg.APIKey = *reps, *ttft, *prefillRate, *apiKey
	cfg.WTURL, cfg.CertHash, cfg.Store = *wtURL, *certHash, *store
	enc, err := protocol.ParseEncoding(*encoding)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate: --encoding:", err)
		return 2
	}
	for i, d := range cfg.Modes {
		cfg.Modes[i] = d.On(enc)
	}
	costs, err := cost()
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 2
	}
	cfg.Cost, cfg.StoreTokens = costs.Options, costs.StoreTokens
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if *engine.profile != "" {
		return runEngine(ctx, engine, cfg, *out, stdout, stderr)
	}
	if *load.park > 0 {
		return runPark(ctx, load, costs, *store, *out, stdout, stderr)
	}
	if *load.hol > 0 {
		return runHOL(ctx, load, *out, stdout, stderr)
	}
	if *load.engine != "" {
		return runEngineLive(ctx, load, engine, cfg, *out, stdout, stderr)
	}
	if *load.clients != "" {
		return runLoad(ctx, load, cfg, enc, costs, *out, stdout, stderr)
	}
	if *builds != "" {
		return runBuilds(ctx, cfg, costs, *builds, *out, stdout, stderr)
	}
	if *sweep != "" {
		return runSweep(ctx, cfg, *sweep, *out, stdout, stderr)
	}
	bar := newProgress(stderr)
	cfg.Progress = bar.update
	res, err := ablate.Run(ctx, cfg)
	bar.end()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", apiKeyHint(err))
		return 1
	}
	if err := showRun(stdout, res, *wide, *out); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	return 0
}

// reportDir is the directory in dir a run writes its report to when --out
// does not name one: ablate-DATE-TIME, dated by when the run began, with a
// count after it when a run of the same second has one.
func reportDir(dir string, now time.Time) string {
	base := filepath.Join(dir, "ablate-"+now.Format("20060102-150405"))
	name := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, n)
	}
}

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

// ablateConfig builds the run's workload, modes and speeds from the flags.
func ablateConfig(workload, traceDir, tools string, agents, calls, parallel int, latency time.Duration, outputBytes int, modes, speeds string) (ablate.Config, error) {
	var cfg ablate.Config
	var err error
	switch name, ok := strings.CutPrefix(workload, "trace:"); {
	case ok && strings.HasSuffix(name, ".jsonl"): // a trace file: tether trace import's, trace record's
		if traceDir != "" {
			return cfg, fmt.Errorf("--workload %s names a file: give its directory as --traces and the trace's name instead, or leave out --traces", workload)
		}
		tr, perr := parseTraceFile(name)
		if perr != nil {
			return cfg, fmt.Errorf("--workload %s: %w", workload, perr)
		}
		embedded, lerr := sampler.LoadTraces()
		if lerr != nil {
			return cfg, lerr
		}
		if slices.ContainsFunc(embedded, func(e *sampler.Trace) bool { return e.Name == tr.Name }) {
			return cfg, fmt.Errorf("--workload %s: the trace is named %s, as an embedded one: rename it (its header's name)", workload, tr.Name)
		}
		// A server started as a child (--load) serves the file's directory.
		cfg.Traces, cfg.TraceDir = append(embedded, tr), filepath.Dir(name)
		cfg.Workload, err = ablate.TraceWorkload(tr, tools)
	case ok:
		traces, lerr := loadTraces(traceDir)
		if lerr != nil {
			return cfg, lerr
		}
		cfg.Traces, cfg.TraceDir = traces, traceDir
		var names []string
		for _, tr := range traces {
			names = append(names, tr.Name)
			if tr.Name == name {
				cfg.Workload, err = ablate.TraceWorkload(tr, tools)
			}
		}
		if cfg.Workload.Tools == nil && err == nil {
			err = fmt.Errorf("--workload %s: no such trace; the traces are %s", workload, strings.Join(names, ", "))
		}
	case workload == "synthetic":
		cfg.Workload, err = ablate.SyntheticWorkload(calls, parallel, latency, outputBytes)
	case strings.HasPrefix(workload, "agents:"):
		name := strings.TrimPrefix(workload, "agents:")
		traces, lerr := loadTraces(traceDir)
		if lerr != nil {
			return cfg, lerr
		}
		cfg.Traces, cfg.TraceDir = traces, traceDir
		i := slices.IndexFunc(traces, func(tr *sampler.Trace) bool { return tr.Name == name })
		if i < 0 {
			return cfg, fmt.Errorf("--workload %s: no such trace (see tether trace list)", workload)
		}
		cfg.Workload, err = ablate.AgentsWorkload(traces[i], agents, calls, tools)
	default:
		err = fmt.Errorf("--workload %q: want trace:NAME, synthetic or agents:NAME", workload)
	}
	if err != nil {
		return cfg, err
	}
	for _, m := range strings.Split(modes, ",") {
		d, err := ablate.ParseDesign(strings.TrimSpace(m))
		if err != nil {
			return cfg, fmt.Errorf("--modes: %w", err)
		}
		cfg.Modes = append(cfg.Modes, d)
	}
	for _, s := range strings.Split(speeds, ",") {
		tps, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err == nil {
			err = checkRate(tps)
		}
		if err != nil {
			return cfg, fmt.Errorf("--tps %q: want tokens per second, like 65,1000,4000", s)
		}
		cfg.Speeds = append(cfg.Speeds, tps)
	}
	return cfg, nil
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

// parsePercent reads "5%" as 0.05, and "0.05" as it is.
func parsePercent(s string) (float64, error) {
	if v, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(v, 64)
		return p / 100, err
	}
	return strconv.ParseFloat(s, 64)
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

// progress is a one-line progress bar on a terminal, a line per trial
// elsewhere.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), start: time.Now()}
}

func (p *progress) update(done, total int, trial string) {
	if !p.tty {
		fmt.Fprintf(p.w, "ablate: %d/%d %s\n", done, total, trial)
		return
	}
	const width = 30
	n := width * done / max(total, 1)
	fmt.Fprintf(p.w, "\r\x1b[K[%s%s] %d/%d %s  %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total,
		time.Since(p.start).Round(time.Second), trial)
}

func (p *progress) end() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
