package sampler

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

var directiveTests = []struct {
	name string
	text string
	want [][]directiveCall
}{
	{"prose only", "What's the weather in Paris?", nil},
	{"single", `call: get_weather {"location":"Paris"}`,
		[][]directiveCall{{{"", "get_weather", `{"location":"Paris"}`, ""}}}},
	{"parallel", `call: a {"x":1} | b {"y":"p|q"} |c`,
		[][]directiveCall{{{"", "a", `{"x":1}`, ""}, {"", "b", `{"y":"p|q"}`, ""}, {"", "c", "{}", ""}}}},
	{"invalid json", `call: a {"x":`, [][]directiveCall{{{"", "a", "{}", ""}}}},
	{"missing args", "call: a", [][]directiveCall{{{"", "a", "{}", ""}}}},
	{"array args", "call: a [1,2]", [][]directiveCall{{{"", "a", "{}", ""}}}},
	{"trailing garbage", "call: a {} then more", [][]directiveCall{{{"", "a", "{}", ""}}}},
	{"args kept as written", `call: a {  "k" : [1, 2] }`, [][]directiveCall{{{"", "a", `{  "k" : [1, 2] }`, ""}}}},
	{"no space", `call:a{"x":1}`, [][]directiveCall{{{"", "a", `{"x":1}`, ""}}}},
	{"braces and quotes in strings", `call: a {"s":"he said \"|\" {"} | b`,
		[][]directiveCall{{{"", "a", `{"s":"he said \"|\" {"}`, ""}, {"", "b", "{}", ""}}}},
	{"steps with prose", "Please:\ncall: a {}\n  CALL: b {\"k\":true}\nthanks\r\ncall: c {}\r\n",
		[][]directiveCall{{{"", "a", "{}", ""}}, {{"", "b", `{"k":true}`, ""}}, {{"", "c", "{}", ""}}}},
	{"no name", `call:  | {"x":1}`, nil},
	{"empty directive", "call:", nil},
	{"not at line start", "please call: a {}", nil},
	{"namespaced", `call: multi_agent_v1.wait_agent {"ids":["a"]} | f`,
		[][]directiveCall{{{"multi_agent_v1", "wait_agent", `{"ids":["a"]}`, ""}, {"", "f", "{}", ""}}}},
	{"namespace without a name", "call: ns. {}", nil},
}

func TestParseDirectives(t *testing.T) {
	t.Parallel()
	for _, tt := range directiveTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseDirectives(tt.text, false)
			for _, step := range got {
				for i := range step {
					step[i].Input = "" // TestCustomInput checks it
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseDirectives(%q) =\n%q\nwant\n%q", tt.text, got, tt.want)
			}
		})
	}
}

// TestCustomInput: a custom tool's input is the JSON string after its
// name, decoded (line breaks and '|' included), or the text as written.
func TestCustomInput(t *testing.T) {
	for text, want := range map[string]string{
		`call: apply_patch "*** Begin Patch\n*** Add File: a|b\n*** End Patch"`: "*** Begin Patch\n*** Add File: a|b\n*** End Patch",
		`call: code.exec print(1)`:      "print(1)",
		`call: raw {"not":"json args"}`: `{"not":"json args"}`,
		`call: empty`:                   "",
	} {
		steps := parseDirectives(text, true)
		if len(steps) != 1 || len(steps[0]) != 1 || steps[0][0].Input != want {
			t.Errorf("%s: %+v, want input %q", text, steps, want)
		}
	}
}

func FuzzDirectives(f *testing.F) {
	for _, tt := range directiveTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		steps := parseDirectives(text, true)
		if !reflect.DeepEqual(steps, parseDirectives(text, true)) {
			t.Fatalf("parseDirectives(%q) is not deterministic", text)
		}
		lines := 0
		for line := range strings.Lines(text) {
			if isDirectiveLine(line) {
				lines++
			}
		}
		if len(steps) > lines {
			t.Fatalf("%d steps from %d directive lines in %q", len(steps), lines, text)
		}
		for _, step := range steps {
			if len(step) == 0 {
				t.Fatalf("empty step in %q", text)
			}
			for _, c := range step {
				if c.Name == "" || strings.ContainsFunc(c.Name, unicode.IsSpace) || strings.Contains(c.Name, "{") {
					t.Fatalf("bad name %q from %q", c.Name, text)
				}
				var obj map[string]any
				if err := json.Unmarshal([]byte(c.Args), &obj); err != nil || obj == nil {
					t.Fatalf("args %q from %q are not a JSON object: %v", c.Args, text, err)
				}
				if c.Args != "{}" && !strings.Contains(text, c.Args) {
					t.Fatalf("args %q are not as written in %q", c.Args, text)
				}
			}
		}
	})
}

// TestAgentDirectives: in a multi-agent response's step, spawn, wait,
// send and followup lines are steps of multi-agent calls, their arguments
// as spawn_agent, wait_agent, send_message and followup_task take them;
// other lines are
// not, and outside one none of them is.
func TestAgentDirectives(t *testing.T) {
	t.Parallel()
	text := "Split the work.\n" +
		`spawn: tests {"message": "Count the tests.\ncall: list_dir {}", "fork_turns": "none"} | docs{"message":"Read the docs."}` + "\n" +
		"WAIT: tests, docs\n" +
		`send: tests "and the benchmarks"` + "\n" +
		"Followup: docs Again.\n" +
		"spawner: not a directive\n"
	if steps := parseDirectives(text, false); len(steps) != 0 {
		t.Errorf("outside a multi-agent response: %+v, want no steps", steps)
	}
	steps := parseDirectives(text, true)
	want := [][]directiveCall{
		{{Namespace: multiAgentNS, Name: "spawn_agent", Args: `{"fork_turns":"none","message":"Count the tests.\ncall: list_dir {}","task_name":"tests"}`},
			{Namespace: multiAgentNS, Name: "spawn_agent", Args: `{"message":"Read the docs.","task_name":"docs"}`}},
		{{Namespace: multiAgentNS, Name: "wait_agent", Args: `{"targets":["tests","docs"]}`}},
		{{Namespace: multiAgentNS, Name: "send_message", Args: `{"message":"and the benchmarks","target":"tests"}`}},
		{{Namespace: multiAgentNS, Name: "followup_task", Args: `{"message":"Again.","target":"docs"}`}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps %+v\nwant %+v", steps, want)
	}
}
