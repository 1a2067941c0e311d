package ablate

import (
	_ "embed"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// SchemaVersion names the layout of results.json; results.schema.json (in
// this package) is its JSON Schema. A change that breaks a reader bumps it.
const SchemaVersion = "tether.ablate/v3"

// Schema is the JSON Schema of results.json.
//
//go:embed results.schema.json
var Schema []byte

// Results is everything one run measured: results.json.
type Results struct {
	Schema  string    `json:"schema"`
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	Config  RunConfig `json:"config"`
	// Interleaved names the interleaved run (sweep values, builds) these
	// results are one config of, "" for a run of its own: the results of
	// one such run ran round by round side by side, and compare sets
	// their rounds against each other round by round.
	Interleaved string  `json:"interleaved,omitempty"`
	Trials      []Trial `json:"trials"`
	// Summary is one row per mode and speed, in the order of the config.
	Summary []Summary `json:"summary"`
	// Precision is, with --precision, what each speed reached.
	Precision []PrecisionOutcome `json:"precision,omitempty"`
}

// PrecisionOutcome is how a speed's rounds ended under --precision: with
// every headline figure within ±Target of it (Reached), or out of time
// with the figures in Left still wider; by the intervals over rounds when
// OverRounds, else by those over turns.
type PrecisionOutcome struct {
	TPS        float64  `json:"tps"`
	Target     float64  `json:"target"`
	OverRounds bool     `json:"over_rounds,omitempty"`
	Rounds     int      `json:"rounds"`
	Reached    bool     `json:"reached"`
	Left       []string `json:"left,omitempty"`
}

// Machine is where the run ran.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"revision,omitempty"` // tether's VCS revision, when built from a checkout
	InProcess bool   `json:"in_process"`         // the server ran in the harness's process
}

// RunConfig is the config as results.json records it.
type RunConfig struct {
	Workload string     `json:"workload"`
	Model    string     `json:"model"`
	Calls    int        `json:"calls"`
	Agents   int        `json:"agents,omitempty"` // a multi-agent workload's sub-agents
	Modes    []string   `json:"modes"`
	Speeds   []float64  `json:"speeds_tps"`
	TTFTUS   float64    `json:"ttft_us"`
	Prefill  float64    `json:"prefill_rate"`
	Reps     int        `json:"reps"`
	URL      string     `json:"url,omitempty"`
	Store    string     `json:"store,omitempty"` // without its password
	Cost     CostConfig `json:"cost"`
	// ToolScale multiplied the simulated tools' time (a sweep's
	// tool-scale); absent: as recorded or given.
	ToolScale float64 `json:"tool_scale,omitempty"`
}

// CostConfig is the server's cost model as results.json records it.
type CostConfig struct {
	Safety        bool    `json:"safety"`
	HopLatencyUS  float64 `json:"hop_latency_us"`
	PostInference string  `json:"post_inference"`
	StoreTokens   bool    `json:"store_tokens"`
}

func configOf(cfg Config) RunConfig {
	rc := RunConfig{Workload: cfg.Workload.Name, Model: cfg.Workload.Model, Calls: cfg.Workload.Calls, Agents: cfg.Workload.Agents,
		Speeds: cfg.Speeds, TTFTUS: us(cfg.TTFT), Prefill: cfg.PrefillRate, Reps: cfg.Reps, URL: cfg.URL, Store: redacted(cfg.Store),
		Cost: CostConfig{Safety: cfg.Cost.Safety, HopLatencyUS: us(cfg.Cost.HopLatency),
			PostInference: cfg.Cost.PostInference.String(), StoreTokens: cfg.StoreTokens}, ToolScale: cfg.ToolScale}
	for _, m := range cfg.Modes {
		rc.Modes = append(rc.Modes, m.String())
	}
	return rc
}

func machine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				m.Revision = s.Value
			}
		}
	}
	return m
}

// ReadResults reads a results.json, of this schema only.
func ReadResults(r io.Reader) (*Results, error) {
	var res Results
	if err := json.NewDecoder(r).Decode(&res); err != nil {
		return nil, fmt.Errorf("ablate: results: %w", err)
	}
	if res.Schema != SchemaVersion {
		return nil, fmt.Errorf("ablate: results of schema %q; this tether reads %s", res.Schema, SchemaVersion)
	}
	res.Summary = inModeOrder(summarize(res.Trials), res.Config.Modes) // with what JSON does not carry: each turn, for the intervals
	return &res, nil
}

// WriteJSON writes results.json.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// turnColumns are the columns of turns.csv.
var turnColumns = []string{"mode", "tps", "rep", "turn", "context_tokens", "cached_tokens", "output_tokens",
	"model_us", "pacer_late_us", "latency_us", "first_event_us", "overhead_us", "floor_us", "floor_idle_us", "warm_floor_us", "render_us", "render_tokens", "sample_us", "tools_us", "client_encode_us", "client_decode_us", "calls",
	"bytes_sent", "bytes_received", "events"}

// WriteTurnsCSV writes turns.csv: one row per turn of every trial.
func (r *Results) WriteTurnsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(turnColumns)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, t := range r.Trials {
		for _, tn := range t.Turns {
			cw.Write([]string{t.Mode, strconv.FormatFloat(t.TPS, 'f', -1, 64), strconv.Itoa(t.Rep), strconv.Itoa(tn.Turn),
				strconv.Itoa(tn.ContextTokens), strconv.Itoa(tn.CachedTokens), strconv.Itoa(tn.OutputTokens),
				f(tn.ModelUS), f(tn.PacerLateUS), f(tn.LatencyUS), f(tn.FirstEventUS), f(tn.OverheadUS), f(tn.FloorUS), f(tn.FloorIdleUS), f(tn.WarmFloorUS), f(tn.RenderUS), strconv.Itoa(tn.RenderTokens), f(tn.SampleUS), f(tn.ToolsUS), f(tn.ClientEncodeUS), f(tn.ClientDecodeUS),
				strconv.Itoa(tn.Calls), strconv.Itoa(tn.BytesSent), strconv.Itoa(tn.BytesReceived), strconv.Itoa(tn.Events)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFiles writes into dir, creating it, results.json, turns.csv, each
// chart as SVG and report.html, which holds them all.
func (r *Results) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts, err := r.Charts()
	if err != nil {
		return err
	}
	files := map[string]func(io.Writer) error{
		"results.json": r.WriteJSON,
		"turns.csv":    r.WriteTurnsCSV,
		"report.html":  func(w io.Writer) error { return r.WriteReport(w, charts) },
	}
	for _, c := range charts {
		files[c.Name] = func(w io.Writer) error { _, err := w.Write(c.SVG); return err }
	}
	for name, write := range files {
		f, err := os.Create(dir + string(os.PathSeparator) + name)
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// redacted is a store URL without its password.
func redacted(store string) string {
	if u, err := url.Parse(store); err == nil && u.User != nil {
		return u.Redacted()
	}
	return store
}
