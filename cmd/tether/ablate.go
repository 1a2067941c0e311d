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
		case "waits":
			return ablateWaits(args[1:], stdout, stderr)
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
  floor       serve the streaming floor --load and --park run beside tether
  waits       how long a server's goroutines waited for a core, from execution traces`, `tether ablate --quick
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

// parsePercent reads "5%" as 0.05, and "0.05" as it is.
func parsePercent(s string) (float64, error) {
	if v, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(v, 64)
		return p / 100, err
	}
	return strconv.ParseFloat(s, 64)
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
