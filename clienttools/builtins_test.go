package clienttools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// TestBuiltinTools: in every design, the client kit answers the model's
// typed calls (shell_call, apply_patch_call) and a freeform apply_patch
// custom tool with the local tools, confined to their directory, and
// sends back the outputs of the matching types.
func TestBuiltinTools(t *testing.T) {
	t.Parallel()
	base := server(t, runtime.Options{})
	freeform, _ := json.Marshal("*** Begin Patch\n*** Add File: b.txt\n+bee\n*** End Patch")
	script := "Edit.\n" +
		`call: apply_patch {"type":"create_file","path":"a.txt","diff":"+ay\n"}` + "\n" +
		`call: shell {"commands":["cat a.txt"]}` + "\n" +
		"call: patch " + string(freeform) + "\n" +
		`call: apply_patch {"type":"create_file","path":"../escape.txt","diff":"+no\n"}`
	for _, mode := range clienttools.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tools := &clienttools.Tools{Dir: dir}
			patch := tools.FreeformPatch()
			patch.Name = "patch"
			c := &clienttools.Client{BaseURL: base}
			res, err := c.Run(context.Background(), clienttools.Rollout{Mode: mode,
				Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput(script)},
				Funcs:   append(tools.Builtins(), patch)})
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, call := range res.Calls {
				types = append(types, string(call.Type))
			}
			if want := []string{"apply_patch_call", "shell_call", "custom_tool_call", "apply_patch_call"}; !slices.Equal(types, want) {
				t.Fatalf("calls %v, want %v", types, want)
			}
			for file, want := range map[string]string{"a.txt": "ay\n", "b.txt": "bee\n"} {
				if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v", file, b, err)
				}
			}
			if !strings.Contains(res.Calls[1].Output, "ay") {
				t.Errorf("shell output %q", res.Calls[1].Output)
			}
			if res.Calls[3].Err == nil {
				t.Errorf("a patch outside the directory applied: %q", res.Calls[3].Output)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.txt")); err == nil {
				t.Error("escape.txt was written outside the directory")
			}
		})
	}
}
