package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tether-run/tether/protocol"
)

// The built-in client tools of the Responses API, answered with the same
// confinement to Dir as the function tools: the model's shell_call and
// local_shell_call commands run with sh in Dir (Tools.ShellTimeout each),
// its apply_patch_call operations and a freeform apply_patch's patch edit
// files under Dir only.

// Builtins are the local tools as the API's built-in client tools: shell
// (local environment), local_shell and apply_patch. Offer them instead of
// the shell and apply_patch functions of Funcs to a model that calls
// shell_call and apply_patch_call items.
func (t *Tools) Builtins() []Func {
	return []Func{
		{Name: string(protocol.ToolShell), Type: protocol.ToolShell, Run: t.shellCall},
		{Name: string(protocol.ToolLocalShell), Type: protocol.ToolLocalShell, Run: t.localShellCall},
		{Name: string(protocol.ToolApplyPatch), Type: protocol.ToolApplyPatch, Run: t.applyPatchCall},
	}
}

// FreeformPatch is apply_patch as a custom tool, as Codex offers it: the
// model's input is the patch itself, in the Codex format. It takes the
// place of the apply_patch function (their names would clash).
func (t *Tools) FreeformPatch() Func {
	return Func{Name: "apply_patch", Type: protocol.ToolCustom,
		Description: "Edit files: the input is a patch in the Codex format (*** Begin Patch … *** End Patch).",
		Run:         func(_ context.Context, input string) (string, error) { return t.applyPatch(input) }}
}

// shellCall runs a shell_call's commands one after another.
func (t *Tools) shellCall(ctx context.Context, payload string) (string, error) {
	var action struct {
		Commands []string `json:"commands"`
	}
	if err := json.Unmarshal([]byte(payload), &action); err != nil || len(action.Commands) == 0 {
		return "", fmt.Errorf("shell_call: the action has no commands: %s", payload)
	}
	var b strings.Builder
	for _, cmd := range action.Commands {
		out, err := t.shell(ctx, cmd)
		if err != nil {
			return b.String(), err
		}
		b.WriteString(out)
	}
	return b.String(), nil
}

// localShellCall runs a local_shell_call's exec action: its argv, quoted
// for sh.
func (t *Tools) localShellCall(ctx context.Context, payload string) (string, error) {
	var action struct {
		Type    string   `json:"type"`
		Command []string `json:"command"`
	}
	if err := json.Unmarshal([]byte(payload), &action); err != nil || action.Type != "exec" || len(action.Command) == 0 {
		return "", fmt.Errorf("local_shell_call: want an exec action with a command: %s", payload)
	}
	quoted := make([]string, len(action.Command))
	for i, a := range action.Command {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return t.shell(ctx, strings.Join(quoted, " "))
}

// applyPatchCall applies an apply_patch_call's operation: the file's path
// and, to create or update it, its diff (the file's lines as + lines, or
// @@ hunks of the Codex format).
func (t *Tools) applyPatchCall(_ context.Context, payload string) (string, error) {
	var op struct {
		Type, Path, Diff string
	}
	if err := json.Unmarshal([]byte(payload), &op); err != nil || op.Path == "" {
		return "", fmt.Errorf("apply_patch_call: want an operation with a path: %s", payload)
	}
	diff := strings.TrimRight(op.Diff, "\n")
	var patch string
	switch op.Type {
	case "create_file":
		patch = "*** Add File: " + op.Path + "\n" + diff
	case "update_file":
		if !strings.HasPrefix(diff, "@@") {
			diff = "@@\n" + diff
		}
		patch = "*** Update File: " + op.Path + "\n" + diff
	case "delete_file":
		patch = "*** Delete File: " + op.Path
	default:
		return "", fmt.Errorf("apply_patch_call: unknown operation %q", op.Type)
	}
	return t.applyPatch("*** Begin Patch\n" + patch + "\n*** End Patch\n")
}
