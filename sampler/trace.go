package sampler

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"

	"github.com/tether-run/tether/protocol"
)

// Trace is a recorded rollout of a coding agent, replayed by Replay.
//
// # Format
//
// A trace is JSON Lines (UTF-8, one JSON object per line, blank lines
// ignored). The first line is the header:
//
//	{"trace": "NAME", "task": "the user's request", "repo": "calc"}
//
// trace is the trace's name (its model is "replay:NAME"); task is the first
// user message of the recorded session, for clients that replay it (Replay
// itself answers whatever task a client sends); repo names the fixture
// repository the tool calls act on (sampler/traces/repo for "calc").
// Every following line is one assistant step:
//
//	{"text": "...", "reasoning_tokens": 120,
//	 "calls": [{"name": "read_file", "arguments": "{\"path\":\"parser.go\"}",
//	            "output": "...", "duration_ms": 3}]}
//
// text is the message the model wrote in the step (may be empty when it only
// calls tools); calls are the tool calls of the step, in order, several
// when the step called tools in parallel; arguments is the call's arguments
// JSON exactly as sent, or with "type": "custom" the raw input of a custom
// (freeform) tool's call, such as Codex's apply_patch; output is the tool's recorded output and
// duration_ms how long the tool took, both for clients that replay the
// tools (the server never sends them); reasoning_tokens is how many hidden
// reasoning tokens the model spent before the step's first visible token
// (Replay paces them as output it does not send); model_ms, when the
// trace was imported from a session, is how long the recorded model took
// for the step, from the request to its last item (shown, not replayed:
// Replay paces by its Timing). The header of an imported trace has
// "source" (what it was imported from) and no repo; for a turn after the
// first of its session, "history", the conversation before it as
// Responses API input items (user and assistant messages, calls and their
// outputs), which a client replaying the turn sends before the task so
// that its context is the session's, and "think_ms", how long the user
// took between the previous turn's answer and this turn's message (shown,
// not replayed). Every step but the last
// has at least one call; the last step has no calls and its text is the
// final answer.
//
// The tools and their arguments, as a client executes them from the root of
// the fixture repository:
//
//	list_dir     {"path": "."}                         entries, one a line, "/" after directories
//	read_file    {"path": "parser.go"}                 the file, lines numbered "%4d\t"
//	grep         {"pattern": "regexp", "path": "."}    "file:line:text" for every match
//	apply_patch  {"patch": "*** Begin Patch\n..."}     the Codex patch format
//	shell        {"command": "go test ./..."}          combined output and exit code
type Trace struct {
	Name    string
	Task    string         // the recorded first user message
	Repo    string         // the fixture repository the calls act on; "" for an imported session
	Source  string         // what an imported trace was imported from
	History protocol.Items // an imported turn's conversation before it, sent before the task
	ThinkMS int            // the user's time before the task, after the previous turn's answer
	Steps   []TraceStep
}

// TraceStep is one assistant step of a trace.
type TraceStep struct {
	Text            string      `json:"text,omitempty"`
	Calls           []TraceCall `json:"calls,omitempty"`
	ReasoningTokens int         `json:"reasoning_tokens,omitempty"`
	ModelMS         int         `json:"model_ms,omitempty"`
}

// TraceCall is one tool call of a step, with its recorded result.
type TraceCall struct {
	Type       string `json:"type,omitempty"` // "" for a function call, CustomCall for a custom tool's
	Name       string `json:"name"`
	Arguments  string `json:"arguments"`
	Output     string `json:"output"`
	DurationMS int    `json:"duration_ms"`
}

// CustomCall is the TraceCall.Type of a custom (freeform) tool's call.
const CustomCall = "custom"

// traceHeader is the first line of a trace.
type traceHeader struct {
	Trace   string          `json:"trace"`
	Task    string          `json:"task"`
	Repo    string          `json:"repo"`
	Source  string          `json:"source,omitempty"`
	History json.RawMessage `json:"history,omitempty"`
	ThinkMS int             `json:"think_ms,omitempty"`
}

// maxTraceLine bounds one line of a trace.
const maxTraceLine = 16 << 20

