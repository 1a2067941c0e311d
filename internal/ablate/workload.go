package ablate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Tool modes of a trace workload: what runs a recorded call.
const (
	ToolsReal    = "real"    // the local tools, for real, on a fresh copy of the fixture repository
	ToolsReplay  = "replay"  // the recorded output after the recorded duration (a simulated tool)
	ToolsInstant = "instant" // the recorded output at once
)

// Workload is the rollout every trial runs: a model, a task and the client
// tools that answer the model's calls.
type Workload struct {
	Name  string
	Model string
	Task  string
	// History is the conversation sent before the task (an imported
	// turn's session before it); nil for none.
	History protocol.Items
	// Tools builds one trial's tools. dir is a fresh copy of the fixture
	// repository when Repo is set, "" otherwise.
	Tools func(dir string) []clienttools.Func
	Repo  bool
	// Calls is how many client calls the rollout makes.
	Calls int
	// Agents is how many sub-agents the rollout's root spawns (a
	// multi-agent response, AgentsWorkload's); 0 for none.
	Agents int
}

// TraceWorkload replays a recorded coding-agent rollout (model replay:NAME);
// tools is ToolsReal, ToolsReplay or ToolsInstant.
func TraceWorkload(tr *sampler.Trace, tools string) (Workload, error) {
	w := Workload{Name: "trace:" + tr.Name + " tools:" + tools, Model: sampler.ReplayPrefix + tr.Name, Task: tr.Task, History: tr.History}
	for _, s := range tr.Steps {
		w.Calls += len(s.Calls)
	}
	switch tools {
	case ToolsReal:
		if tr.Repo == "" {
			return Workload{}, fmt.Errorf("trace %s was imported: it has no repository to run its tools on; replay them (tools %s or %s)", tr.Name, ToolsReplay, ToolsInstant)
		}
		w.Repo = true
		w.Tools = func(dir string) []clienttools.Func { return (&clienttools.Tools{Dir: dir}).Funcs() }
	case ToolsReplay, ToolsInstant:
		speed := 0.0 // at once
		if tools == ToolsReplay {
			speed = 1
		}
		w.Tools = func(string) []clienttools.Func { return recorded(tr, speed) }
	default:
		return Workload{}, fmt.Errorf("tools %q: want %s, %s or %s", tools, ToolsReal, ToolsReplay, ToolsInstant)
	}
	return w, nil
}

// recorded is the local tools' definitions (so that the prompt is the one
// the real tools make; for an imported trace, one of each name the trace
// calls, see importedTools) answering each call with the trace's recorded
// output for the same name and arguments, in order, after its recorded
// duration divided by speed (0: at once). The wait is a simulated tool,
// not work.
func recorded(tr *sampler.Trace, speed float64) []clienttools.Func {
	var mu sync.Mutex
	queue := map[string][]sampler.TraceCall{}
	for _, s := range tr.Steps {
		for _, c := range s.Calls {
			queue[c.Name+"\x00"+c.Arguments] = append(queue[c.Name+"\x00"+c.Arguments], c)
		}
	}
	funcs := (&clienttools.Tools{}).Funcs()
	if tr.Repo == "" {
		funcs = importedTools(tr)
	}
	for i := range funcs {
		name := funcs[i].Name
		funcs[i].Run = func(ctx context.Context, args string) (string, error) {
			mu.Lock()
			q := queue[name+"\x00"+args]
			if len(q) == 0 {
				mu.Unlock()
				return "", fmt.Errorf("the trace recorded no more %s calls with these arguments", name)
			}
			c := q[0]
			queue[name+"\x00"+args] = q[1:]
			mu.Unlock()
			if speed > 0 {
				if err := sleep(ctx, time.Duration(float64(c.DurationMS)*float64(time.Millisecond)/speed)); err != nil {
					return "", err
				}
			}
			return c.Output, nil
		}
	}
	return funcs
}

// importedTools declares the tools an imported trace calls, by the names
// it calls them: a function taking any object, or a custom tool where the
// session's was. The recorded session's own definitions are not in its
// rollout file, so the prompt is not the session's: its size is the
// session's tool outputs and messages, not its tool schemas.
func importedTools(tr *sampler.Trace) []clienttools.Func {
	var funcs []clienttools.Func
	for _, name := range tr.Tools() {
		f := clienttools.Func{Name: name, Description: "A tool of the recorded session."}
		if tr.Custom(name) {
			f.Type = protocol.ToolCustom
		} else {
			f.Parameters = json.RawMessage(`{"type":"object","additionalProperties":true}`)
		}
		funcs = append(funcs, f)
	}
	return funcs
}

