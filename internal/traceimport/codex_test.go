package traceimport

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// TestCodexEveryType reads a hand-made rollout holding every line type and
// every item type of the format: the turns that end in an answer become
// traces, with their calls (function and custom), outputs, durations and
// reasoning tokens; everything else is counted by type.
func TestCodexEveryType(t *testing.T) {
	traces, rep := importFile(t, "testdata/every-type.jsonl", "fix")
	if len(traces) != 2 || traces[0].Name != "fix-1" || traces[1].Name != "fix-3" {
		t.Fatalf("traces %v, want fix-1 and fix-3", names(traces))
	}
	tr := traces[0]
	if tr.Task != "Fix the parser so that 2^3^2 is 512." || !strings.HasPrefix(tr.Source, "codex rollout 019c8a4c") || tr.Repo != "" {
		t.Errorf("header %q %q %q", tr.Task, tr.Source, tr.Repo)
	}
	if len(tr.Steps) != 3 {
		t.Fatalf("%d steps, want 3: %+v", len(tr.Steps), tr.Steps)
	}
	s0, s1, s2 := tr.Steps[0], tr.Steps[1], tr.Steps[2]
	if s0.Text != "I'll read the parser and run the tests." || len(s0.Calls) != 2 || s0.ReasoningTokens != 193 || s0.ModelMS != 12818 {
		t.Errorf("step 0: %+v", s0)
	}
	if c := s0.Calls[0]; c.Name != "exec_command" || c.Type != "" || c.Arguments != `{"cmd":"cat parser.go","workdir":"/work/calc"}` ||
		!strings.HasSuffix(c.Output, "package calc\n") || c.DurationMS != 220 {
		t.Errorf("call 0: %+v", c)
	}
	if c := s0.Calls[1]; c.Output != "--- FAIL: TestPow\n" || c.DurationMS != 2000 {
		t.Errorf("call 1 (an output of content items, its image skipped): %+v", c)
	}
	if c := s1.Calls; len(c) != 1 || c[0].Type != sampler.CustomCall || c[0].Name != "apply_patch" || !strings.HasPrefix(c[0].Arguments, "*** Begin Patch\n") ||
		c[0].DurationMS != 1263 || s1.ReasoningTokens != 57 {
		t.Errorf("step 1: %+v", s1)
	}
	if len(s2.Calls) != 0 || !strings.HasPrefix(s2.Text, "Fixed:") || s2.ReasoningTokens != 10 {
		t.Errorf("step 2: %+v", s2)
	}
	if got := traces[1]; len(got.Steps) != 1 || got.Steps[0].Text != "You're welcome." || got.Task != "Thanks, that's all." || got.ThinkMS != 69000 {
		t.Errorf("turn 3: %+v", got)
	}
	// Each turn's history is the session before it: the instructions and
	// context Codex gave the model, then the earlier turns (turn 2's call
	// left out: it was never answered).
	for i, want := range []string{
		"developer user",
		"developer user user assistant function_call function_call function_call_output function_call_output custom_tool_call custom_tool_call_output assistant user",
	} {
		var got []string
		for _, it := range traces[i].History {
			if m, ok := it.(*protocol.Message); ok {
				got = append(got, string(m.Role))
			} else {
				got = append(got, string(it.ItemType()))
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s's history: %s\nwant %s", traces[i].Name, strings.Join(got, " "), want)
		}
	}
	want := map[string]int{
		"compacted": 1, "output/input_image": 1,
		"response_item/web_search_call": 1, "response_item/local_shell_call": 1, "response_item/ghost_snapshot": 1,
		"response_item/image_generation_call": 1, "response_item/tool_search_call": 1, "response_item/tool_search_output": 1,
		"response_item/compaction": 1,
	}
	if !maps.Equal(rep.Skipped, want) {
		t.Errorf("skipped %v\nwant    %v", rep.Skipped, want)
	}
	if rep.Turns != 3 || len(rep.Dropped) != 1 || rep.Dropped[0] != "turn 2: ended with 1 calls unanswered" {
		t.Errorf("turns %d, dropped %q", rep.Turns, rep.Dropped)
	}
	// Each trace is one Replay can serve.
	for _, tr := range traces {
		if _, err := tr.Encode(); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
	}
}

// TestCodexBadInput: a line of garbage, a file cut inside its last line, a
// rollout of the format before 2025-09 and a file that is not a rollout
// each fail with an error naming the line.
func TestCodexBadInput(t *testing.T) {
	good, err := os.ReadFile("testdata/every-type.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	for _, c := range []struct{ name, in, want string }{
		{"garbage", strings.Join(lines[:5], "") + "not json at all\n" + strings.Join(lines[5:], ""), "line 6: not JSON"},
		{"truncated", strings.Join(lines[:9], "") + lines[9][:40], "line 10: truncated"},
		{"legacy", `{"id":"5973b6c0-94b8-487b-a530-2aeb6098ae0e","timestamp":"2025-08-20T10:00:00.000Z","instructions":null}` + "\n" + `{"record_type":"state"}` + "\n", "line 1: a Codex rollout of the format before 2025-09"},
		{"another file", `{"trace":"calc-fix-12","task":"x","repo":"calc"}` + "\n", `line 1: not a line of a Codex rollout`},
		{"no session_meta", lines[1], "line 1: a rollout begins with session_meta"},
		{"bad timestamp", strings.Replace(lines[0], "2026-02-23T11:40:29.275Z", "yesterday", 1), `line 1: timestamp "yesterday"`},
		{"empty", "", "no session_meta line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			traces, _, err := Codex(strings.NewReader(c.in), "x")
			if err == nil || !strings.Contains(err.Error(), c.want) || traces != nil {
				t.Errorf("got %v (%d traces), want an error with %q", err, len(traces), c.want)
			}
		})
	}
}

