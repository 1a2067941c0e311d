package sampler

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
)

// sample runs s on req, unpaced unless s says otherwise, and checks that the
// deltas are well formed.
func sample(t *testing.T, s *Scripted, req *Request) ([]Delta, Result) {
	t.Helper()
	var deltas []Delta
	res, err := s.Sample(context.Background(), req, func(d Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	checkDeltas(t, deltas, res)
	return deltas, res
}

// checkDeltas asserts the part grammar: (Start token* PartEnd)*, and that the
// tokens are counted.
func checkDeltas(t *testing.T, deltas []Delta, res Result) {
	t.Helper()
	open, tokens := DeltaKind(255), 0
	for i, d := range deltas {
		switch d.Kind {
		case TextStart, CallStart:
			if open != 255 {
				t.Fatalf("delta %d: %v inside an open %v", i, d.Kind, open)
			}
			if d.Kind == CallStart && (d.CallID == "" || d.Name == "") {
				t.Fatalf("delta %d: CallStart without CallID or Name: %+v", i, d)
			}
			open = d.Kind
		case TextDelta, ArgsDelta:
			if open+1 != d.Kind {
				t.Fatalf("delta %d: %v in %v", i, d.Kind, open)
			}
			if d.Text == "" {
				t.Fatalf("delta %d: empty token", i)
			}
			tokens++
		case PartEnd:
			if open == 255 {
				t.Fatalf("delta %d: PartEnd with no open part", i)
			}
			open = 255
		default:
			t.Fatalf("delta %d: unknown kind %v", i, d.Kind)
		}
	}
	if open != 255 {
		t.Fatalf("part %v left open", open)
	}
	if tokens != res.OutputTokens {
		t.Fatalf("%d token deltas, OutputTokens %d", tokens, res.OutputTokens)
	}
}

// output assembles the deltas into the items a runtime would append.
func output(deltas []Delta) protocol.Items {
	var items protocol.Items
	var b strings.Builder
	for _, d := range deltas {
		switch d.Kind {
		case TextStart, CallStart:
			b.Reset()
		case TextDelta, ArgsDelta:
			b.WriteString(d.Text)
		case PartEnd:
			if d.CallID != "" {
				items = append(items, &protocol.FunctionCall{CallID: d.CallID, Name: d.Name, Namespace: d.Namespace, Arguments: b.String()})
			} else {
				items = append(items, &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: b.String()}}})
			}
		}
	}
	return items
}

func calls(items protocol.Items) []*protocol.FunctionCall {
	var out []*protocol.FunctionCall
	for _, it := range items {
		if c, ok := it.(*protocol.FunctionCall); ok {
			out = append(out, c)
		}
	}
	return out
}

func text(items protocol.Items) string {
	for _, it := range items {
		if m, ok := it.(*protocol.Message); ok {
			return m.Content.Text()
		}
	}
	return ""
}

func fnTool(name, params string) protocol.Tool {
	return protocol.Tool{Type: protocol.ToolFunction, Name: name, Parameters: json.RawMessage(params)}
}

