package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// windowTrace is the replay model's rollout in TestCallIDsMemoryWindow:
// a call, then two in parallel, then the answer, as the scripted model's
// script there does.
var windowTrace = &sampler.Trace{Name: "window", Task: "Look around.", Steps: []sampler.TraceStep{
	{Calls: []sampler.TraceCall{{Name: "read_file", Arguments: `{"path":"a.go"}`}}},
	{Calls: []sampler.TraceCall{{Name: "grep", Arguments: `{"pattern":"x","path":"."}`}, {Name: "list_dir", Arguments: `{"path":"."}`}}},
	{Text: "Done."},
}}

// memoryWindow is the length of the context a windowed client sends every
// turn after the first: its conversation's newest items, then the turn's
// message. A turn leaves eight items (its message, three calls and their
// outputs, the answer); the window holds the previous turn's last step,
// two calls and their outputs, and its answer.
const memoryWindow = 6

// TestCallIDsMemoryWindow: a client with a memory window (Mastra's
// lastMessages) sends each turn only its conversation's newest items, and
// so asks the model every turn for calls at the same places of a context
// of the same length, the previous turn's calls in it. Over the four
// designs (a suspended response a turn; WebSocket turns and chained HTTP
// requests, a chain a turn; stateless HTTP, every item each request), for
// both local models, every call id the client sees is its own: across
// turns, designs and models, as a real server's are (the runs are
// unrelated conversations of one script); every call is run once and its
// output goes back under its id; and the answer reads the outputs of the
// turn's own calls.
func TestCallIDsMemoryWindow(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	h := newHarness(t, runtime.Options{Renderer: r, Models: map[string]runtime.Sampler{
		sampler.ScriptedModel:                   sampler.NewScripted(r, sampler.Timing{}),
		sampler.ReplayPrefix + windowTrace.Name: sampler.NewReplay(r, sampler.Timing{}, windowTrace),
	}})
	const turns = 4
	models := []string{sampler.ScriptedModel, sampler.ReplayPrefix + windowTrace.Name}
	modes := []clienttools.Mode{clienttools.ModeSuspend, clienttools.ModeTurns, clienttools.ModeChained, clienttools.ModeStateless}
	var mu sync.Mutex
	seen := map[string]string{} // call id -> the run and turn that saw it; guarded by mu
	t.Run("designs", func(t *testing.T) {
		for _, model := range models {
			for _, mode := range modes {
				t.Run(model+"/"+mode.String(), func(t *testing.T) {
					t.Parallel()
					c := &clienttools.Client{BaseURL: h.base}
					var history protocol.Items
					for turn := 1; turn <= turns; turn++ {
						input := append(window(history), protocol.UserMessage(windowTask(turn)))
						if turn > 1 && len(input) != memoryWindow {
							t.Fatalf("turn %d: a context of %d items, want %d", turn, len(input), memoryWindow)
						}
						res, err := c.Run(t.Context(), clienttools.Rollout{Mode: mode, Funcs: windowFuncs(turn),
							Request: &protocol.CreateRequest{Model: model, Input: input}})
						if err != nil {
							t.Fatalf("turn %d: %v", turn, err)
						}
						mu.Lock()
						for _, it := range res.Output {
							if fc, ok := it.(*protocol.FunctionCall); ok {
								where := fmt.Sprintf("%s turn %d", mode, turn)
								if before, dup := seen[fc.CallID]; dup || fc.CallID == "" {
									t.Errorf("%s: call %s %s has the id %q, as a call of %s did", where, fc.Name, fc.Arguments, fc.CallID, before)
								}
								seen[fc.CallID] = model + " " + where
							}
						}
						mu.Unlock()
						history = append(append(history, input[len(input)-1]), checkWindowTurn(t, model, turn, res)...)
					}
				})
			}
		}
	})
	if want := len(models) * len(modes) * turns * 3; len(seen) != want && !t.Failed() {
		t.Errorf("%d call ids over the runs, want %d", len(seen), want)
	}
}

// windowTask is the user's message of turn n: the scripted model's script
// (the replay model replays its trace whatever the task).
func windowTask(n int) string {
	return fmt.Sprintf("Turn %d: look around.\ncall: read_file {\"path\":\"t%d.go\"}\ncall: grep {\"pattern\":\"x%d\",\"path\":\".\"} | list_dir {\"path\":\"d%d\"}", n, n, n, n)
}

