package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/ablate"
)

// TestAblateEngine runs "tether ablate --engine" small: labelled
// simulated, a row for each design and policy, the chart and the JSON.
func TestAblateEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"ablate", "--engine", "llama3-8b-a100", "--workload", "trace:calc-fix-12",
		"--engine-clients", "1,2", "--engine-seeds", "2", "--engine-duration", "2m", "--out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "SIMULATED: the engine model llama3-8b-a100") || !strings.Contains(out, "calc-fix-12") {
		t.Errorf("not labelled simulated:\n%s", out)
	}
	table, _, _ := strings.Cut(out, "\n\nstateless, chained, turns: ") // the conclusions follow it
	for _, policy := range []string{"discard", "pin 10s", "swap"} {
		if n := strings.Count(table, " "+policy+" "); n != 4 { // 2 designs, 2 loads
			t.Errorf("%d rows of %q, want 4:\n%s", n, policy, out)
		}
		if n := strings.Count(table, " "+policy+", by rollout "); n != 4 {
			t.Errorf("%d rows of %q by rollout, want 4:\n%s", n, policy, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "engine.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res ablate.EngineRun
	if err := json.Unmarshal(b, &res); err != nil || !res.Simulated || len(res.Cells) != 24 || res.Sources["DecodeBase"] == "" {
		t.Errorf("engine.json: %v, simulated %v, %d cells", err, res.Simulated, len(res.Cells))
	}
	if st, err := os.Stat(filepath.Join(dir, "engine-jct.svg")); err != nil || st.Size() == 0 {
		t.Errorf("engine-jct.svg: %v", err)
	}
	if len(res.Conclusions) != 4 || !strings.Contains(out, "\n"+res.Conclusions[0]+"\n") || !strings.HasPrefix(res.Conclusions[2], "suspend: ") {
		t.Errorf("conclusions %q, not printed:\n%s", res.Conclusions, out)
	}
}

// TestAblateLoadEngine runs "tether ablate --load N --load-engine" small:
// each design and policy live, two rollouts each on a served engine, the
// simulator's same cell beside; with a cache that never fills, the live
// prompts' prefill is the simulated one's.
func TestAblateLoadEngine(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code, stdout, stderr := tetherIn(t, t.TempDir(), "ablate", "--load", "2", "--load-engine", "llama3-8b-a100", "--load-engine-speed", "50",
		"--workload", "trace:calc-fix-12", "--load-server", tetherBinary(t), "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "LIVE against SIMULATED: 2 rollouts of calc-fix-12") {
		t.Errorf("not labelled:\n%s", stdout)
	}
	var run ablate.EngineLiveRun
	b, err := os.ReadFile(filepath.Join(out, "engine-live.json"))
	if err != nil || json.Unmarshal(b, &run) != nil || len(run.Cells) != 8 {
		t.Fatalf("engine-live.json: %v\n%s", err, b)
	}
	for _, c := range run.Cells {
		l, s := c.Live, c.Simulated
		if l.Rollouts != 2 || l.Errors != 0 || s.Rollouts != 2 || l.JCT <= 0 || s.JCT <= 0 {
			t.Errorf("%s, %s: live %+v, simulated %+v", c.Design, c.Policy, l, s)
		}
		if gap := l.PrefilledPerRollout/s.PrefilledPerRollout - 1; gap < -0.05 || gap > 0.05 {
			t.Errorf("%s, %s: prefilled %.0f tokens a rollout live, %.0f simulated", c.Design, c.Policy, l.PrefilledPerRollout, s.PrefilledPerRollout)
		}
	}
}

func TestAblateEngineBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--engine", "no-such-profile"},
		{"--engine", "llama3-8b-a100", "--engine-clients", "0"},
		{"--engine", "llama3-8b-a100", "--engine-seeds", "0"},
		{"--engine", "llama3-8b-a100", "--workload", "synthetic"},
	} {
		var stdout, stderr strings.Builder
		if code := run(context.Background(), append([]string{"ablate"}, args...), &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}
