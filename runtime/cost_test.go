package runtime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost"
)

// probeRollout is a three-call rollout of the scripted model whose task
// carries one flagged phrase, answered by a tool whose output carries
// another.
func probeRollout(mode clienttools.Mode) clienttools.Rollout {
	task := "Audit the ransomware report, one probe a line.\ncall: probe {\"n\":0}\ncall: probe {\"n\":1}\ncall: probe {\"n\":2}\n"
	probe := clienttools.Func{
		Name: "probe", Description: "Probe the service.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Run: func(context.Context, string) (string, error) {
			return "the log mentions a keylogger and nothing else", nil
		},
	}
	return clienttools.Rollout{Mode: mode, Funcs: []clienttools.Func{probe}, Request: &protocol.CreateRequest{
		Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage(task)}, Include: []string{protocol.IncludeTimings}}}
}

// TestCostModelByDesign: the safety classifier reads what each design
// brings: the whole history every turn over stateless HTTP, new input only
// from the store or the connection cache, and nothing after the create in a
// suspended rollout; and the metrics count each design's own path.
func TestCostModelByDesign(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Hooks: costModel(t, cost.Options{Safety: true})})
	c := &clienttools.Client{BaseURL: h.base}
	flags := map[clienttools.Mode][]int{}
	read := map[clienttools.Mode][]int{}
	for _, mode := range clienttools.Modes {
		res, err := c.Run(t.Context(), probeRollout(mode))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(res.Turns) != 4 {
			t.Fatalf("%s: %d turns, want 4", mode, len(res.Turns))
		}
		for _, tn := range res.Turns {
			flags[mode] = append(flags[mode], tn.Server.SafetyFlags)
			read[mode] = append(read[mode], tn.Server.SafetyBytes)
			if tn.Encode <= 0 || tn.Decode <= 0 {
				t.Errorf("%s: client JSON time encode %v, decode %v", mode, tn.Encode, tn.Decode)
			}
			// Frames written by then depend on the writer: not checked.
			if tn.Server.EncodeMicros < 0 || tn.Server.SampleMicros < tn.Server.FirstTokenMicros || tn.Server.RenderedTokens == 0 {
				t.Errorf("%s: server timings %+v", mode, tn.Server)
			}
		}
	}
	// The task's phrase, then each turn's tool output (and, over stateless
	// HTTP, everything before it again).
	want := map[clienttools.Mode][]int{
		clienttools.ModeStateless:  {1, 2, 3, 4},
		clienttools.ModeChained:    {1, 1, 1, 1},
		clienttools.ModeBackground: {1, 1, 1, 1},
		clienttools.ModeTurns:      {1, 1, 1, 1},
		clienttools.ModeSuspend:    {1, 0, 0, 0},
		clienttools.ModeInject:     {1, 0, 0, 0},
	}
	for mode, w := range want {
		if !slices.Equal(flags[mode], w) {
			t.Errorf("%s: safety flags per turn %v, want %v (bytes read %v)", mode, flags[mode], w, read[mode])
		}
	}
	if s := read[clienttools.ModeStateless]; !(s[3] > s[2] && s[2] > s[1] && s[1] > s[0]) {
		t.Errorf("stateless: the classifier read %v bytes per turn; want the growing history", s)
	}
	if s := read[clienttools.ModeTurns]; s[3] > 2*s[1] {
		t.Errorf("turns: the classifier read %v bytes per turn; want new input only", s)
	}

	reg := h.metrics.Registry()
	for _, p := range []struct {
		labels string // transport design state status
		want   float64
	}{
		// Chained's and background's first turns have no parent: they go
		// the stateless way.
		{"http stateless none completed", 4 + 1 + 1},
		{"http chained store completed", 3 + 3},
		{"ws turns none completed", 1},
		{"ws turns cache completed", 3},
		{"ws suspend none completed", 2}, // suspend's, inject's
	} {
		f := strings.Fields(p.labels)
		labels := map[string]string{"transport": f[0], "design": f[1], "state": f[2], "status": f[3]}
		if got := counter(t, reg, "tether_responses_total", labels); got != p.want {
			t.Errorf("tether_responses_total{%s} = %v, want %v", p.labels, got, p.want)
		}
	}
	if got := counter(t, reg, "tether_pauses_total", nil); got != 6 {
		t.Errorf("tether_pauses_total = %v, want 6 (suspend's 3, inject's 3)", got)
	}

	res, err := http.Get(h.base[:len(h.base)-len("/v1")] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`tether_phase_seconds_bucket{design="suspend",phase="render",state="none",transport="ws"`,
		`tether_frame_seconds_count{stage="write"}`, `tether_step_seconds_count{phase="first_token"}`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// costModel is the cost model opts choose, as a server's hooks.
func costModel(t testing.TB, opts cost.Options) *cost.Model {
	t.Helper()
	m, err := cost.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// counter is the value of the counter name whose labels include labels,
// gathered from reg; 0 when it has not been counted.
func counter(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestHopLatencyByDesign: on a fake clock where only the simulated service
// calls take time, each design's rollout takes exactly the hops it makes.
// Per request over HTTP: route, safety, billing. On a WebSocket the route
// is resolved once per connection and billing overlaps what follows; a
// suspended rollout makes its pre-inference calls once.
func TestHopLatencyByDesign(t *testing.T) {
	t.Parallel()
	const hop = 10 * time.Millisecond
	want := map[clienttools.Mode]time.Duration{
		clienttools.ModeStateless:  4 * 3 * hop,
		clienttools.ModeChained:    4 * 3 * hop,
		clienttools.ModeBackground: 4 * 3 * hop,
		clienttools.ModeTurns:      2*hop + 3*hop, // route and safety, then safety per turn
		clienttools.ModeSuspend:    2 * hop,
	}
	for mode, w := range want {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p := newPipeHarness(t, runtime.Options{Hooks: costModel(t, cost.Options{Safety: true, HopLatency: hop})})
				c := &clienttools.Client{BaseURL: "http://tether.test/v1", HTTPClient: p.client}
				res, err := c.Run(t.Context(), probeRollout(mode))
				if err != nil {
					t.Fatal(err)
				}
				var hops time.Duration
				for _, tn := range res.Turns {
					hops += time.Duration(tn.Server.HopMicros) * time.Microsecond
				}
				if res.Elapsed != w {
					t.Errorf("rollout took %v, want %v (server hops %v)", res.Elapsed, w, hops)
				}
				if hops != w {
					t.Errorf("the server's hop_us sum to %v, want %v", hops, w)
				}
			})
		})
	}
}

// TestStoreTokens: a chained HTTP turn renders its whole chain again from
// the store, unless the store keeps each response's tokens.
func TestStoreTokens(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		h := newHarness(t, runtime.Options{Renderer: renderer(t), StoreTokens: keep})
		c := &clienttools.Client{BaseURL: h.base}
		res, err := c.Run(t.Context(), probeRollout(clienttools.ModeChained))
		if err != nil {
			t.Fatal(err)
		}
		var rendered []int
		for _, tn := range res.Turns {
			rendered = append(rendered, tn.Server.RenderedTokens)
		}
		last, first := rendered[len(rendered)-1], rendered[1]
		if keep && last > first+20 || !keep && last < first+100 {
			t.Errorf("store tokens %v: tokens rendered per turn %v", keep, rendered)
		}
	}
}
