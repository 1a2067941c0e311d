package sampler

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
)

func loadTraces(t *testing.T) map[string]*Trace {
	t.Helper()
	traces, err := LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Trace{}
	for _, tr := range traces {
		out[tr.Name] = tr
	}
	return out
}

// TestEmbeddedTraces checks the embedded traces against the shape:
// one of 12 calls, one of at least 24 and one of at least 40, tool outputs of
// 50 to 8,000 tokens, parallel steps, real tools, and a context reaching
// 60,000 tokens in the longest.
func TestEmbeddedTraces(t *testing.T) {
	traces := loadTraces(t)
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"calc-fix-12": 12, "calc-fix-24": 24, "calc-audit-50": 40}
	tools := map[string]bool{"read_file": true, "grep": true, "list_dir": true, "apply_patch": true, "shell": true}
	maxContext := 0
	for name, min := range want {
		tr := traces[name]
		if tr == nil {
			t.Fatalf("no embedded trace %s", name)
		}
		if n := tr.Calls(); n < min || (min == 12 && n != 12) {
			t.Errorf("%s: %d calls, want %d", name, n, min)
		}
		if tr.Task == "" || tr.Repo != "calc" {
			t.Errorf("%s: task %q, repo %q", name, tr.Task, tr.Repo)
		}
		context, parallel, patched := r.Count(tr.Task), 0, false
		for k, s := range tr.Steps {
			if len(s.Calls) > 1 {
				parallel++
			}
			for _, c := range s.Calls {
				if !tools[c.Name] {
					t.Errorf("%s step %d: tool %s", name, k, c.Name)
				}
				if c.Name == "apply_patch" {
					patched = true
				}
				n := r.Count(c.Output)
				if n < 50 || n > 8000 {
					t.Errorf("%s step %d: %s output of %d tokens", name, k, c.Name, n)
				}
				if c.DurationMS <= 0 {
					t.Errorf("%s step %d: duration %d ms", name, k, c.DurationMS)
				}
				context += r.Count(c.Arguments) + n
			}
			context += r.Count(s.Text)
		}
		if parallel == 0 || !patched {
			t.Errorf("%s: %d parallel steps, patched %v", name, parallel, patched)
		}
		if !strings.Contains(tr.Steps[len(tr.Steps)-1].Text, "512") {
			t.Errorf("%s: final answer does not report the fix", name)
		}
		maxContext = max(maxContext, context)
	}
	if maxContext < 60000 {
		t.Errorf("longest context %d tokens, want at least 60000", maxContext)
	}
}

func TestParseTraceErrors(t *testing.T) {
	for _, src := range []string{
		``,
		`{"trace":""}`,
		`{"trace":"x"}`,
		"{\"trace\":\"x\"}\n{\"text\":\"no calls\"}\n{\"text\":\"end\"}",
		"{\"trace\":\"x\"}\n{\"calls\":[{\"name\":\"shell\",\"arguments\":\"{}\"}]}",
		"{\"trace\":\"x\"}\n{\"calls\":[{\"name\":\"shell\",\"arguments\":\"{bad\"}]}\n{\"text\":\"end\"}",
		"{\"trace\":\"x\"}\n{\"calls\":[{\"name\":\"\",\"arguments\":\"{}\"}]}\n{\"text\":\"end\"}",
		"{\"trace\":\"x\"}\n{\"text\":\"end\",\"unknown\":1}",
		"{\"trace\":\"x\"}\n{\"text\":\"end\",\"reasoning_tokens\":-1}",
	} {
		if _, err := ParseTrace(strings.NewReader(src)); err == nil {
			t.Errorf("ParseTrace(%q) accepted it", src)
		}
	}
	for _, header := range []string{`{"trace":"x","history":[{"type":"nope"}]}`, `{"trace":"x","history":{}}`, `{"trace":"x","think_ms":-1}`} {
		if _, err := ParseTrace(strings.NewReader(header + "\n{\"text\":\"end\"}")); err == nil {
			t.Errorf("ParseTrace accepted the header %s", header)
		}
	}
	tr, err := ParseTrace(strings.NewReader("{\"trace\":\"x\",\"task\":\"t\",\"repo\":\"r\"}\n\n{\"text\":\"hi\",\"calls\":[{\"name\":\"shell\",\"arguments\":\"{}\",\"output\":\"o\",\"duration_ms\":3}],\"reasoning_tokens\":5}\n{\"text\":\"end\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "x" || tr.Task != "t" || tr.Repo != "r" || len(tr.Steps) != 2 || tr.Steps[0].Calls[0].Output != "o" || tr.Steps[0].ReasoningTokens != 5 {
		t.Fatalf("parsed %+v", tr)
	}
}

// collect runs one sample and returns its items as a client would build
// them from the deltas.
func collect(t *testing.T, s *Replay, req *Request) (protocol.Items, Result) {
	t.Helper()
	var items protocol.Items
	var b strings.Builder
	var call *protocol.FunctionCall
	res, err := s.Sample(context.Background(), req, func(d Delta) {
		switch d.Kind {
		case TextStart:
			b.Reset()
			call = nil
		case CallStart:
			b.Reset()
			call = &protocol.FunctionCall{CallID: d.CallID, Name: d.Name}
		case TextDelta, ArgsDelta:
			b.WriteString(d.Text)
		case PartEnd:
			if call != nil {
				call.Arguments = b.String()
				items = append(items, call)
			} else {
				items = append(items, &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: b.String()}}})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return items, res
}

// TestReplayWalksTrace replays every embedded trace with the full history
// each turn: each sample is the next step, then the final answer.
func TestReplayWalksTrace(t *testing.T) {
	for _, tr := range loadTraces(t) {
		s := NewReplay(nil, Timing{}, tr)
		items := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "any task"}}}}
		for k := range tr.Steps {
			got, res := collect(t, s, &Request{Items: items})
			want := tr.StepItems(k, false)
			if len(got) != len(want) {
				t.Fatalf("%s step %d: %d items, want %d", tr.Name, k, len(got), len(want))
			}
			for i := range got {
				if g, w := itemKey(got[i]), itemKey(want[i]); g != w {
					t.Fatalf("%s step %d item %d:\n got %s\nwant %s", tr.Name, k, i, g, w)
				}
			}
			if res.OutputTokens == 0 || res.PromptTokens == 0 {
				t.Fatalf("%s step %d: result %+v", tr.Name, k, res)
			}
			items = append(items, tr.StepItems(k, true)...)
		}
		// Past the end, and with tool_choice none, the final answer.
		final := tr.Steps[len(tr.Steps)-1].Text
		for _, req := range []*Request{{Items: items}, {Items: items[:1], ToolChoice: protocol.ToolChoice{Mode: "none"}}} {
			got, _ := collect(t, s, req)
			if len(got) != 1 || itemKey(got[0]) != "message:"+final {
				t.Fatalf("%s: after the trace: %v", tr.Name, got)
			}
		}
	}
}