// TestRedact: a redacted trace says nothing of the original's texts or
// tool names, keeps their sizes, timings and structure, and still parses.
func TestRedact(t *testing.T) {
	traces, _ := importFile(t, "testdata/every-type.jsonl", "fix")
	orig := *traces[0]
	orig.Steps = slices.Clone(orig.Steps)
	for i := range orig.Steps {
		orig.Steps[i].Calls = slices.Clone(orig.Steps[i].Calls)
	}
	tr := traces[0]
	Redact(tr)
	if _, err := tr.Encode(); err != nil {
		t.Fatal(err)
	}
	data, _ := tr.Encode()
	for _, secret := range []string{"parser", "2^3^2", "exec_command", "apply_patch", "TestPow", "Begin Patch", "/work/calc"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the redacted trace still says %q", secret)
		}
	}
	if len(tr.Task) != len(orig.Task) {
		t.Errorf("task %d bytes, was %d", len(tr.Task), len(orig.Task))
	}
	for i, st := range tr.Steps {
		o := orig.Steps[i]
		if len(st.Text) != len(o.Text) || st.ReasoningTokens != o.ReasoningTokens || st.ModelMS != o.ModelMS || len(st.Calls) != len(o.Calls) {
			t.Errorf("step %d: %+v, was %+v", i, st, o)
		}
		for j, c := range st.Calls {
			oc := o.Calls[j]
			if len(c.Output) != len(oc.Output) || c.DurationMS != oc.DurationMS || c.Type != oc.Type || strings.Count(c.Output, "\n") != strings.Count(oc.Output, "\n") {
				t.Errorf("call %d.%d: %+v, was %+v", i, j, c, oc)
			}
		}
	}
	// The same call named twice is named the same: a replay's tools match
	// calls by name.
	if tr.Steps[0].Calls[0].Name != tr.Steps[0].Calls[1].Name {
		t.Errorf("one tool, two names: %q %q", tr.Steps[0].Calls[0].Name, tr.Steps[0].Calls[1].Name)
	}
}

// importFile imports the rollout file at path as name.
func importFile(t *testing.T, path, name string) ([]*sampler.Trace, *Report) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	traces, rep, err := Codex(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return traces, rep
}

func names(ts []*sampler.Trace) []string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return n
}

// TestCodexNewer reads the shape Codex 0.169 writes (a real session's,
// abridged): the turn begins at task_started, the user's message comes as
// a completed UserMessage item rather than a user_message event (one sent
// mid-turn is counted, and the turn goes on), and lines of types this
// importer does not know are counted, not fatal.
func TestCodexNewer(t *testing.T) {
	traces, rep := importFile(t, "testdata/codex-0.169.jsonl", "ls")
	if len(traces) != 1 || traces[0].Name != "ls" || traces[0].Task != "List the files." || len(traces[0].Steps) != 2 {
		t.Fatalf("traces %+v", traces)
	}
	if c := traces[0].Steps[0].Calls; len(c) != 1 || c[0].Arguments != `{"cmd":"ls"}` || c[0].DurationMS != 337 {
		t.Errorf("calls %+v", c)
	}
	if want := map[string]int{"unknown/world_state": 1, "unknown/token_usage_record": 1, "user message (mid-turn)": 1}; !maps.Equal(rep.Skipped, want) {
		t.Errorf("skipped %v, want %v", rep.Skipped, want)
	}
}