// SyntheticWorkload is a rollout of the scripted model that makes calls
// client calls, parallel per step, each answered after latency (a simulated
// tool) with outputBytes bytes of text.
func SyntheticWorkload(calls, parallel int, latency time.Duration, outputBytes int) (Workload, error) {
	if calls < 1 || parallel < 1 || latency < 0 || outputBytes < 0 {
		return Workload{}, fmt.Errorf("synthetic workload: want calls and parallel >= 1, latency and output bytes >= 0")
	}
	var task strings.Builder
	task.WriteString("Probe the service once per line below and report what it said.\n")
	for i := 0; i < calls; i += parallel {
		task.WriteString("call: ")
		for j := i; j < min(i+parallel, calls); j++ {
			if j > i {
				task.WriteString(" | ")
			}
			fmt.Fprintf(&task, `probe {"n":%d}`, j)
		}
		task.WriteByte('\n')
	}
	out := filler(outputBytes)
	probe := clienttools.Func{
		Name:        "probe",
		Description: "Probe the service; returns what it said.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Run: func(ctx context.Context, _ string) (string, error) {
			if err := sleep(ctx, latency); err != nil {
				return "", err
			}
			return out, nil
		},
	}
	return Workload{
		Name:  fmt.Sprintf("synthetic calls:%d parallel:%d latency:%v output:%dB", calls, parallel, latency, outputBytes),
		Model: sampler.ScriptedModel,
		Task:  task.String(),
		Tools: func(string) []clienttools.Func { return []clienttools.Func{probe} },
		Calls: calls,
	}, nil
}

// AgentsWorkload is a multi-agent rollout of the scripted model: its root
// spawns agents sub-agents, each making calls client calls one after the
// other, and waits for them all; their answers make its own. The calls
// take the recorded calls of trace tr, in order (agent k's i-th is the
// trace's (k·calls+i)-th, round the trace when it has fewer): each
// answers with the recorded output after the recorded duration (a
// simulated tool, ToolsReplay), or at once (ToolsInstant). It runs in the
// designs a multi-agent response has: inject (over WebSocket, each
// agent's calls answered as they come), chained, background and stateless
// (over HTTP, each response completing on the calls of all its agents).
func AgentsWorkload(tr *sampler.Trace, agents, calls int, tools string) (Workload, error) {
	var recordedCalls []sampler.TraceCall
	for _, s := range tr.Steps {
		recordedCalls = append(recordedCalls, s.Calls...)
	}
	switch {
	case agents < 1 || calls < 1:
		return Workload{}, fmt.Errorf("agents workload: want agents and calls >= 1")
	case len(recordedCalls) == 0:
		return Workload{}, fmt.Errorf("agents workload: trace %s records no call", tr.Name)
	case tools != ToolsReplay && tools != ToolsInstant:
		return Workload{}, fmt.Errorf("agents workload: tools %q: want %s or %s (the calls are the trace's, recorded)", tools, ToolsReplay, ToolsInstant)
	}
	var task strings.Builder
	task.WriteString("Split the audit between sub-agents, then report what they found.\n")
	names := make([]string, agents)
	for k := range agents {
		names[k] = fmt.Sprintf("auditor_%d", k+1)
		var msg strings.Builder
		fmt.Fprintf(&msg, "Audit part %d of the code base, one step a line.\n", k+1)
		for i := range calls {
			fmt.Fprintf(&msg, "call: audit_step {\"part\":%d,\"step\":%d}\n", k+1, i+1)
		}
		spec, err := json.Marshal(map[string]string{"message": msg.String()})
		if err != nil {
			return Workload{}, err
		}
		if k == 0 {
			task.WriteString("spawn: ")
		} else {
			task.WriteString(" | ")
		}
		fmt.Fprintf(&task, "%s %s", names[k], spec)
	}
	task.WriteString("\nwait: " + strings.Join(names, ", ") + "\n")
	wait := tools == ToolsReplay
	step := clienttools.Func{
		Name:        "audit_step",
		Description: "Run one step of an audit of one part of the code base; returns what the step found.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"part":{"type":"integer"},"step":{"type":"integer"}},"required":["part","step"]}`),
		Run: func(ctx context.Context, args string) (string, error) {
			var a struct{ Part, Step int }
			if err := json.Unmarshal([]byte(args), &a); err != nil || a.Part < 1 || a.Part > agents || a.Step < 1 || a.Step > calls {
				return "", fmt.Errorf("audit_step %s: no such step", args)
			}
			c := recordedCalls[((a.Part-1)*calls+a.Step-1)%len(recordedCalls)]
			if wait {
				if err := sleep(ctx, time.Duration(c.DurationMS)*time.Millisecond); err != nil {
					return "", err
				}
			}
			return c.Output, nil
		},
	}
	return Workload{
		Name:   fmt.Sprintf("agents:%s agents:%d calls:%d tools:%s", tr.Name, agents, calls, tools),
		Model:  sampler.ScriptedModel,
		Task:   task.String(),
		Tools:  func(string) []clienttools.Func { return []clienttools.Func{step} },
		Calls:  agents * calls,
		Agents: agents,
	}, nil
}