// TestStepProgression plays conversations turn by turn: the client answers
// every call with "out-NAME", and may add a user message after a turn.
func TestStepProgression(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		first     string
		choice    protocol.ToolChoice
		after     map[int]string // turn -> user message sent with that turn's outputs
		wantSteps [][]string
		wantArgs  map[string]string
		wantText  string
	}{
		{
			name:      "three steps",
			first:     "Do it.\ncall: a {\"n\": 1}\ncall: b {} | c {\"q\":\"x|y\"}\ncall: d",
			wantSteps: [][]string{{"a"}, {"b", "c"}, {"d"}},
			wantArgs:  map[string]string{"a": `{"n": 1}`, "b": "{}", "c": `{"q":"x|y"}`, "d": "{}"},
			wantText:  "d returned: out-d",
		},
		{
			name:      "steering does not reset",
			first:     "call: a\ncall: b\ncall: c",
			after:     map[int]string{0: "also check the tests", 1: "hurry"},
			wantSteps: [][]string{{"a"}, {"b"}, {"c"}},
			wantText:  "c returned: out-c",
		},
		{
			name:      "new script replaces the old",
			first:     "call: a\ncall: b",
			after:     map[int]string{0: "change of plan\ncall: x | y"},
			wantSteps: [][]string{{"a"}, {"x", "y"}},
			wantText:  "x returned: out-x; y returned: out-y",
		},
		{
			name:      "tool_choice none",
			first:     "hi\ncall: a",
			choice:    protocol.ToolChoice{Mode: "none"},
			wantSteps: nil,
			wantText:  `You said: "hi"`,
		},
		{
			name:      "directives beat a forced function",
			first:     "call: a",
			choice:    protocol.ToolChoice{Mode: "required", Function: "lookup"},
			wantSteps: [][]string{{"a"}},
			wantText:  "a returned: out-a",
		},
	}
	s := NewScripted(renderer(t), Timing{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := &Request{
				Model:      ScriptedModel,
				Items:      protocol.Items{userMsg(tt.first)},
				Tools:      []protocol.Tool{fnTool("lookup", `{"type":"object"}`)},
				ToolChoice: tt.choice,
			}
			var steps [][]string
			ids := map[string]bool{}
			for turn := 0; ; turn++ {
				if turn > 10 {
					t.Fatal("no text answer after 10 turns")
				}
				deltas, _ := sample(t, s, req)
				out := output(deltas)
				req.Items = append(req.Items, out...)
				cs := calls(out)
				if len(cs) == 0 {
					if got := text(out); got != tt.wantText {
						t.Errorf("answer %q, want %q", got, tt.wantText)
					}
					break
				}
				var names []string
				for _, c := range cs {
					names = append(names, c.Name)
					if ids[c.CallID] {
						t.Errorf("call id %s reused", c.CallID)
					}
					ids[c.CallID] = true
					if want, ok := tt.wantArgs[c.Name]; ok && c.Arguments != want {
						t.Errorf("%s arguments %q, want %q", c.Name, c.Arguments, want)
					}
				}
				steps = append(steps, names)
				if msg, ok := tt.after[turn]; ok {
					req.Items = append(req.Items, userMsg(msg))
				}
				for _, c := range cs {
					req.Items = append(req.Items, &protocol.FunctionCallOutput{CallID: c.CallID, Output: protocol.ToolOutput{Text: "out-" + c.Name}})
				}
			}
			if !reflect.DeepEqual(steps, tt.wantSteps) {
				t.Errorf("steps %v, want %v", steps, tt.wantSteps)
			}
		})
	}
}

