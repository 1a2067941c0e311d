package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// traceCmd runs "tether trace": "show NAME" prints an embedded trace (or a
// trace file, when NAME is a path to one) step by step, with token sizes.
func traceCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, traceUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, traceUsage)
		return 0
	case "show":
		return traceShow(args[1:], stdout, stderr)
	case "list":
		return traceList(args[1:], stdout, stderr)
	case "import":
		return traceImport(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "tether: trace: unknown command %q\n\n%s", args[0], traceUsage)
	return 2
}

const traceUsage = `Usage: tether trace <command>

Commands:
  list        list the traces served as models "replay:NAME": the embedded ones, and
              those of --traces DIR
  show NAME   print a trace's steps and token sizes (NAME: a trace's name or a .jsonl file)
  record      record a rollout of a model into a trace, executing its tool calls for real
  import      import agent sessions (Codex CLI rollout files) as traces

Run "tether trace <command> -h" for a command's flags.
`

func traceList(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("trace list", `Usage: tether trace list [flags]

Lists the traces tether serve serves as models "replay:NAME": the embedded
ones, and those in --traces DIR, with their steps and tool calls.`, "tether trace list --traces ./my-traces", 0)
	dir := fs.String("traces", "", "also list the trace files (*.jsonl) in this directory, as tether serve --traces serves them")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	traces, err := loadTraces(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	for _, t := range traces {
		fmt.Fprintf(stdout, "%s%s\t%d steps\t%d calls\n", sampler.ReplayPrefix, t.Name, len(t.Steps), t.Calls())
	}
	return 0
}

func traceShow(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("trace show", `Usage: tether trace show [flags] NAME

Prints a trace step by step: each step's output and reasoning tokens and the
context after it, each call with its arguments, output tokens and duration.
NAME is a trace's name (with or without "replay:") or a trace file.`, "tether trace show calc-fix-12\ntether trace show ./rec.jsonl", 1)
	dir := fs.String("traces", "", "also look for NAME among the trace files (*.jsonl) in this directory")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.fail(stderr, "give one trace name, such as calc-fix-12 (tether trace list lists them), or a trace file")
		return 2
	}
	t, err := findTrace(fs.Arg(0), *dir)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	r, err := sampler.NewRenderer()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	showTrace(stdout, r, t)
	return 0
}