// TestReplayHistory: an imported turn's history goes before its task, and
// the calls in it do not count as the turn's steps; the history and the
// think time round-trip through the trace format.
func TestReplayHistory(t *testing.T) {
	tr := &Trace{Name: "later-turn", Task: "Now add a test.", ThinkMS: 4200,
		History: protocol.Items{
			&protocol.Message{Role: protocol.RoleDeveloper, Content: protocol.Contents{&protocol.InputText{Text: "Be brief."}}},
			protocol.UserMessage("Fix the parser."),
			&protocol.FunctionCall{CallID: "call_1", Name: "shell", Arguments: `{"command":"go test"}`},
			&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "FAIL"}},
			&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "Fixed."}}},
		},
		Steps: []TraceStep{{Calls: []TraceCall{{Name: "shell", Arguments: `{"command":"go test"}`, Output: "ok"}}}, {Text: "Added."}}}
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTrace(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if back.ThinkMS != 4200 || len(back.History) != len(tr.History) {
		t.Fatalf("read back %+v", back)
	}
	s := NewReplay(nil, Timing{}, back)
	items := append(slices.Clip(back.History), protocol.UserMessage(back.Task))
	for k := range back.Steps {
		got, _ := collect(t, s, &Request{Items: items})
		if want := back.StepItems(k, false); len(got) != len(want) || itemKey(got[0]) != itemKey(want[0]) {
			t.Fatalf("step %d: %v, want %v", k, got, want)
		}
		items = append(items, back.StepItems(k, true)...)
	}
}

func itemKey(it protocol.Item) string {
	switch it := it.(type) {
	case *protocol.FunctionCall:
		return "call:" + it.CallID + ":" + it.Name + ":" + it.Arguments
	case *protocol.Message:
		return "message:" + it.Content[0].PlainText()
	}
	return "?"
}

// TestReplayPacing: reasoning tokens delay the first visible token like
// output tokens, and MaxOutputTokens cuts the step.
func TestReplayPacing(t *testing.T) {
	tr := &Trace{Name: "p", Steps: []TraceStep{
		{ReasoningTokens: 20, Calls: []TraceCall{{Name: "shell", Arguments: `{"command":"go test ./..."}`}}},
		{Text: "done"},
	}}
	s := NewReplay(nil, Timing{TPS: 1000}, tr)
	items := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "go"}}}}
	start := time.Now()
	got, res := collect(t, s, &Request{Items: items})
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("sample took %v, want at least 20ms of reasoning", d)
	}
	if len(got) != 1 || res.OutputTokens < 5 || res.ReasoningTokens != 20 {
		t.Fatalf("got %v, %+v; want the call and 20 reasoning tokens", got, res)
	}
	_, res = collect(t, NewReplay(nil, Timing{}, tr), &Request{Items: items, MaxOutputTokens: 2})
	if !res.Incomplete || res.OutputTokens != 2 {
		t.Fatalf("limited: %+v", res)
	}
}

// BenchmarkReplayStep measures the replay backend's own work for the first
// step of each trace, unpaced (its deltas go nowhere): looking the prompt up
// in its prefix cache, choosing the step and streaming its tokens, which it
// tokenizes the first time only.
func BenchmarkReplayStep(b *testing.B) {
	traces, err := LoadTraces()
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	items := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "any task"}}}}
	var replays []*Replay
	for _, tr := range traces {
		replays = append(replays, NewReplay(r, Timing{}, tr))
	}
	deltas := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range replays {
			res, err := p.Sample(context.Background(), &Request{Items: items}, func(Delta) {})
			if err != nil {
				b.Fatal(err)
			}
			deltas += res.OutputTokens
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(deltas), "ns/token")
}