func TestPolicyCalls(t *testing.T) {
	t.Parallel()
	search := protocol.Tool{Type: protocol.ToolWebSearch, Raw: json.RawMessage(`{"type":"web_search"}`)}
	a := fnTool("a", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	b := fnTool("b", `{"type":"object","properties":{"query":{"type":"string"}}}`)
	agents := protocol.Tool{Type: protocol.ToolNamespace, Name: "agents", Tools: []protocol.Tool{b}}
	user := protocol.Items{userMsg("Find the docs about pacing")}
	answered := protocol.Items{
		userMsg("Find the docs about pacing"),
		&protocol.FunctionCall{CallID: "call_1", Name: "a", Arguments: `{"path":"README.md"}`},
		&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "# tether"}},
	}
	tests := []struct {
		name     string
		items    protocol.Items
		tools    []protocol.Tool
		choice   protocol.ToolChoice
		wantCall string // "" for a text answer, "NS.NAME" for a namespace's member
		wantArgs string
	}{
		{"forced custom", user, []protocol.Tool{a, {Type: protocol.ToolCustom, Name: "c"}}, protocol.ToolChoice{Mode: "required", Custom: "c"}, "c", "Find the docs about pacing"},
		{"forced web search", user, []protocol.Tool{a, search}, protocol.ToolChoice{Mode: "required", Builtin: protocol.ToolWebSearchPreview}, "web_search", `{"query":"Find the docs about pacing"}`},
		{"forced shell", user, []protocol.Tool{a, {Type: protocol.ToolShell}}, protocol.ToolChoice{Mode: "required", Builtin: protocol.ToolShell}, "shell", `{"commands":["Find the docs about pacing"]}`},
		{"custom tool when no function", user, []protocol.Tool{search, {Type: protocol.ToolCustom, Name: "c"}}, protocol.ToolChoice{}, "c", "Find the docs about pacing"},
		{"shell when no function", user, []protocol.Tool{{Type: protocol.ToolShell}}, protocol.ToolChoice{}, "shell", `{"commands":["Find the docs about pacing"]}`},
		{"forced built-in not offered", user, []protocol.Tool{a}, protocol.ToolChoice{Mode: "required", Builtin: protocol.ToolApplyPatch}, "a", `{"path":"README.md"}`},
		{"namespace member when no plain function", user, []protocol.Tool{search, agents}, protocol.ToolChoice{}, "agents.b", `{"query":"Find the docs about pacing"}`},
		{"plain function before namespaces", user, []protocol.Tool{agents, a}, protocol.ToolChoice{}, "a", `{"path":"README.md"}`},
		{"directive into a namespace", protocol.Items{userMsg("call: agents.b {\"query\":\"x\"}")}, []protocol.Tool{a, agents}, protocol.ToolChoice{}, "agents.b", `{"query":"x"}`},
		{"first function tool", user, []protocol.Tool{search, a, b}, protocol.ToolChoice{}, "a", `{"path":"README.md"}`},
		{"required", user, []protocol.Tool{a, b}, protocol.ToolChoice{Mode: "required"}, "a", `{"path":"README.md"}`},
		{"forced", user, []protocol.Tool{a, b}, protocol.ToolChoice{Mode: "required", Function: "b"}, "b", `{"query":"Find the docs about pacing"}`},
		{"forced but not offered", user, []protocol.Tool{a}, protocol.ToolChoice{Mode: "required", Function: "zed"}, "zed", "{}"},
		{"allowed tools", user, []protocol.Tool{a, b}, protocol.ToolChoice{Mode: "auto", Allowed: []protocol.ToolRef{{Type: "function", Name: "b"}}}, "b", `{"query":"Find the docs about pacing"}`},
		{"none", user, []protocol.Tool{a, b}, protocol.ToolChoice{Mode: "none"}, "", ""},
		{"hosted tools only", user, []protocol.Tool{search}, protocol.ToolChoice{}, "", ""},
		{"required with web search only", user, []protocol.Tool{search}, protocol.ToolChoice{Mode: "required"}, "web_search", `{"query":"Find the docs about pacing"}`},
		{"required, web search not allowed", user, []protocol.Tool{search}, protocol.ToolChoice{Mode: "required", Allowed: []protocol.ToolRef{{Type: "function", Name: "a"}}}, "", ""},
		{"no tools", user, nil, protocol.ToolChoice{}, "", ""},
		{"after the output", answered, []protocol.Tool{a, b}, protocol.ToolChoice{}, "", ""},
		{"forced after the output", answered, []protocol.Tool{a, b}, protocol.ToolChoice{Mode: "required", Function: "a"}, "", ""},
	}
	s := NewScripted(renderer(t), Timing{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deltas, _ := sample(t, s, &Request{Items: tt.items, Tools: tt.tools, ToolChoice: tt.choice})
			cs := calls(output(deltas))
			switch {
			case tt.wantCall == "" && len(cs) > 0:
				t.Fatalf("called %s, want a text answer", cs[0].Name)
			case tt.wantCall == "":
			case len(cs) != 1:
				t.Fatalf("%d calls, want one call of %s", len(cs), tt.wantCall)
			case qualified(cs[0].Namespace, cs[0].Name) != tt.wantCall || cs[0].Arguments != tt.wantArgs:
				t.Fatalf("called %s(%s), want %s(%s)", qualified(cs[0].Namespace, cs[0].Name), cs[0].Arguments, tt.wantCall, tt.wantArgs)
			}
		})
	}
}

// program is a program item, as a history from a server that runs them
// holds it.
func program(callID string) *protocol.Program {
	return &protocol.Program{ID: "prog_" + callID, CallID: callID, Code: "return 1;", Fingerprint: "fp"}
}

