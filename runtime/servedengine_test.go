package runtime_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
	"github.com/tether-run/tether/sampler/enginemodel"
)

// TestServedEngineLabelled: a model paced by a simulated inference engine
// says so in /v1/models and in every response's timings, with what the
// engine did with its steps.
func TestServedEngineLabelled(t *testing.T) {
	model, err := sampler.NewEngineModel(sampler.EngineModelOptions{Profile: enginemodel.Llama3_8B_A100(), Speed: 100})
	if err != nil {
		t.Fatal(err)
	}
	engine := sampler.NewEngine()
	engine.SetModel(model)
	scripted := sampler.NewScripted(renderer(t), sampler.Timing{})
	scripted.SetEngine(engine)
	plain := sampler.NewScripted(renderer(t), sampler.Timing{})
	h := newHarness(t, runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": scripted, "plain": plain}})

	status, body := h.get(t, "/models")
	var list protocol.List[protocol.Model]
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("/v1/models: %d %s", status, body)
	}
	for _, m := range list.Data {
		want := ""
		if m.ID == "tether-scripted" {
			want = "simulated engine llama3-8b-a100, discard, time ×100"
		}
		if m.SimulatedEngine != want {
			t.Errorf("%s: simulated_engine %q, want %q", m.ID, m.SimulatedEngine, want)
		}
	}

	for _, name := range []string{"tether-scripted", "plain"} {
		status, body = h.post(t, "/responses", map[string]any{"model": name, "input": "Say hello.", "include": []string{protocol.IncludeTimings}})
		var resp protocol.Response
		if err := json.Unmarshal(body, &resp); status != http.StatusOK || err != nil || resp.Timings == nil {
			t.Fatalf("%s: %d %s", name, status, body)
		}
		e := resp.Timings.Engine
		if name == "plain" {
			if e != nil {
				t.Errorf("plain: engine timings %+v", e)
			}
			continue
		}
		if e == nil || !strings.HasPrefix(e.Simulated, "simulated engine llama3-8b-a100") || e.PrefilledTokens == 0 ||
			e.PrefilledTokens+e.HitTokens != resp.Usage.InputTokens || e.FirstTokenMicros <= 0 {
			t.Errorf("engine timings %+v for %d input tokens", e, resp.Usage.InputTokens)
		}
	}
}