// windowOutput is what the client's tool name gives for args in turn n.
func windowOutput(name, args string, n int) string {
	return fmt.Sprintf("%s %s in turn %d", name, args, n)
}

// windowFuncs are the client's tools for turn n.
func windowFuncs(n int) []clienttools.Func {
	var fs []clienttools.Func
	for _, name := range []string{"read_file", "grep", "list_dir"} {
		fs = append(fs, clienttools.Func{Name: name, Parameters: []byte(`{"type":"object"}`),
			Run: func(_ context.Context, args string) (string, error) { return windowOutput(name, args, n), nil }})
	}
	return fs
}

// window is what a windowed client sends of history before a turn's
// message: its memoryWindow-1 newest items, less the tool outputs they
// start with (an output whose call is not in the input is refused).
func window(history protocol.Items) protocol.Items {
	w := history[max(0, len(history)-(memoryWindow-1)):]
	for len(w) > 0 && w[0].ItemType() == protocol.ItemFunctionCallOutput {
		w = w[1:]
	}
	return slices.Clone(w)
}

// checkWindowTurn checks turn n of a run of model in
// TestCallIDsMemoryWindow and returns the items the turn adds to the
// client's history: each step's calls, then their outputs, then the
// answer, as the client's memory keeps them (without the server's item
// ids).
func checkWindowTurn(t *testing.T, model string, n int, res *clienttools.Result) protocol.Items {
	t.Helper()
	if res.Response.Status != protocol.ResponseCompleted {
		t.Fatalf("turn %d ended %s", n, res.Response.Status)
	}
	ran := map[string]clienttools.Call{}
	for _, c := range res.Calls {
		if _, twice := ran[c.CallID]; twice {
			t.Errorf("turn %d: call %s ran twice", n, c.CallID)
		}
		ran[c.CallID] = c
	}
	var items, outputs protocol.Items // outputs: the step's, which follow its calls
	var calls []string
	step := -1 // the kit's turn (a request and its answer) whose calls the outputs are
	for _, it := range res.Output {
		switch it := it.(type) {
		case *protocol.FunctionCall:
			c, ok := ran[it.CallID]
			if !ok || c.Name != it.Name || c.Arguments != it.Arguments || c.Output != windowOutput(it.Name, it.Arguments, n) {
				t.Errorf("turn %d: call %s %s %s ran as %+v", n, it.CallID, it.Name, it.Arguments, c)
			}
			if c.Turn != step {
				items, outputs, step = append(items, outputs...), nil, c.Turn
			}
			calls = append(calls, it.Name)
			items = append(items, &protocol.FunctionCall{CallID: it.CallID, Name: it.Name, Arguments: it.Arguments})
			outputs = append(outputs, &protocol.FunctionCallOutput{CallID: it.CallID, Output: protocol.ToolOutput{Text: c.Output}})
		case *protocol.Message:
			text := (&clienttools.Result{Output: protocol.Items{it}}).Text()
			items = append(append(items, outputs...), &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Contents{&protocol.OutputText{Text: text}}})
			outputs = nil
		default:
			t.Errorf("turn %d: an output item of type %s", n, it.ItemType())
		}
	}
	items = append(items, outputs...)
	if want := []string{"read_file", "grep", "list_dir"}; !slices.Equal(calls, want) || len(res.Calls) != len(want) {
		t.Errorf("turn %d: calls %q (%d run), want %q", n, calls, len(res.Calls), want)
	}
	// The scripted model quotes the outputs of the step before its answer:
	// the ones the client paired with this turn's grep and list_dir.
	want := windowTrace.Steps[2].Text
	if model == sampler.ScriptedModel {
		want = fmt.Sprintf("grep returned: %s; list_dir returned: %s",
			windowOutput("grep", fmt.Sprintf(`{"pattern":"x%d","path":"."}`, n), n), windowOutput("list_dir", fmt.Sprintf(`{"path":"d%d"}`, n), n))
	}
	if res.Text() != want {
		t.Errorf("turn %d: answer %q, want %q", n, res.Text(), want)
	}
	return items
}