func TestTextAnswers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghij ", 100)
	call := func(id, name string) *protocol.FunctionCall {
		return &protocol.FunctionCall{CallID: id, Name: name, Arguments: "{}"}
	}
	out := func(id, text string) *protocol.FunctionCallOutput {
		return &protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: text}}
	}
	tests := []struct {
		name  string
		items protocol.Items
		want  string
	}{
		{"empty", nil, greeting},
		{"user", protocol.Items{userMsg("  Hello,\n  world  ")}, `You said: "Hello, world"`},
		{"long user", protocol.Items{userMsg(long)}, `You said: "` + strings.TrimSpace(long[:200]) + `…"`},
		{"newest user", protocol.Items{userMsg("first"), userMsg("second"),
			&protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: "ok"}}}}, `You said: "second"`},
		{"tool output", protocol.Items{userMsg("weather?"), call("c1", "get_weather"), out("c1", `{"temp": 21,
			"sky": "clear"}`)}, `get_weather returned: {"temp": 21, "sky": "clear"}`},
		{"parallel outputs", protocol.Items{userMsg("go"), call("c1", "a"), call("c2", "b"), out("c2", "two"), out("c1", "one")},
			"b returned: two; a returned: one"},
		{"long output", protocol.Items{call("c1", "read_file"), out("c1", long)}, "read_file returned: " + strings.TrimSpace(long[:200]) + "…"},
		{"empty output", protocol.Items{call("c1", "touch"), out("c1", "")}, "touch returned nothing"},
		{"unknown call", protocol.Items{out("zz", "x")}, "the tool returned: x"},
		{"output parts", protocol.Items{call("c1", "shot"), &protocol.FunctionCallOutput{CallID: "c1", Output: protocol.ToolOutput{
			Parts: protocol.Contents{&protocol.InputText{Text: "see "}, &protocol.InputImage{}}}}}, "shot returned: see [image]"},
		{"program output", protocol.Items{userMsg("coat?"), program("p1"), &protocol.ProgramOutput{ID: "po_1", CallID: "p1", Result: "take a\n  coat", Status: protocol.StatusCompleted}},
			"program returned: take a coat"},
		{"empty program output", protocol.Items{program("p1"), &protocol.ProgramOutput{ID: "po_1", CallID: "p1", Status: protocol.StatusIncomplete}},
			"program returned nothing"},
		// The calls a program made are answered before the program ends:
		// its output is the newest result, theirs before it.
		{"a program's calls and its output", protocol.Items{userMsg("coat?"), program("p1"),
			&protocol.FunctionCall{CallID: "c1", Name: "get_weather", Arguments: "{}", Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "p1"}},
			&protocol.FunctionCallOutput{CallID: "c1", Output: protocol.ToolOutput{Text: "rain"}, Caller: &protocol.Caller{Type: protocol.CallerProgram, CallerID: "p1"}},
			&protocol.ProgramOutput{ID: "po_1", CallID: "p1", Result: "coat", Status: protocol.StatusCompleted}},
			"get_weather returned: rain; program returned: coat"},
		{"a program without its output", protocol.Items{userMsg("coat?"), program("p1")}, `You said: "coat?"`},
	}
	r := renderer(t)
	s := NewScripted(r, Timing{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deltas, res := sample(t, s, &Request{Items: tt.items})
			var b strings.Builder
			for _, d := range deltas {
				if d.Kind == TextDelta {
					b.WriteString(d.Text)
				}
			}
			if b.String() != tt.want {
				t.Errorf("deltas concatenate to %q, want %q", b.String(), tt.want)
			}
			if want := r.Count(tt.want); res.OutputTokens != want || res.Incomplete {
				t.Errorf("Result %+v, want %d tokens, complete", res, want)
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	r1 := renderer(t)
	r2, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	tools := []protocol.Tool{
		fnTool("get_weather", `{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer"},"extras":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}}}}}`),
	}
	reqs := map[string]*Request{
		"policy call": {Items: protocol.Items{userMsg("weather in Oslo")}, Tools: tools},
		"directive":   {Items: protocol.Items{userMsg("call: a {\"x\":1} | b")}, Tools: tools},
		"text":        {Items: protocol.Items{userMsg("hello")}},
	}
	for name, req := range reqs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first, _ := sample(t, NewScripted(r1, Timing{}), req)
			for range 5 {
				again, _ := sample(t, NewScripted(r2, Timing{}), req)
				if !reflect.DeepEqual(first, again) {
					t.Fatalf("same request, different deltas:\n%+v\n%+v", first, again)
				}
			}
		})
	}
}