// findTrace is the trace named name (with or without "replay:"), embedded
// or in dir, else the trace file at path name.
func findTrace(name, dir string) (*sampler.Trace, error) {
	traces, err := loadTraces(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range traces {
		if t.Name == strings.TrimPrefix(name, sampler.ReplayPrefix) {
			return t, nil
		}
		names = append(names, t.Name)
	}
	if _, err := os.Stat(name); err == nil {
		return parseTraceFile(name)
	}
	return nil, fmt.Errorf("no trace %q; traces: %s", name, strings.Join(names, ", "))
}

// parseTraceFile reads the trace file at path.
func parseTraceFile(path string) (*sampler.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return sampler.ParseTrace(f)
}

// loadTraces is the embedded traces, then those of dir ("": none), sorted
// by name; two of one name are an error.
func loadTraces(dir string) ([]*sampler.Trace, error) {
	traces, err := sampler.LoadTraces()
	if err != nil || dir == "" {
		return traces, err
	}
	more, err := sampler.LoadTraceDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range traces {
		seen[t.Name] = true
	}
	for _, t := range more {
		if seen[t.Name] {
			return nil, fmt.Errorf("--traces %s: two traces are named %q (the embedded ones are %s): rename one (its header's name)", dir, t.Name, embeddedNames(traces))
		}
		seen[t.Name] = true
	}
	traces = append(traces, more...)
	slices.SortFunc(traces, func(a, b *sampler.Trace) int { return strings.Compare(a.Name, b.Name) })
	return traces, nil
}

func embeddedNames(traces []*sampler.Trace) string {
	var names []string
	for _, t := range traces {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// traceStats are a trace's token sizes, as the Renderer counts them.
type traceStats struct {
	calls, maxOutput, context int
}

// showTrace prints one block per step: the step's index, its output tokens
// (text and arguments), reasoning tokens and the context after it (the task,
// then every item rendered); then each call with an argument summary, its
// output tokens and duration.
func showTrace(w io.Writer, r *sampler.Renderer, t *sampler.Trace) traceStats {
	var st traceStats
	for _, it := range t.History {
		st.context += len(r.Item(it))
	}
	history := st.context
	task := protocol.UserMessage(t.Task)
	st.context += len(r.Item(task))
	from := "repo " + t.Repo
	if t.Repo == "" {
		from = "imported from " + t.Source
	}
	fmt.Fprintf(w, "trace %s (model %s%s): %s, %d steps, %d calls\n", t.Name, sampler.ReplayPrefix, t.Name, from, len(t.Steps), t.Calls())
	if len(t.History) > 0 {
		fmt.Fprintf(w, "history: %d items of the session before this turn (%d tokens)\n", len(t.History), history)
	}
	if t.ThinkMS > 0 {
		fmt.Fprintf(w, "think: %.1f s from the previous turn's answer to the task\n", float64(t.ThinkMS)/1e3)
	}
	fmt.Fprintf(w, "task: %s (%d tokens)\n", summary(t.Task, 100), st.context-history)
	first := st.context
	var outs []int
	var model, tools int
	for k, s := range t.Steps {
		items := t.StepItems(k, true)
		out := 0
		for _, it := range items {
			n := len(r.Item(it))
			st.context += n
			switch it.(type) {
			case *protocol.FunctionCallOutput, *protocol.CustomToolCallOutput:
			default:
				out += r.Count(itemText(it))
			}
		}
		outs = append(outs, out)
		model += s.ModelMS
		fmt.Fprintf(w, "\nstep %d: output %d tokens, reasoning %d, context %d tokens\n", k, out, s.ReasoningTokens, st.context)
		if s.Text != "" {
			fmt.Fprintf(w, "  text  %q (%d tokens)\n", summary(s.Text, 80), r.Count(s.Text))
		}
		for _, c := range s.Calls {
			n := r.Count(c.Output)
			st.calls++
			st.maxOutput = max(st.maxOutput, n)
			fmt.Fprintf(w, "  call  %-11s %-60s args %4d  output %5d tokens  %5d ms\n", c.Name, argSummary(c.Arguments), r.Count(c.Arguments), n, c.DurationMS)
			tools += c.DurationMS
		}
	}
	fmt.Fprintf(w, "\ntotal: %d calls, largest tool output %d tokens, final context %d tokens\n", st.calls, st.maxOutput, st.context)
	slices.Sort(outs)
	fmt.Fprintf(w, "context %d → %d tokens over %d steps; output tokens a step: median %d, p90 %d, largest %d\n",
		first, st.context, len(outs), outs[len(outs)/2], outs[len(outs)*9/10], outs[len(outs)-1])
	if model > 0 {
		// An imported session's own timing: what the recorded model and
		// tools took (a replay paces the model by its Timing instead).
		fmt.Fprintf(w, "recorded: model %.1f s, tools %.1f s (%.0f%% of the two)\n", float64(model)/1e3, float64(tools)/1e3, 100*float64(tools)/float64(model+tools))
	}
	return st
}

func itemText(it protocol.Item) string {
	switch it := it.(type) {
	case *protocol.FunctionCall:
		return it.Arguments
	case *protocol.CustomToolCall:
		return it.Input
	case *protocol.Message:
		var b strings.Builder
		for _, c := range it.Content {
			b.WriteString(c.PlainText())
		}
		return b.String()
	}
	return ""
}

// argSummary is the arguments on one line: the values of a JSON object,
// each cut short, or the raw text.
func argSummary(args string) string {
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		if strings.HasPrefix(args, "*** Begin Patch") { // a custom apply_patch's input
			return "patch=" + summary(patchFiles(args), 48)
		}
		return summary(args, 60)
	}
	var parts []string
	for _, k := range []string{"path", "pattern", "command", "cmd", "patch"} {
		if v, ok := m[k]; ok {
			s := fmt.Sprint(v)
			if k == "patch" {
				s = patchFiles(s)
			}
			parts = append(parts, k+"="+summary(s, 48))
		}
	}
	return strings.Join(parts, " ")
}

// patchFiles lists the files a Codex-format patch touches.
func patchFiles(p string) string {
	var files []string
	for _, l := range strings.Split(p, "\n") {
		for _, pre := range []string{"*** Update File: ", "*** Add File: ", "*** Delete File: "} {
			if f, ok := strings.CutPrefix(l, pre); ok {
				files = append(files, f)
			}
		}
	}
	return strings.Join(files, ",")
}

// summary is s on one line, cut to n characters.
func summary(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