// runsIn refuses designs the workload cannot run in: a multi-agent
// rollout runs in inject (over WebSocket or WebTransport, JSON or msgpack),
// chained, background and stateless, not durable (a durable server does
// not journal sub-agents).
func (w Workload) runsIn(designs []Design) error {
	if w.Agents == 0 {
		return nil
	}
	for _, d := range designs {
		switch {
		case d.Durable:
			return fmt.Errorf("ablate: %s: a durable server does not journal sub-agents; run the multi-agent workload in inject, chained, background and stateless", d)
		case d.Mode == clienttools.ModeSuspend || d.Mode == clienttools.ModeTurns:
			return fmt.Errorf("ablate: %s: a multi-agent response waits in the beta's dialect over a connection (inject), or completes over HTTP (chained, background, stateless); run the multi-agent workload in those", d)
		}
	}
	return nil
}

// timingProbe is the rollout whose server timings checkTiming reads: two
// calls, one a step, each step writing some 40 tokens (the calls'
// arguments, then an answer that quotes the last output), so that a model
// at another speed moves every step by milliseconds, past the noise of a
// machine, at any speed up to a few thousand tokens a second. Its steps
// read different numbers of uncached prompt tokens, which tells prefill
// from the TTFT: some 300 (a task with a paragraph of context), 200 (the
// first call's output) and 100 (the second's, which is short).
func timingProbe() Workload {
	var task strings.Builder
	task.WriteString("Probe the service once per line below and report what it said.\n\n")
	task.WriteString(filler(800) + "\n\n")
	for n := range 2 {
		fmt.Fprintf(&task, "call: probe {\"n\":%d,\"note\":%q}\n", n, filler(140))
	}
	outputs := []string{filler(800), filler(100)}
	probe := clienttools.Func{
		Name:        "probe",
		Description: "Probe the service; returns what it said.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"]}`),
		Run: func(_ context.Context, args string) (string, error) {
			var a struct{ N int }
			if err := json.Unmarshal([]byte(args), &a); err != nil || a.N < 0 || a.N >= len(outputs) {
				return "", fmt.Errorf("probe %s: no such probe", args)
			}
			return outputs[a.N], nil
		},
	}
	return Workload{Name: "timing probe", Model: sampler.ScriptedModel, Task: task.String(),
		Tools: func(string) []clienttools.Func { return []clienttools.Func{probe} }, Calls: 2}
}

// filler is n bytes of plain English-like text, which tokenizes like tool
// output does (about four bytes a token), unlike a run of one letter.
func filler(n int) string {
	const words = "the quick brown fox jumps over the lazy dog while seven tired engineers measure latency "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words)
	}
	return b.String()[:n]
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if scale, ok := ctx.Value(toolScaleKey{}).(float64); ok {
		d = time.Duration(float64(d) * scale)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// toolScaleKey carries a trial's Config.ToolScale to its simulated tools'
// waits (sleep), whichever workload made them.
type toolScaleKey struct{}

// withToolScale is ctx whose simulated tool waits last scale times as
// long; scale 0 leaves them as they are.
func withToolScale(ctx context.Context, scale float64) context.Context {
	if scale == 0 {
		return ctx
	}
	return context.WithValue(ctx, toolScaleKey{}, scale)
}

// trialDir is a fresh copy of the fixture repository, removed by the
// returned function.
func trialDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "tether-ablate-")
	if err != nil {
		return "", nil, err
	}
	if err := os.CopyFS(dir, sampler.FixtureRepo()); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// input is the first request's input: the history, then the task.
func (w Workload) input() protocol.Items {
	return append(slices.Clip(w.History), protocol.UserMessage(w.Task))
}
