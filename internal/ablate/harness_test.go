package ablate

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestRunSynthetic runs every mode, and suspend and inject against the
// server that checkpoints, twice on a small synthetic workload and checks what the
// harness recorded: every call made, the turns' arithmetic, no trial
// reading another's prompts, and files that follow the schema.
func TestRunSynthetic(t *testing.T) {
	w, err := SyntheticWorkload(4, 1, time.Millisecond, 300)
	if err != nil {
		t.Fatal(err)
	}
	modes := append(Designs(clienttools.Modes...), Design{Mode: clienttools.ModeSuspend, Durable: true}, Design{Mode: clienttools.ModeInject, Durable: true})
	res, err := Run(t.Context(), Config{Workload: w, Modes: modes, Speeds: []float64{0}, Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) != 2*len(modes) {
		t.Fatalf("%d trials, want %d", len(res.Trials), 2*len(modes))
	}
	keys := map[string]bool{}
	for _, tr := range res.Trials {
		if tr.Calls != 4 || len(tr.Turns) != 5 {
			t.Errorf("%s: %d calls in %d turns, want 4 in 5", tr.Mode, tr.Calls, len(tr.Turns))
		}
		if keys[tr.PromptCacheKey] {
			t.Errorf("prompt_cache_key %s used twice", tr.PromptCacheKey)
		}
		keys[tr.PromptCacheKey] = true
		if len(tr.Paths) == 0 {
			t.Errorf("%s: no server paths recorded", tr.Mode)
		}
		// A background trial cuts and resumes every turn's stream; no
		// other design resumes one.
		resumes := 0
		if tr.Mode == "background" {
			resumes = len(tr.Turns)
		}
		if tr.Resumes != resumes {
			t.Errorf("%s: %d resumes in %d turns, want %d", tr.Mode, tr.Resumes, len(tr.Turns), resumes)
		}
		// Only a durable rollout's pauses wait for journal writes.
		var journal int64
		for _, tn := range tr.Turns {
			if tn.Server != nil {
				journal += tn.Server.JournalMicros
			}
		}
		if durable := strings.HasSuffix(tr.Mode, "+durable"); durable != (journal > 0) {
			t.Errorf("%s: its pauses waited %d µs for journal writes", tr.Mode, journal)
		}
		// A trial starts cold and its later steps find its own prompts.
		if c := tr.Turns[0].CachedTokens; c != 0 {
			t.Errorf("%s round %d: first turn read %d cached tokens: another trial's prompts", tr.Mode, tr.Rep, c)
		}
		if c := tr.Turns[len(tr.Turns)-1].CachedTokens; c == 0 {
			t.Errorf("%s round %d: the last turn found nothing cached", tr.Mode, tr.Rep)
		}
		var model, tools float64
		for i, tn := range tr.Turns {
			if tn.OverheadUS != tn.LatencyUS-tn.ModelUS || tn.FloorUS <= 0 || tn.WarmFloorUS <= 0 || tn.Events < 3 {
				t.Errorf("%s turn %d: %+v", tr.Mode, tn.Turn, tn)
			}
			// Each floor echo followed the idle its turn's request did:
			// the client's tool time before it (1 ms tools here).
			idle := 0.0
			if i > 0 {
				idle = min(tr.Turns[i-1].ToolsUS, us(maxFloorIdle))
			}
			if math.Abs(tn.FloorIdleUS-idle) > 0.01 || i > 0 && idle < 1000 {
				t.Errorf("%s turn %d: floor after %v µs of idle, want %v", tr.Mode, tn.Turn, tn.FloorIdleUS, idle)
			}
			model += tn.ModelUS
			tools += tn.ToolsUS
		}
		if tr.ModelUS != 0 || model != 0 { // unpaced
			t.Errorf("%s: unpaced model time %v", tr.Mode, tr.ModelUS)
		}
		if math.Abs(tr.OverheadUS-(tr.ElapsedUS-tr.ModelUS-tr.ToolsUS)) > 1e-6 || tr.ToolsUS != tools || tools < 4000 {
			t.Errorf("%s: elapsed %v, model %v, tools %v (turns %v), overhead %v", tr.Mode, tr.ElapsedUS, tr.ModelUS, tr.ToolsUS, tools, tr.OverheadUS)
		}
	}
	if len(res.Summary) != len(modes) {
		t.Fatalf("%d summary rows, want %d", len(res.Summary), len(modes))
	}
	for _, s := range res.Summary {
		if s.Trials != 2 || s.RoundTrips != 6 || s.ElapsedMedianUS <= 0 || s.FloorMedianUS <= 0 {
			t.Errorf("summary %+v", s)
		}
		// A durable rollout's journal: a snapshot at its first pause, then
		// a pause's write and its answer's appended at each pause.
		if durable := strings.HasSuffix(s.Mode, "+durable"); durable != (s.JournalBytesPerRollout > 0) ||
			durable && (s.SnapshotBytesPerRollout <= 0 || s.JournalBytesPerPause <= 0 || s.JournalWritesPerPause < 1.5 || s.JournalWritesPerPause > 2) {
			t.Errorf("%s: journal %v bytes a rollout, %v a pause in %v writes, %v of snapshots", s.Mode, s.JournalBytesPerRollout, s.JournalBytesPerPause, s.JournalWritesPerPause, s.SnapshotBytesPerRollout)
		}
		if s.Mode == "stateless" && (s.EndToEndVsStateless != 1 || s.APIOverheadVsStateless != 1) {
			t.Errorf("stateless against itself: %v, %v", s.EndToEndVsStateless, s.APIOverheadVsStateless)
		}
		// End to end is the designs' shared model and tool time plus this
		// design's API overhead, which is not negative: at least the
		// shared time. Not at least this design's own medians, which a
		// loaded machine moves off the shared ones (chained's tools median
		// once came to 15.4 ms against a computed end to end of 14.9).
		if s.EndToEndCI[0] > s.EndToEndUS || s.EndToEndCI[1] < s.EndToEndUS || s.ModelToolsShare <= 0 || s.ModelToolsShare > 1 {
			t.Errorf("%s: end to end %v (%v), of which the shared model and tool time is %.1f%%", s.Mode, s.EndToEndUS, s.EndToEndCI, 100*s.ModelToolsShare)
		}
	}

	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, filepath.Join(dir, "results.json"))
	f, err := os.Open(filepath.Join(dir, "turns.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(res.Trials)*5 || len(rows[0]) != len(turnColumns) {
		t.Errorf("turns.csv: %d rows of %d columns, want %d of %d", len(rows), len(rows[0]), 1+10*5, len(turnColumns))
	}
}

func checkSchema(t *testing.T, path string) {
	t.Helper()
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("results.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("results.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("results.json does not follow its schema: %v", err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil || back.Schema != SchemaVersion {
		t.Errorf("results.json: %v, schema %q", err, back.Schema)
	}
}

// TestTrialsKeptApartByKey: against a server whose caches the harness
// cannot reset (--url), trials are kept apart by their prompt_cache_key
// alone; the same prompt under the same key is cached, so the check can fail.
func TestTrialsKeptApartByKey(t *testing.T) {
	base := serve(t)
	w, err := SyntheticWorkload(2, 1, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), Config{Workload: w, Modes: Designs(clienttools.ModeStateless), Speeds: []float64{0}, Reps: 2, URL: base})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Trials {
		if c := tr.Turns[0].CachedTokens; c != 0 {
			t.Errorf("round %d: the first turn read %d cached tokens", tr.Rep, c)
		}
	}
	// The same request under the first trial's key finds it cached.
	key := res.Trials[0].PromptCacheKey
	c := &clienttools.Client{BaseURL: base}
	again, err := c.Run(t.Context(), clienttools.Rollout{Mode: clienttools.ModeStateless, Funcs: w.Tools(""),
		Request: &protocol.CreateRequest{Model: w.Model, Input: w.input(), PromptCacheKey: &key}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Turns[0].Usage.InputTokensDetails.CachedTokens == 0 {
		t.Error("the first trial's prompt under its own key was not cached")
	}
}

// serve starts an unpaced tether on loopback and returns its base URL.
func serve(t *testing.T) string {
	t.Helper()
	srv, err := runtime.NewServer(runtime.Options{Models: map[string]runtime.Sampler{
		sampler.ScriptedModel: sampler.NewScripted(nil, sampler.Timing{})}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// TestCheckPaths: a trial whose server counters show another design's path
// is refused.
func TestCheckPaths(t *testing.T) {
	t.Parallel()
	wt := func(m clienttools.Mode) Design { return Design{Mode: m, Transport: clienttools.TransportWebTransport} }
	cases := []struct {
		mode  Design
		paths map[string]int
		ok    bool
	}{
		{Design{Mode: clienttools.ModeSuspend}, map[string]int{"wt/suspend/none": 1, "pauses": 3}, false},
		{wt(clienttools.ModeSuspend), map[string]int{"wt/suspend/none": 1, "pauses": 3}, true},
		{wt(clienttools.ModeTurns), map[string]int{"wt/turns/none": 1, "wt/turns/cache": 3}, true},
		{wt(clienttools.ModeTurns), map[string]int{"ws/turns/none": 1, "ws/turns/cache": 3}, false},
		{Design{Mode: clienttools.ModeStateless}, map[string]int{"http/stateless/none": 4}, true},
		{Design{Mode: clienttools.ModeStateless}, map[string]int{"http/stateless/none": 1, "http/chained/store": 3}, false},
		{Design{Mode: clienttools.ModeChained}, map[string]int{"http/stateless/none": 1, "http/chained/store": 3}, true},
		{Design{Mode: clienttools.ModeTurns}, map[string]int{"ws/turns/none": 1, "ws/turns/cache": 3}, true},
		{Design{Mode: clienttools.ModeTurns}, map[string]int{"ws/turns/none": 1, "ws/turns/store": 3}, false},
		{Design{Mode: clienttools.ModeSuspend}, map[string]int{"ws/suspend/none": 1, "pauses": 3}, true},
		{Design{Mode: clienttools.ModeSuspend}, map[string]int{"ws/suspend/none": 1, "pauses": 2}, false},
		{Design{Mode: clienttools.ModeSuspend}, map[string]int{"ws/turns/none": 4}, false},
	}
	for _, tc := range cases {
		if err := checkPaths(tc.mode, 4, tc.paths); (err == nil) != tc.ok {
			t.Errorf("%s %v: err %v, want ok %v", tc.mode, tc.paths, err, tc.ok)
		}
	}
}

// TestRunPrecision: with Precision, rounds go on past Reps until the
// headline's figures are within it or MaxTime has passed, and the run
// records which, in a results.json that follows the schema. A target of
// 0.1% is beyond three rounds of four calls, so the run adds rounds and
// stops at MaxTime, naming what is still wider; over turns, and over
// rounds.
func TestRunPrecision(t *testing.T) {
	t.Parallel()
	w, err := SyntheticWorkload(4, 1, time.Millisecond, 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, overRounds := range []bool{false, true} {
		t.Run(fmt.Sprintf("over rounds %v", overRounds), func(t *testing.T) {
			t.Parallel()
			res, err := Run(t.Context(), Config{Workload: w, Modes: Designs(clienttools.ModeStateless, clienttools.ModeSuspend), Speeds: []float64{0},
				Reps: 1, Precision: 0.001, PrecisionOverRounds: overRounds, MaxTime: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Precision) != 1 {
				t.Fatalf("precision outcomes %+v, want one", res.Precision)
			}
			p := res.Precision[0]
			if p.Reached || len(p.Left) == 0 || p.Rounds < 2 || len(res.Trials) != 2*p.Rounds || p.OverRounds != overRounds {
				t.Errorf("outcome %+v with %d trials: want more rounds than one, not reached, the figures left named, over rounds %v", p, len(res.Trials), overRounds)
			}
			dir := t.TempDir()
			if err := res.WriteFiles(dir); err != nil {
				t.Fatal(err)
			}
			checkSchema(t, filepath.Join(dir, "results.json"))
		})
	}
}

// TestImpreciseOverRounds: over rounds, Imprecise holds the intervals over
// rounds to the target, not those over turns; before MinRounds rounds
// there are none, and every figure is imprecise.
func TestImpreciseOverRounds(t *testing.T) {
	t.Parallel()
	narrow := func(v float64) [2]float64 { return [2]float64{0.99 * v, 1.01 * v} }
	wide := func(v float64) [2]float64 { return [2]float64{0.8 * v, 1.2 * v} }
	sums := []Summary{
		{Mode: "stateless", EndToEndUS: 1000, EndToEndCI: narrow(1000), APIOverheadUS: 100, APIOverheadCI: narrow(100),
			EndToEndRoundsCI: narrow(1000), APIOverheadRoundsCI: wide(100)},
		{Mode: "suspend", EndToEndUS: 900, EndToEndCI: narrow(900), APIOverheadUS: 20, APIOverheadCI: narrow(20),
			EndToEndVsStateless: 1.1, EndToEndVsStatelessCI: narrow(1.1), APIOverheadVsStateless: 5, APIOverheadVsStatelessCI: narrow(5),
			EndToEndRoundsCI: narrow(900), APIOverheadRoundsCI: narrow(20), EndToEndVsStatelessRoundsCI: narrow(1.1), APIOverheadVsStatelessRoundsCI: wide(5)},
	}
	if left := Imprecise(sums, 0.05, false); len(left) != 0 {
		t.Errorf("over turns: %v left, want none", left)
	}
	if left, want := Imprecise(sums, 0.05, true), []string{"stateless API overhead", "suspend API overhead vs stateless"}; !slices.Equal(left, want) {
		t.Errorf("over rounds: %v left, want %v", left, want)
	}
	for i := range sums { // fewer than MinRounds: no interval over rounds
		sums[i].EndToEndRoundsCI, sums[i].APIOverheadRoundsCI, sums[i].EndToEndVsStatelessRoundsCI, sums[i].APIOverheadVsStatelessRoundsCI = [2]float64{}, [2]float64{}, [2]float64{}, [2]float64{}
	}
	if left := Imprecise(sums, 0.05, true); len(left) != 6 {
		t.Errorf("no rounds' intervals: %v left, want all 6 figures", left)
	}
}

// TestRunInterleaved: two configs run round by round in one run, each
// against its own server: every mode of each in every round, and each
// config's cost model its own (only the second one's server makes hops).
func TestRunInterleaved(t *testing.T) {
	t.Parallel()
	w, err := SyntheticWorkload(3, 1, time.Millisecond, 200)
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Workload: w, Modes: Designs(clienttools.ModeStateless, clienttools.ModeSuspend), Speeds: []float64{0}, Reps: 2}
	hops := base
	if _, err := hops.SetKnob("hop-latency", "2ms"); err != nil {
		t.Fatal(err)
	}
	runs, err := RunInterleaved(t.Context(), []Config{base, hops})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if len(r.Trials) != 4 || len(r.Summary) != 2 {
			t.Fatalf("config %d: %d trials, %d summaries; want 4 and 2", i, len(r.Trials), len(r.Summary))
		}
		var hop int64
		for _, tr := range r.Trials {
			for _, tn := range tr.Turns {
				if tn.Server != nil {
					hop += tn.Server.HopMicros
				}
			}
		}
		if (i == 1) != (hop > 0) {
			t.Errorf("config %d: %d µs of hops", i, hop)
		}
	}
	if _, err := RunInterleaved(t.Context(), []Config{base, {Workload: w, Modes: base.Modes, Speeds: []float64{0, 1000}, Reps: 2}}); err == nil {
		t.Error("a config of two speeds interleaved")
	}
}

// TestToolScale: the tool-scale knob multiplies every simulated tool's
// wait, whatever workload made it, and the run records the factor; real
// tools refuse it.
func TestToolScale(t *testing.T) {
	t.Parallel()
	w, err := SyntheticWorkload(2, 1, 20*time.Millisecond, 100)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[float64]float64{}
	for _, scale := range []string{"0.25", "2"} {
		cfg := Config{Workload: w, Modes: Designs(clienttools.ModeSuspend), Speeds: []float64{0}, Reps: 1}
		x, err := cfg.SetKnob("tool-scale", scale)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Config.ToolScale != x {
			t.Errorf("tool-scale %s: recorded %v", scale, res.Config.ToolScale)
		}
		tools[x] = res.Trials[0].ToolsUS
	}
	// Two calls of 20 ms: 10 ms of tools at 0.25, 80 ms at 2 (at least).
	if tools[0.25] < 10e3 || tools[2] < 80e3 || tools[0.25] >= tools[2] {
		t.Errorf("tools time %v at 0.25 and %v at 2, want at least 10 ms and 80 ms", tools[0.25], tools[2])
	}
	real := Config{Workload: Workload{Repo: true}}
	if _, err := real.SetKnob("tool-scale", "2"); err == nil {
		t.Error("real tools scaled")
	}
}

// TestRunAgents runs the multi-agent workload (a root spawning two
// sub-agents of two calls each, the calls answered with a trace's
// recorded outputs) in its four forms: each trial makes every call, its
// model and tool time are its critical path's, which its wall time holds,
// its summary counts it as one turn, and its results follow the schema.
// Designs a tree does not run in are refused.
func TestRunAgents(t *testing.T) {
	traces, err := sampler.LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	w, err := AgentsWorkload(traces[0], 2, 2, ToolsInstant)
	if err != nil {
		t.Fatal(err)
	}
	modes := Designs(clienttools.ModeInject, clienttools.ModeChained, clienttools.ModeBackground, clienttools.ModeStateless)
	res, err := Run(t.Context(), Config{Workload: w, Modes: modes, Speeds: []float64{0}, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range res.Trials {
		if tr.Agents != 2 || tr.Calls != 4 || tr.ModelUS <= 0 || tr.OverheadUS < 0 || tr.ModelUS+tr.ToolsUS > tr.ElapsedUS {
			t.Errorf("%s: %d agents, %d calls; model %.0f µs and tools %.0f µs of %.0f: overhead %.0f", tr.Mode, tr.Agents, tr.Calls, tr.ModelUS, tr.ToolsUS, tr.ElapsedUS, tr.OverheadUS)
		}
	}
	for _, s := range res.Summary {
		if s.TurnsPerTrial != 1 || s.APIOverheadUS < 0 {
			t.Errorf("%s: %v turns a trial, API overhead %.0f µs", s.Mode, s.TurnsPerTrial, s.APIOverheadUS)
		}
	}
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, filepath.Join(dir, "results.json"))
	for _, d := range []Design{{Mode: clienttools.ModeSuspend}, {Mode: clienttools.ModeTurns}, {Mode: clienttools.ModeInject, Durable: true}} {
		if _, err := Run(t.Context(), Config{Workload: w, Modes: []Design{d}, Speeds: []float64{0}, Reps: 1}); err == nil {
			t.Errorf("%s: ran the multi-agent workload", d)
		}
	}
}