// ParseTrace reads a trace in the JSON Lines format documented on Trace.
func ParseTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	var t *Trace
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if t == nil {
			var h traceHeader
			if err := dec.Decode(&h); err != nil {
				return nil, fmt.Errorf("trace: line %d: header: %w", line, err)
			}
			if h.Trace == "" {
				return nil, fmt.Errorf("trace: line %d: header without a trace name", line)
			}
			if h.ThinkMS < 0 {
				return nil, fmt.Errorf("trace %s: line %d: negative think_ms", h.Trace, line)
			}
			t = &Trace{Name: h.Trace, Task: h.Task, Repo: h.Repo, Source: h.Source, ThinkMS: h.ThinkMS}
			if len(h.History) > 0 {
				items, perr := protocol.DecodeItems(h.History, "history")
				if perr == nil {
					perr = protocol.ValidateItems(items, "history")
				}
				if perr != nil {
					return nil, fmt.Errorf("trace %s: line %d: %s", h.Trace, line, perr.Message)
				}
				t.History = items
			}
			continue
		}
		var s TraceStep
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("trace %s: line %d: %w", t.Name, line, err)
		}
		if s.ReasoningTokens < 0 || s.ModelMS < 0 {
			return nil, fmt.Errorf("trace %s: line %d: negative reasoning_tokens or model_ms", t.Name, line)
		}
		for i, c := range s.Calls {
			switch {
			case c.Name == "":
				return nil, fmt.Errorf("trace %s: line %d: call %d has no name", t.Name, line, i)
			case c.Type != "" && c.Type != CustomCall:
				return nil, fmt.Errorf("trace %s: line %d: call %d (%s): type %q: want none (a function call) or %q", t.Name, line, i, c.Name, c.Type, CustomCall)
			case c.DurationMS < 0:
				return nil, fmt.Errorf("trace %s: line %d: call %d (%s): negative duration_ms", t.Name, line, i, c.Name)
			}
			if c.Type == "" && !json.Valid([]byte(c.Arguments)) {
				return nil, fmt.Errorf("trace %s: line %d: call %d (%s): arguments are not JSON", t.Name, line, i, c.Name)
			}
		}
		t.Steps = append(t.Steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace: line %d: %w", line+1, err)
	}
	if t == nil {
		return nil, errors.New("trace: empty")
	}
	if len(t.Steps) == 0 {
		return nil, fmt.Errorf("trace %s: no steps", t.Name)
	}
	for i, s := range t.Steps {
		last := i == len(t.Steps)-1
		if !last && len(s.Calls) == 0 {
			return nil, fmt.Errorf("trace %s: step %d has no calls but is not the last", t.Name, i)
		}
		if last && (len(s.Calls) > 0 || s.Text == "") {
			return nil, fmt.Errorf("trace %s: the last step must be a final answer: text and no calls", t.Name)
		}
	}
	return t, nil
}

// Encode writes t in the trace format (see Trace), and checks that it
// parses back: a trace that Replay could not serve is an error, not a file.
func (t *Trace) Encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	h := traceHeader{Trace: t.Name, Task: t.Task, Repo: t.Repo, Source: t.Source, ThinkMS: t.ThinkMS}
	if len(t.History) > 0 {
		b, err := protocol.Marshal(t.History)
		if err != nil {
			return nil, err
		}
		h.History = b
	}
	if err := enc.Encode(h); err != nil {
		return nil, err
	}
	for _, s := range t.Steps {
		if err := enc.Encode(s); err != nil {
			return nil, err
		}
	}
	if _, err := ParseTrace(bytes.NewReader(b.Bytes())); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Calls is the number of tool calls in the trace.
func (t *Trace) Calls() int {
	n := 0
	for _, s := range t.Steps {
		n += len(s.Calls)
	}
	return n
}

// Tools are the names of the tools the trace calls, in the order of their
// first call.
func (t *Trace) Tools() []string {
	var names []string
	for _, s := range t.Steps {
		for _, c := range s.Calls {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// Custom reports whether the trace calls the tool name as a custom tool.
func (t *Trace) Custom(name string) bool {
	for _, s := range t.Steps {
		for _, c := range s.Calls {
			if c.Name == name {
				return c.Type == CustomCall
			}
		}
	}
	return false
}

//go:embed traces/*.jsonl
var traceFiles embed.FS

// LoadTraces parses the embedded traces, sorted by name.
func LoadTraces() ([]*Trace, error) {
	return parseTraceFiles(traceFiles, "traces")
}

// LoadTraceDir parses the trace files (*.jsonl) in dir, sorted by name:
// traces recorded with tether trace record.
func LoadTraceDir(dir string) ([]*Trace, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("trace directory %s: not a directory", dir)
	}
	return parseTraceFiles(os.DirFS(dir), ".")
}

func parseTraceFiles(fsys fs.FS, dir string) ([]*Trace, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []*Trace
	for _, name := range names {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, err
		}
		t, err := ParseTrace(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(name), err)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