func TestMaxOutputTokens(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	s := NewScripted(r, Timing{})
	argsA := `{"text":"the quick brown fox jumps over the lazy dog"}`
	nA, nB := r.Count(argsA), r.Count("{}")
	parallel := protocol.Items{userMsg("call: a " + argsA + " | b")}
	const answer = "You said: \"a fairly long message to quote back to the user\""
	textItems := protocol.Items{userMsg("a fairly long message to quote back to the user")}
	nText := r.Count(answer)
	tests := []struct {
		name      string
		items     protocol.Items
		limit     int
		wantParts int
	}{
		{"one token", parallel, 1, 1},
		{"inside the first call", parallel, nA - 1, 1},
		{"end of the first call", parallel, nA, 1},
		{"into the second call", parallel, nA + 1, 2},
		{"exactly all", parallel, nA + nB, 2},
		{"more than all", parallel, nA + nB + 10, 2},
		{"no limit", parallel, 0, 2},
		{"text cut", textItems, 3, 1},
		{"text whole", textItems, nText, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			deltas, res := sample(t, s, &Request{Items: tt.items, MaxOutputTokens: tt.limit})
			total := nA + nB
			if tt.items[0] == textItems[0] {
				total = nText
			}
			want := Result{OutputTokens: total}
			if tt.limit > 0 && tt.limit < total {
				want = Result{OutputTokens: tt.limit, Incomplete: true}
			}
			if res.OutputTokens != want.OutputTokens || res.Incomplete != want.Incomplete {
				t.Errorf("Result %+v, want %+v", res, want)
			}
			if parts := len(output(deltas)); parts != tt.wantParts {
				t.Errorf("%d parts, want %d", parts, tt.wantParts)
			}
		})
	}
}

// longRequest scripts a call whose arguments are well over 100 tokens.
func longRequest(limit int) *Request {
	args := `{"text":"` + strings.Repeat("lorem ipsum dolor sit amet ", 40) + `"}`
	return &Request{Items: protocol.Items{userMsg("call: write " + args)}, MaxOutputTokens: limit}
}

func TestCancelUnpaced(t *testing.T) {
	t.Parallel()
	s := NewScripted(renderer(t), Timing{})
	t.Run("before start", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		_, err := s.Sample(ctx, longRequest(0), func(Delta) { n++ })
		if !errors.Is(err, context.Canceled) || n != 0 {
			t.Fatalf("err %v after %d deltas, want context.Canceled and none", err, n)
		}
	})
	t.Run("mid stream", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var after int
		res, err := s.Sample(ctx, longRequest(0), func(d Delta) {
			if ctx.Err() != nil {
				after++
			}
			if d.Kind == ArgsDelta && d.Text != "" && strings.Contains(d.Text, "ipsum") {
				cancel()
			}
		})
		if !errors.Is(err, context.Canceled) || after != 0 || res.OutputTokens == 0 {
			t.Fatalf("err %v, %d deltas after cancel, result %+v", err, after, res)
		}
	})
	t.Run("long TTFT real time", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := NewScripted(renderer(t), Timing{TTFT: time.Hour, TPS: 1}).Sample(ctx, longRequest(0), func(Delta) {})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
	})
}

func TestDeltaKindString(t *testing.T) {
	t.Parallel()
	for k, want := range map[DeltaKind]string{TextStart: "TextStart", ArgsDelta: "ArgsDelta", PartEnd: "PartEnd", 9: "DeltaKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}

// TestMultiPartDirectives: a user message in several content parts, as a
// client sends one with attachments (text and an image), is read part by
// part, each its own lines: a directive in a later part is one, and one in
// the first part keeps its arguments when another part follows.
func TestMultiPartDirectives(t *testing.T) {
	t.Parallel()
	call := &protocol.InputText{Text: `call: read_file {"path":"a.go"}`}
	file := &protocol.InputText{Text: "<content>\npackage main\n</content>"}
	for _, tc := range []struct {
		name  string
		parts protocol.Contents
	}{
		{"in a later part", protocol.Contents{file, &protocol.InputImage{ImageURL: new("data:image/png;base64,AA==")}, call}},
		{"in the first part, another after it", protocol.Contents{call, file}},
	} {
		parts := plan(&Request{Items: protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: tc.parts}}}, nil)
		if len(parts) != 1 || !parts[0].call || parts[0].name != "read_file" || parts[0].text != `{"path":"a.go"}` {
			t.Errorf("%s: planned %+v, want read_file {\"path\":\"a.go\"}", tc.name, parts)
		}
	}
}
