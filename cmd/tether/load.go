package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/internal/streamfloor"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// loadFlags are ablate's flags for a load run (--load).
type loadFlags struct {
	clients   *string
	duration  *time.Duration
	mode      *string
	server    *string
	park      *int
	parkCtx   *int
	hibernate *time.Duration
	wakes     *int
	hol       *int
	holLoss   *string
	holDelay  *time.Duration
	holRTX    *time.Duration
	holTPS    *float64
	step      *time.Duration
	floor     *bool
	rounds    *int
	floorCost streamfloorCost
	decodeAll *bool
	engine    *string
	speed     *float64
	tls       *bool
}

func declareLoadFlags(fs *flag.FlagSet) loadFlags {
	return loadFlags{
		clients:   fs.String("load", "", "a load run instead of the comparison: this many concurrent clients (comma-separated: one run each, like 100,300,500), each running the workload again and again for --duration against a tether serve started as a child process, so that client and server CPU are apart"),
		duration:  fs.Duration("duration", time.Minute, "with --load or --hol: how long each run lasts"),
		mode:      fs.String("load-mode", "suspend", "with --load: the design the clients use (a --modes name: suspend, suspend+msgpack, turns, …)"),
		park:      fs.Int("park", 0, "a parking run instead of the comparison: park this many suspended rollouts, each on its own WebSocket waiting for a client call's output, against a tether serve started as a child process, and report its memory and goroutines per rollout"),
		parkCtx:   fs.Int("park-context", 8000, "with --park: tokens of context each parked rollout holds"),
		hibernate: fs.Duration("hibernate-after", 0, "with --park and --store redis://: the served tether hibernates rollouts parked this long (serve --hibernate-after; 1ns at once); the clients then disconnect, and the run reports the server and Redis with every rollout hibernated, and an append's time to its first event, to a rollout hot and to one hibernated"),
		wakes:     fs.Int("park-wakes", 200, "with --park --hibernate-after: rollouts answered hot, and hibernated, for the append's time to its first event"),
		hol:       fs.Int("hol", 0, "a head-of-line run instead of the comparison: this many lanes stream at once over one WebSocket, then one WebTransport connection, through a simulated lossy link, for --duration at each --hol-loss; reports each transport's token delivery lag"),
		holLoss:   fs.String("hol-loss", "0,0.01,0.05", "with --hol: shares of packets the link loses each way, comma-separated"),
		holDelay:  fs.Duration("hol-delay", 10*time.Millisecond, "with --hol: the link's one-way delay"),
		holRTX:    fs.Duration("hol-rtx", 0, "with --hol: how late a lost TCP segment arrives, its retransmission (default: two round trips)"),
		holTPS:    fs.Float64("hol-tps", 50, "with --hol: each lane's model speed, tokens per second (the default keeps 16 lanes' frames well below what a lossy link carries, so that lag measures blocking, not a full pipe)"),
		step:      fs.Duration("engine-step", 0, "with --load: the served tether's engine step (serve --engine-step): tokens that fall due within a step go out together"),
		floor:     fs.Bool("floor", true, "with --load: run the streaming floor beside the server, in turn, round by round (tether ablate floor: a recorded rollout's frames at the same cadence, nothing else), and report the server against it; each then runs --duration, so a run takes twice as long. WebSocket designs in JSON only (suspend, turns)"),
		floorCost: streamfloorCost{
			step:  fs.Duration("floor-cost-step", 0, "with --load and --floor: CPU the floor spends, spinning, on each step besides its own work (ablate floor --cost-step): set it to the server's excess a step over the plain floor's to see what that cost alone does to the floor's lag"),
			token: fs.Duration("floor-cost-token", 0, "with --load and --floor: CPU the floor spends, spinning, on each token as the engine releases it (ablate floor --cost-token)"),
		},
		rounds:    fs.Int("load-rounds", 4, "with --load and --floor: rounds of floor then server, each --duration/rounds long; the intervals against the floor resample them (3 at least)"),
		decodeAll: fs.Bool("load-decode-all", false, "with --load: the clients decode every event whole, as a client that watches them all would, rather than only the events they read (the deltas, each step's pause or end): what that filter saves the clients"),
		engine:    fs.String("load-engine", "", "with --load N: run the designs live against a served engine of this profile (serve --engine-model: "+strings.Join(enginemodel.BuiltinProfiles(), ", ")+", or a JSON file), one server for each design and cache policy, N clients each running the workload's trace once with its tools' recorded times, and set the simulator's same cells beside them (ablate --engine is the simulator alone)"),
		speed:     fs.Float64("load-engine-speed", 10, "with --load-engine: the served engine's clock against the real one (serve --engine-speed); the tools' times are divided by it, and every figure is in the engine's time"),
		tls:       fs.Bool("load-tls", false, "with --load: the server and the floor serve HTTPS and WSS (serve --tls-cert, with a self-signed certificate made for the run, which the clients trust): the flushers then seal each batch into TLS records in memory and write those without waiting, as they write a plain connection (docs/measuring.md, \"Flush holds\")"),
		server:    fs.String("load-server", "", "with --load or --park: the tether binary to serve (default: this one); another build, to compare two"),
	}
}

