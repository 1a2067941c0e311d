package runtime_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime"
)

// paramSyntax is every error's param: a top-level name, then members
// after a dot and array elements by their index in brackets, as OpenAI
// writes them (input[0].content[1].type), never an index after a dot
// (context_management.0.compact_threshold).
var paramSyntax = regexp.MustCompile(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*|\[[0-9]+\])*$`)

// TestErrorParamPaths sends bad requests whose errors name a field inside
// an array, found by each kind of check (the JSON decoder's type errors,
// the validators' value errors, a member named twice), and walks the
// params they get: each has the one syntax, and names the field's full
// path, the same whichever check refused it. (A type error once read
// context_management.0.compact_threshold where a value error read
// context_management[0].compact_threshold, and one in a tool read name,
// not tools[0].name.)
func TestErrorParamPaths(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	create := func(fields string) string { return `{"model":"tether-scripted","input":"hi",` + fields + `}` }
	fn := func(name string) string {
		return `{"type":"function","name":` + name + `,"parameters":{"type":"object"}}`
	}
	cases := []struct {
		name, path, body string
		want             string // the param
	}{
		{"compact_threshold of the wrong type", "/responses",
			create(`"context_management":[{"type":"compaction","compact_threshold":"many"}]`), "context_management[0].compact_threshold"},
		{"compact_threshold too low", "/responses",
			create(`"context_management":[{"type":"compaction","compact_threshold":1}]`), "context_management[0].compact_threshold"},
		{"context_management type unknown", "/responses",
			create(`"context_management":[{"type":"compaction","compact_threshold":1000},{"type":"forget","compact_threshold":1000}]`), "context_management[1].type"},
		{"include element of the wrong type", "/responses", create(`"include":[7]`), "include[0]"},
		{"tool name of the wrong type", "/responses", create(`"tools":[` + fn(`"ok"`) + `,` + fn(`7`) + `]`), "tools[1].name"},
		{"tool name not valid", "/responses", create(`"tools":[` + fn(`"ok"`) + `,` + fn(`"not ok"`) + `]`), "tools[1].name"},
		{"namespace member's name of the wrong type", "/responses",
			create(`"tools":[{"type":"namespace","name":"ns","tools":[` + fn(`"a"`) + `,` + fn(`[]`) + `]}]`), "tools[0].tools[1].name"},
		{"namespace member's name not valid", "/responses",
			create(`"tools":[{"type":"namespace","name":"ns","tools":[` + fn(`"a"`) + `,` + fn(`"b c"`) + `]}]`), "tools[0].tools[1].name"},
		{"tool not an object", "/responses", create(`"tools":[7]`), "tools[0]"},
		{"mcp filter's name of the wrong type", "/responses",
			create(`"tools":[{"type":"mcp","server_label":"a","server_url":"http://127.0.0.1:1","allowed_tools":{"tool_names":[7]}}]`), "tools[0].allowed_tools.tool_names[0]"},
		{"allowed tool's type of the wrong type", "/responses",
			create(`"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":7}]}`), "tool_choice.tools[0].type"},
		{"content part's type unknown", "/responses",
			`{"model":"tether-scripted","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_hologram"}]}]}`, "input[0].content[1].type"},
		{"content part's member twice", "/responses",
			`{"model":"tether-scripted","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a","text":"b"}]}]}`, "input[0].content[0].text"},
		{"item not an object", "/responses", `{"model":"tether-scripted","input":["hi"]}`, "input[0]"},
		{"strict function parameters", "/responses",
			create(`"tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}]`), "tools[0].parameters"},
		{"metadata value of the wrong type", "/responses", create(`"metadata":{"k":7}`), "metadata.k"},
		{"conversation item's type unknown", "/conversations", `{"items":[{"type":"message","role":"user","content":"a"},{"type":"nope"}]}`, "items[1].type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(http.MethodPost, h.base+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			code, raw := biDo(t, req)
			var body struct {
				Error *struct {
					Param *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &body); err != nil || code/100 != 4 || body.Error == nil || body.Error.Param == nil {
				t.Fatalf("%d %s: want a 4xx error with a param", code, raw)
			}
			param := *body.Error.Param
			if !paramSyntax.MatchString(param) {
				t.Errorf("param %q is not a path as OpenAI writes them: %s", param, raw)
			}
			if param != tc.want {
				t.Errorf("param %q, want %q: %s", param, tc.want, raw)
			}
		})
	}
}
