package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
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
	fs := newCommand("ablate", `Usage: tether ablate [flags]

Runs one agent workload through every design of the Responses API
(stateless HTTP, chained HTTP, WebSocket turns, one suspended response)
against a tether it starts in-process on loopback (or --url), interleaving
the modes round by round, and prints where the time went: end to end, model,
client tools and API overhead, and each round trip's overhead against the
echo floor of the same bytes on the same loopback.`, `tether ablate --quick
		tether ablate --workload trace:calc-audit-50 --tps 65,1000 --out results`, 0)
	workload := fs.String("workload", "trace:calc-fix-24", "trace:NAME (an embedded replay trace; see tether trace list) or synthetic")
	tools := fs.String("tools", ablate.ToolsReplay, "trace workloads: real (run on a copy of the fixture repository), replay (recorded outputs after the recorded durations) or instant (recorded outputs at once)")
	calls := fs.Int("calls", 20, "synthetic: client tool calls")
	parallel := fs.Int("parallel", 1, "synthetic: calls per step")
	toolLatency := fs.Duration("tool-latency", 50*time.Millisecond, "synthetic: simulated time each call takes")
	outputBytes := bytesFlag(fs.FlagSet, "output-bytes", 2000, "synthetic: bytes of each call's output")
	modes := fs.String("modes", "stateless,chained,turns,suspend", "designs to run, comma-separated: stateless, chained, turns, suspend; wt-turns, wt-suspend (over WebTransport); and any of the last four with +msgpack (msgpack frames), like suspend+msgpack; suspend+durable (suspend against an in-process server that checkpoints every pause, in memory or --store's Redis)")
	speeds := fs.String("tps", "1000", "model output tokens per second, comma-separated; 0 is unpaced")
	ttft := fs.Duration("ttft", 0, "model time to first token")
	prefillRate := fs.Float64("prefill-rate", 0, "uncached prompt tokens read per second; 0 is free")
	reps := fs.Int("reps", 3, "rounds: trials per mode and speed")
	quick := fs.Bool("quick", false, "a quick look: trace:calc-fix-12, instant tools, one round (flags given explicitly still win)")
	var urls []string
	fs.Var(urlList{&urls}, "url", "base URL of a running server instead of an in-process one; its timing must match --tps (one value), --ttft and --prefill-rate, which the warm-up checks. With --load, give it again for each server of a set that shares one Redis: each client starts on one of them, and resumes a suspended rollout on the next when its server goes (handovers are counted)")
	apiKey := fs.String("api-key", "", "bearer token for --url (default: $OPENAI_API_KEY)")
	store := fs.String("store", "memory", "the in-process server's store: memory, or redis://HOST:PORT/DB (chained mode then keeps its chain in Redis); with --park --hibernate-after, the served tether's Redis")
	wtURL := fs.String("wt-url", "", "with --url: that server's WebTransport base URL (https://HOST:PORT/v1, as tether serve --wt-addr prints it), for the wt- designs")
	certHash := fs.String("cert-hash", "", "with --wt-url: the SHA-256 (hex) that pins its certificate, as tether serve prints it")
	out := fs.String("out", "", "directory to write results.json, turns.csv, the SVG charts and report.html into")
	encoding := fs.String("encoding", "json", "the WebSocket modes' frames: json, or msgpack (binary frames of the same objects); --modes suspend+msgpack,turns+msgpack runs them beside the JSON ones")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to this file")
	cost := costFlags(fs.FlagSet, "on")
	load := declareLoadFlags(fs.FlagSet)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *apiKey == "" { // read here, not as the flag's default, which -h prints
		*apiKey = os.Getenv("OPENAI_API_KEY")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *load.clients != "" && !set["tools"] {
		*tools = ablate.ToolsInstant // streams that run on without idling on tools
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
	cfg, err := ablateConfig(*workload, *tools, *calls, *parallel, *toolLatency, *outputBytes, *modes, *speeds)
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
	if len(urls) > 0 {
		cfg.URL, cfg.Fallbacks = urls[0], urls[1:]
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
	if *load.park > 0 {
		return runPark(ctx, load, costs, *store, *out, stdout, stderr)
	}
	if *load.hol > 0 {
		return runHOL(ctx, load, *out, stdout, stderr)
	}
	if *load.clients != "" {
		return runLoad(ctx, load, cfg, enc, costs, *out, stdout, stderr)
	}
	bar := newProgress(stderr)
	cfg.Progress = bar.update
	res, err := ablate.Run(ctx, cfg)
	bar.end()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	printAblation(stdout, res)
	if *out != "" {
		if err := res.WriteFiles(*out); err != nil {
			fmt.Fprintln(stderr, "tether: ablate:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote results.json, turns.csv, overhead.svg, e2e.svg, waterfall.svg and report.html to %s\n", *out)
	}
	return 0
}

// ablateConfig builds the run's workload, modes and speeds from the flags.
func ablateConfig(workload, tools string, calls, parallel int, latency time.Duration, outputBytes int, modes, speeds string) (ablate.Config, error) {
	var cfg ablate.Config
	var err error
	switch name, ok := strings.CutPrefix(workload, "trace:"); {
	case ok:
		traces, lerr := sampler.LoadTraces()
		if lerr != nil {
			return cfg, lerr
		}
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
	default:
		err = fmt.Errorf("--workload %q: want trace:NAME or synthetic", workload)
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

// printAblation prints the run's two tables: end to end per mode, and per
// round trip against the echo floor.
func printAblation(w io.Writer, res *ablate.Results) {
	c := res.Config
	prefill := "free"
	if c.Prefill > 0 {
		prefill = strconv.FormatFloat(c.Prefill, 'f', -1, 64) + " tok/s"
	}
	fmt.Fprintf(w, "%s (%s, %s), %s, ttft %v, prefill %s; %d CPUs, %s\n\n", c.Workload, c.Model, count(c.Calls, "call"), count(c.Reps, "round"),
		time.Duration(c.TTFTUS*1e3), prefill, res.Machine.CPUs, res.Machine.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tok/s\tmode\tend to end\tp95\tmodel\ttools\tAPI overhead\tof e2e\te2e vs stateless\tsent\treceived\t")
	for _, s := range res.Summary {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\t\n", rate(s.TPS), s.Mode, ms(s.ElapsedMedianUS), ms(s.ElapsedP95US),
			ms(s.ModelMedianUS), ms(s.ToolsMedianUS), ms(s.OverheadMedianUS), 100*s.OverheadMedianUS/s.ElapsedMedianUS,
			times(s.ElapsedVsStateless), size(int(s.BytesSentMedian)), size(int(s.BytesReceivedMedian)))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "tok/s\tmode\tround trips\toverhead p50\tp99\tfloor p50\tp99\t× floor p50 (95% CI)\tp99 (95% CI)\ttokenize p50\t× floor without\twarm floor\t× warm\tpacer late\tline at first\tat last\tgrowth (95% CI)\tµs per 1k tok (95% CI)\tCPU/turn\t")
	for _, s := range res.Summary {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rate(s.TPS), s.Mode, s.RoundTrips,
			usec(s.RoundTripMedianUS), usec(s.RoundTripP99US), usec(s.FloorMedianUS), usec(s.FloorP99US),
			ablate.WithInterval(s.FloorRatioMedian, s.FloorRatioMedianCI, 1), ablate.WithInterval(s.FloorRatioP99, s.FloorRatioP99CI, 1),
			usec(s.RenderMedianUS), s.FloorRatioExRender, usec(s.WarmFloorMedianUS), s.WarmFloorRatio,
			usec(s.PacerLateMedianUS), usec(s.FitFirstUS), usec(s.FitLastUS),
			ablate.WithInterval(s.OverheadGrowth, s.OverheadGrowthCI, 2), ablate.WithInterval(s.SlopeUSPer1kTokens, s.SlopeCI, 1), usec(s.CPUPerTurnUS))
	}
	tw.Flush()
	fmt.Fprint(w, `
API overhead = end to end - model - tools, where model time is the timing model's
for each step's uncached prompt and output tokens, plus how late the simulated
model's last token came (pacer late: Go's timers wake up to 1 ms late here). A round trip is a turn that
ends in a pause for tools (all but the first and the last); its overhead is its
latency minus its model time; floor is an echo of the same bytes and frames on
the same loopback, measured in the same run after as long an idle as the round
trip's request followed (the client's tool time, up to 50 ms: an idle machine
answers slower), and × floor the round trips' overhead p50 (p99) over their
floors' p50 (p99); tokenize is the server's tokenizing of the round trip's new
items (its timings), which a real server does as well, and the next column the
floor ratio without it; warm floor is the fastest of three echoes back to back,
the transport's best case, and × warm the overhead p50 over it. The line is overhead against
the context each step read (Theil-Sen: the median of pairwise slopes, which one
slow round trip does not move), at the first and the last round trip; growth is
last over first. 95% CI: bootstrap intervals over the round trips, how far this
run's figure could have landed. CPU/turn counts the whole process: the client
and the in-process server.
`)
}

// count is n and noun, the noun plural (with an s) unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func ms(us float64) string   { return strconv.FormatFloat(us/1e3, 'f', 1, 64) + " ms" }
func usec(us float64) string { return strconv.FormatFloat(us, 'f', 0, 64) + " µs" }

func times(r float64) string {
	if r == 0 {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 3, 64) + "×"
}

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