// streamfloorCost are the flags of the floor's cost (streamfloor.Cost).
type streamfloorCost struct{ step, token *time.Duration }

// parseClients reads comma-separated numbers of clients, each above 0.
func parseClients(s string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want numbers of clients, like 100,500", s)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// binary is the tether the run serves: --load-server, or this one.
func (lf loadFlags) binary() (string, error) {
	if *lf.server != "" {
		return *lf.server, nil
	}
	return os.Executable()
}

// serverEnv is the served tether's environment besides this one's: no
// memory limit (GOMEMLIMIT=off, which any Go program takes, an older
// --load-server's too), unless this environment sets one. A run measures
// the server's memory, CPU and collector: a limit drawn from this machine's
// memory would make them depend on the machine, and its budget (half of
// it) would refuse the rollouts a large --park holds (10,000 hold about
// 920 MiB of heap) on a smaller one.
func serverEnv() []string {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return nil
	}
	return []string{"GOMEMLIMIT=off"}
}

// serverLog is where a child server's log goes: server.log in the run's
// directory out, so that it neither mixes with ablate's own output nor is
// lost.
func serverLog(out string) (io.Writer, func(), error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(filepath.Join(out, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// runPark runs `tether ablate --park`.
func runPark(ctx context.Context, lf loadFlags, costs costSettings, store, out string, stdout, stderr io.Writer) int {
	exe, err := lf.binary()
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	k := *lf.park
	hibernate := *lf.hibernate > 0
	if hibernate && !strings.HasPrefix(store, "redis") {
		fmt.Fprintln(stderr, "tether: ablate: --hibernate-after needs --store redis://HOST:PORT/DB: rollouts hibernate to Redis")
		return 2
	}
	server := []string{exe, "serve", "--addr", "127.0.0.1:0", "--tps", "0", "--pprof",
		"--max-suspended", strconv.Itoa(max(k+*lf.wakes, 1024)), "--max-connections", strconv.Itoa(max(k, 4096))}
	if hibernate {
		server = append(server, "--store", store, "--hibernate-after", lf.hibernate.String())
	}
	server = append(server, costs.args()...)
	log, closeLog, err := serverLog(out)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	defer closeLog()
	bar := newProgress(stderr)
	pc := ablate.ParkConfig{Rollouts: k, ContextTokens: *lf.parkCtx, Server: server, ServerEnv: serverEnv(), ServerLog: log,
		Hibernate: hibernate, Redis: store, Wakes: *lf.wakes,
		Progress: func(done, total int) { bar.update(done, total, "parked") }}
	if *lf.floor && !hibernate {
		pc.Floor = []string{exe, "ablate", "floor", "--tps", "0"}
		pc.Recorder = append([]string{exe, "serve", "--addr", "127.0.0.1:0", "--tps", "0", "--every-delta"}, costs.args()...)
		pc.RecordingFile = filepath.Join(out, "floor-recording.json")
	}
	res, err := ablate.RunPark(ctx, pc)
	bar.end()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "park.json"), append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%d suspended rollouts parked in %.1f s, each on its own WebSocket with %d tokens of context\n\n",
		res.Rollouts, res.ParkSeconds, res.ContextTokens)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tserver RSS\theap in use\tstacks\tgoroutines\t")
	fmt.Fprintf(tw, "before\t%.0f MiB\t%.0f MiB\t%.1f MiB\t%d\t\n", res.BaselineRSSMiB, res.BaselineHeapMiB, res.BaselineStackMiB, res.BaselineGoroutines)
	state := "parked"
	if hibernate {
		state = "hibernated"
	}
	fmt.Fprintf(tw, "%s\t%.0f MiB\t%.0f MiB\t%.1f MiB\t%d\t\n", state, res.ParkedRSSMiB, res.ParkedHeapMiB, res.ParkedStackMiB, res.ParkedGoroutines)
	n := float64(res.Rollouts)
	fmt.Fprintf(tw, "per rollout\t%.1f KiB\t%.1f KiB\t%.1f KiB\t%.2f\t\n", res.RSSPerRollout/1024, res.HeapPerRollout/1024,
		(res.ParkedStackMiB-res.BaselineStackMiB)*1024/n, res.GoroutinesPerRollout)
	if f := res.Floor; f != nil {
		fmt.Fprintf(tw, "floor, per rollout\t%.1f KiB\t%.1f KiB\t%.1f KiB\t%.2f\t\n", f.RSSPerRollout/1024, f.HeapPerRollout/1024,
			(f.ParkedStackMiB-f.BaselineStackMiB)*1024/n, f.GoroutinesPerRollout)
	}
	tw.Flush()
	if res.Floor != nil {
		fmt.Fprintf(stdout, "\ntether's heap a parked rollout is ×%.2f the floor's (a WebSocket and the request's bytes held, parked with the same requests first), its RSS ×%.2f.\n",
			res.HeapVsFloor, res.RSSVsFloor)
	}
	fmt.Fprint(stdout, "\nHeap in use is read after a collection; RSS also holds what the collector has not yet returned.\n")
	if hibernate {
		fmt.Fprintf(stdout, "\nThe clients left; every rollout hibernated within %.1f s. Redis: %.1f MiB before, %.1f MiB after, %.1f KiB a rollout.\n",
			res.HibernateSeconds, res.RedisBaselineMiB, res.RedisHibernatedMiB, res.RedisBytesPerRollout/1024)
		fmt.Fprintf(stdout, "An append's time to its first event (median, p99): hot %.2f ms, %.2f ms (%d); hibernated, from a new connection, %.2f ms, %.2f ms (%d).\n",
			res.HotAppendMs.P50, res.HotAppendMs.P99, res.HotAppendMs.N, res.WakeAppendMs.P50, res.WakeAppendMs.P99, res.WakeAppendMs.N)
	}
	fmt.Fprintf(stdout, "\nwrote park.json and server.log to %s\n", out)
	return 0
}

// runLoad runs `tether ablate --load`: one load run per number of clients,
// each against a fresh server.
func runLoad(ctx context.Context, lf loadFlags, cfg ablate.Config, enc protocol.Encoding, costs costSettings, out string, stdout, stderr io.Writer) int {
	design, err := ablate.ParseDesign(*lf.mode)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate: --load-mode:", err)
		return 2
	}
	design = design.On(enc)
	if design.Transport != clienttools.TransportWebSocket {
		fmt.Fprintln(stderr, "tether: ablate: --load-mode: the load runs go over WebSocket and HTTP; WebTransport is measured by --hol")
		return 2
	}
	counts, err := parseClients(*lf.clients)
	if err != nil {
		fmt.Fprintf(stderr, "tether: ablate: --load %q: want numbers of clients, like 100,500\n", *lf.clients)
		return 2
	}
	if len(cfg.Speeds) != 1 || cfg.Speeds[0] <= 0 || *lf.duration <= 0 {
		fmt.Fprintln(stderr, "tether: ablate: --load takes one paced --tps and a positive --duration")
		return 2
	}
	exe, err := lf.binary()
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	log, closeLog, err := serverLog(out)
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	defer closeLog()
	floored := *lf.floor && cfg.URL == "" && len(cfg.Fallbacks) == 0 && design.Encoding == protocol.EncodingJSON &&
		(design.Mode == clienttools.ModeSuspend || design.Mode == clienttools.ModeTurns)
	if *lf.floor && !floored {
		fmt.Fprintf(stderr, "tether: ablate: no floor beside %s: the streaming floor replays WebSocket designs in JSON (suspend, turns) to a server ablate starts\n", design)
	}
	if floored && *lf.rounds < 1 {
		fmt.Fprintln(stderr, "tether: ablate: --load-rounds must be at least 1")
		return 2
	}
	if *lf.floorCost.step < 0 || *lf.floorCost.token < 0 || !floored && *lf.floorCost.step+*lf.floorCost.token > 0 {
		fmt.Fprintln(stderr, "tether: ablate: --floor-cost-step and --floor-cost-token take a duration of 0 or more, in a run with a floor")
		return 2
	}
	var certArgs []string
	var clientTLS *tls.Config
	if *lf.tls {
		if cfg.URL != "" || len(cfg.Fallbacks) > 0 {
			fmt.Fprintln(stderr, "tether: ablate: --load-tls is for the servers ablate starts, not --url's")
			return 2
		}
		if certArgs, clientTLS, err = runCertificate(out); err != nil {
			fmt.Fprintln(stderr, "tether: ablate: --load-tls:", err)
			return 1
		}
	}
	run := ablate.NewLoadRun()
	for _, n := range counts {
		server := []string{exe, "serve", "--addr", "127.0.0.1:0", "--tps", strconv.FormatFloat(cfg.Speeds[0], 'f', -1, 64),
			"--ttft", cfg.TTFT.String(), "--prefill-rate", strconv.FormatFloat(cfg.PrefillRate, 'f', -1, 64),
			"--max-suspended", strconv.Itoa(max(2*n, 1024)), "--max-connections", strconv.Itoa(max(2*n, 4096))}
		server = append(server, costs.args()...) // the cost model, every setting explicit
		if *lf.step > 0 {
			server = append(server, "--engine-step", lf.step.String())
		}
		if cfg.TraceDir != "" {
			server = append(server, "--traces", cfg.TraceDir)
		}
		server = append(server, certArgs...)
		lc := ablate.LoadConfig{Clients: n, Mode: design.Mode, Encoding: design.Encoding, Workload: cfg.Workload,
			Duration: *lf.duration, TPS: cfg.Speeds[0], EngineStep: *lf.step, Server: server, ServerEnv: serverEnv(), ServerLog: log, URL: cfg.URL, Fallbacks: cfg.Fallbacks, APIKey: cfg.APIKey, DecodeAll: *lf.decodeAll, ClientTLS: clientTLS}
		if floored {
			// A round's end cuts its clients' rollouts off: tether keeps
			// each suspended one detached for its resume window, which
			// would fill --max-suspended by the next round. None is
			// resumed in a load run, so they go within a second, while
			// the floor's round runs.
			lc.Server = append(lc.Server, "--resume-window", "1s")
			// The floor paces as the server does; the recorder is the
			// server unpaced, sending every delta: one frame a token.
			lc.Floor = []string{exe, "ablate", "floor", "--tps", strconv.FormatFloat(cfg.Speeds[0], 'f', -1, 64), "--ttft", cfg.TTFT.String(),
				"--prefill-rate", strconv.FormatFloat(cfg.PrefillRate, 'f', -1, 64), "--engine-step", lf.step.String(),
				"--cost-step", lf.floorCost.step.String(), "--cost-token", lf.floorCost.token.String()}
			lc.Floor = append(lc.Floor, certArgs...)
			lc.FloorCost = streamfloor.Cost{Step: *lf.floorCost.step, Token: *lf.floorCost.token}
			lc.Recorder = append([]string{exe, "serve", "--addr", "127.0.0.1:0", "--tps", "0", "--ttft", "0s", "--prefill-rate", "0", "--every-delta"}, costs.args()...)
			if cfg.TraceDir != "" {
				lc.Recorder = append(lc.Recorder, "--traces", cfg.TraceDir)
			}
			lc.RecordingFile, lc.Rounds = filepath.Join(out, "floor-recording.json"), *lf.rounds
			if err := os.MkdirAll(out, 0o755); err != nil {
				fmt.Fprintln(stderr, "tether: ablate:", err)
				return 1
			}
		}
		bar := newProgress(stderr)
		lc.Progress = func(elapsed, total time.Duration) {
			bar.update(int(elapsed/time.Second), int(total/time.Second), fmt.Sprintf("%d clients", n))
		}
		res, err := ablate.RunLoad(ctx, lc)
		bar.end()
		if err != nil {
			fmt.Fprintln(stderr, "tether:", err)
			return 1
		}
		run.Results = append(run.Results, res)
	}
	printLoad(stdout, run)
	if err := run.WriteFiles(out); err != nil {
		fmt.Fprintln(stderr, "tether: ablate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwrote load.json, load-lag.svg, load-rss.svg, load-goroutines.svg and server.log to %s\n", out)
	return 0
}

func printLoad(w io.Writer, run *ablate.LoadRun) {
	if len(run.Results) == 0 {
		return
	}
	r0 := run.Results[0]
	step := ""
	if r0.EngineStepMS > 0 {
		step = fmt.Sprintf(", an engine step of %g ms", r0.EngineStepMS)
	}
	if r0.DecodeAll {
		step += ", the clients decoding every event whole"
	}
	if r0.TLS {
		step += ", over TLS"
	}
	fmt.Fprintf(w, "%s, %s, %s tok/s a stream%s, %.0f s a run; %d CPUs, %s\n\n", r0.Workload, r0.Mode, rate(r0.TPS), step, r0.DurationS,
		run.Machine.CPUs, run.Machine.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tserver\trollouts\ttokens/s\tdelta frames/s\tlag p50\tp99\tmax\terrors\thandovers\tserver CPU\ta token\ta frame\ta step\tGC\tflush holds/s\tclient CPU\ta token\tserver RSS max\tgoroutines max\t")
	row := func(r *ablate.LoadResult, server string) {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%.0f\t%.1f ms\t%.1f ms\t%.1f ms\t%s\t%d\t%.2f cores\t%.1f µs\t%.1f µs\t%.0f µs\t%.1f%%\t%.0f\t%.2f cores\t%.1f µs\t%.0f MiB\t%d\t\n", r.Clients, server, r.Rollouts,
			r.TokensPerS, r.FramesPerS, r.LagP50US/1e3, r.LagP99US/1e3, r.LagMaxUS/1e3, byCode(r.Errors), r.Handovers, r.ServerCPU, r.ServerCPUPerToken,
			r.ServerCPUPerFrame, r.ServerCPUPerStep, 100*r.ServerGCShare, r.FlushHoldsPerS, r.ClientCPU, r.ClientCPUPerToken, r.ServerRSSMaxMiB, r.ServerGoroutines)
	}
	for _, r := range run.Results {
		if r.Floor != nil {
			row(r.Floor, floorName(r.Floor))
		}
		row(r, "tether")
	}
	tw.Flush()
	for _, r := range run.Results {
		if v := r.VsFloor; v != nil {
			fmt.Fprintf(w, "\n%d clients, tether against the floor%s over %d rounds (95%% intervals): server CPU ×%s a token, ×%s a frame; lag p99 %s ms over the floor's, p50 %+.1f ms; a step %s ms over the floor's %.1f ms; RSS ×%.1f\n",
				r.Clients, floorCost(r.Floor), len(r.Rounds), v.ServerCPUPerToken.String(2), v.ServerCPUPerFrame.String(2), signed(v.LagP99OverMS), v.LagP50OverMS.Value,
				signed(v.StepOverMS), r.Floor.StepMS, v.RSS)
		}
	}
	for _, r := range run.Results {
		if len(r.Refused) > 0 {
			fmt.Fprintf(w, "\n%d clients on %d servers: refused before they began and started on the next server: %s\n", r.Clients, r.Servers, byCode(r.Refused))
		}
	}
	fmt.Fprint(w, `
Lag is each streamed token's arrival on its client against its stream's own
schedule: a step's tokens are due 1/TPS apart from the earliest start that no
token beat, so a late or merged delta's tokens lag (the model's time to its
first token does not). CPU is cores busy on average, the server (a child
process) and the clients (this one) apart, per streamed token, and the server's per
model step (a pause or a turn: its round trip and its tokens); a step's time is its mean
wall time on a client (the clients' time over their steps), which against the floor's,
the model's time the same, is what the server adds to a round trip; GC is the share of the
server's CPU its garbage collector took (Go's estimate); flush holds are the server's
connection writers holding a write for their next frames (at most 1 ms), which they do
only while the server is saturated; errors are failed rollouts by code;
handovers are suspended rollouts resumed after their connection closed or
dropped (with --url given for several servers, on the next of them). The
floor (--floor) is the streaming floor, run in turn with tether: the same
clients and frames at the same cadence from a server that does nothing else
(docs/measuring.md).
`)
}

// floorName is the floor's row's name: "floor+cost" when it spent a cost
// besides its own work (--floor-cost-step, --floor-cost-token).
func floorName(f *ablate.LoadResult) string {
	if f.CostStepUS+f.CostTokenUS > 0 {
		return "floor+cost"
	}
	return "floor"
}

// floorCost says what the floor spent besides its own work, if anything:
// " (spending 200 µs more a step)".
func floorCost(f *ablate.LoadResult) string {
	var more []string
	if f.CostStepUS > 0 {
		more = append(more, fmt.Sprintf("%g µs more a step", f.CostStepUS))
	}
	if f.CostTokenUS > 0 {
		more = append(more, fmt.Sprintf("%g µs more a token", f.CostTokenUS))
	}
	if len(more) == 0 {
		return ""
	}
	return " (spending " + strings.Join(more, " and ") + ")"
}

// signed is e with its sign, "+12.3 (4.1–20.5)".
func signed(e ablate.Estimate) string {
	s := e.String(1)
	if e.Value >= 0 {
		s = "+" + s
	}
	return s
}

// runHOL runs `tether ablate --hol`.
func runHOL(ctx context.Context, lf loadFlags, out string, stdout, stderr io.Writer) int {
	cfg := ablate.HOLConfig{Lanes: *lf.hol, Delay: *lf.holDelay, RTX: *lf.holRTX, TPS: *lf.holTPS, Duration: *lf.duration, Seed: 1}
	for _, s := range strings.Split(*lf.holLoss, ",") {
		loss, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || loss < 0 || loss >= 1 {
			fmt.Fprintf(stderr, "tether: ablate: --hol-loss %q: want shares of packets lost, like 0,0.01,0.05\n", *lf.holLoss)
			return 2
		}
		cfg.Loss = append(cfg.Loss, loss)
	}
	if cfg.TPS <= 0 || cfg.Delay < 0 || cfg.RTX < 0 {
		fmt.Fprintln(stderr, "tether: ablate: --hol-tps must be positive, --hol-delay and --hol-rtx not negative")
		return 2
	}
	fmt.Fprintf(stderr, "head-of-line: %d lanes at %g tok/s each, link delay %s each way, a lost TCP segment %s late; %s per run, %d runs\n",
		cfg.Lanes, cfg.TPS, cfg.Delay, cfg.RTXOrDefault(), cfg.Duration, 2*len(cfg.Loss))
	res, err := ablate.RunHOL(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loss\ttransport\ttokens\tlag p50\tp99\tmax\tworst lane p99\t")
	for _, r := range res {
		worst := 0.0
		for _, l := range r.LaneP99MS {
			worst = max(worst, l)
		}
		fmt.Fprintf(tw, "%g%%\t%s\t%d\t%.1f ms\t%.1f ms\t%.1f ms\t%.1f ms\t\n", 100*r.Loss, r.Transport, r.Tokens, r.LagP50MS, r.LagP99MS, r.LagMaxMS, worst)
	}
	tw.Flush()
	fmt.Fprint(stdout, "\nLag: how late each token reached its lane's client against the schedule the model kept (see docs/measuring.md, Under load).\n")
	if err := ablate.WriteHOL(out, cfg, res); err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote hol.json to %s\n", out)
	return 0
}

// byCode lists counts by code, in the codes' order: "0" when there are none.
func byCode(counts map[string]int) string {
	if len(counts) == 0 {
		return "0"
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", code, counts[code]))
	}
	return strings.Join(parts, ", ")
}
