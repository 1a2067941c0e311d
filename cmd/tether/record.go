package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

const recordUsage = `Usage: tether trace record --url URL --upstream-model MODEL --workdir DIR [flags] "task"

Records a rollout of MODEL, served by the Responses API at URL (as OpenAI
clients take it: http://HOST:PORT/v1, or http://HOST:PORT for /v1),
into a replay trace: the task is the first user message, every function call
the model makes is executed for real in DIR with the local agent tools
(list_dir, read_file, grep, apply_patch, shell), and every step (text, calls
with their arguments, outputs and durations, reasoning tokens) is written as
a JSON Lines trace (see "tether trace show"). Each turn sends the full
history (store: false). The rollout stops at a step without calls; after
--max-steps steps with calls, one more turn with tool_choice "none" asks for
the final answer. DIR is edited by the rollout: pass a copy (the traces'
fixture repository is sampler/traces/repo in the source tree).
`

// traceRecord runs "tether trace record".
func traceRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCommand("trace record", recordUsage, `tether trace record --url http://127.0.0.1:8000/v1 --upstream-model qwen3 --workdir /tmp/repo-copy --out traces/rec.jsonl --name rec "Fix the failing test."
		tether serve --traces traces # serves it as replay:rec`, 1)
	url := fs.String("url", "", "base URL of the Responses API server, as OpenAI clients take it: http://HOST:PORT/v1 (or http://HOST:PORT); requests go to BASE/responses")
	model := fs.String("upstream-model", "", "the model to record")
	workdir := fs.String("workdir", "", "the repository the tools act on (edited in place)")
	out := fs.String("out", "", "the trace file to write (default: stdout)")
	name := fs.String("name", "recorded", "the trace's name (served as model replay:NAME)")
	repo := fs.String("repo", "", "the repository name in the trace header (default: the workdir's base name)")
	maxSteps := fs.Int("max-steps", 50, "the most steps with tool calls")
	timeout := fs.Duration("timeout", 10*time.Minute, "timeout of one request")
	shellTimeout := fs.Duration("shell-timeout", clienttools.DefaultShellTimeout, "timeout of one shell command")
	keyEnv := fs.String("api-key-env", "", "environment variable holding the API key sent as a bearer token")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 || *url == "" || *model == "" || *workdir == "" || *maxSteps < 1 {
		fs.fail(stderr, "give --url, --upstream-model, --workdir and one task argument (--max-steps at least 1)")
		return 2
	}
	base, err := protocol.APIBase(*url)
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace record: --url:", err)
		return 2
	}
	key := ""
	if *keyEnv != "" {
		if key = os.Getenv(*keyEnv); key == "" {
			fmt.Fprintf(stderr, "tether: --api-key-env: the environment variable %s is unset or empty\n", *keyEnv)
			return 2
		}
	}
	if fi, err := os.Stat(*workdir); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "tether: --workdir %s is not a directory\n", *workdir)
		return 2
	}
	if *repo == "" {
		abs, _ := filepath.Abs(*workdir)
		*repo = filepath.Base(abs)
	}
	r, err := sampler.NewRenderer()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	rec := &recorder{
		url:      base + "/responses",
		model:    *model,
		key:      key,
		client:   &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}, Timeout: *timeout},
		tools:    &clienttools.Tools{Dir: *workdir, Count: r.Count, ShellTimeout: *shellTimeout},
		maxSteps: *maxSteps,
		log:      stderr,
	}
	defer rec.client.CloseIdleConnections()
	t, err := rec.record(ctx, *name, fs.Arg(0), *repo)
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace record:", err)
		return 1
	}
	data, err := t.Encode()
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace record:", err)
		return 1
	}
	if *out == "" {
		_, err = stdout.Write(data)
	} else {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace record:", err)
		return 1
	}
	fmt.Fprintf(stderr, "recorded %s: %d steps, %d calls\n", t.Name, len(t.Steps), t.Calls())
	return 0
}

// recorder runs a rollout over stateless HTTP and records it.
type recorder struct {
	url, model, key string
	client          *http.Client
	tools           *clienttools.Tools
	maxSteps        int
	log             io.Writer
}

// turn is the part of a response the recorder reads.
type turn struct {
	Status string            `json:"status"`
	Output []json.RawMessage `json:"output"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *struct {
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// outputItem is the part of an output item the recorder reads.
type outputItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// record runs the rollout of task and returns its trace.
func (rc *recorder) record(ctx context.Context, name, task, repo string) (*sampler.Trace, error) {
	t := &sampler.Trace{Name: name, Task: task, Repo: repo}
	input := []any{map[string]any{"type": "message", "role": "user", "content": task}}
	for k := 0; ; k++ {
		last := k >= rc.maxSteps
		resp, err := rc.post(ctx, input, last)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", k, err)
		}
		step := sampler.TraceStep{}
		if resp.Usage != nil {
			step.ReasoningTokens = resp.Usage.OutputTokensDetails.ReasoningTokens
		}
		var calls []outputItem
		var text []string
		for _, raw := range resp.Output {
			var it outputItem
			if err := json.Unmarshal(raw, &it); err != nil {
				return nil, fmt.Errorf("step %d: output item: %w", k, err)
			}
			input = append(input, raw)
			switch it.Type {
			case "message":
				for _, c := range it.Content {
					if c.Type == "output_text" || c.Type == "" {
						text = append(text, c.Text)
					}
				}
			case "function_call":
				calls = append(calls, it)
			}
		}
		step.Text = strings.Join(text, "\n\n")
		if len(calls) == 0 || last {
			if step.Text == "" {
				step.Text = fmt.Sprintf("(no final answer: the recording stopped after %d steps)", k)
			}
			t.Steps = append(t.Steps, sampler.TraceStep{Text: step.Text, ReasoningTokens: step.ReasoningTokens})
			return t, nil
		}
		for _, c := range calls {
			start := time.Now()
			out, err := rc.tools.Run(ctx, c.Name, c.Arguments)
			ms := int(time.Since(start).Milliseconds())
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				out = "error: " + err.Error()
			}
			fmt.Fprintf(rc.log, "step %d: %s %s: %d bytes in %d ms\n", k, c.Name, c.Arguments, len(out), ms)
			step.Calls = append(step.Calls, sampler.TraceCall{Name: c.Name, Arguments: c.Arguments, Output: out, DurationMS: ms})
			input = append(input, map[string]any{"type": "function_call_output", "call_id": c.CallID, "output": out})
		}
		t.Steps = append(t.Steps, step)
	}
}

// post sends one turn with the whole history; final asks for an answer
// without calls.
func (rc *recorder) post(ctx context.Context, input []any, final bool) (*turn, error) {
	req := map[string]any{"model": rc.model, "input": input, "tools": rc.tools.Definitions(), "store": false}
	if final {
		req["tool_choice"] = "none"
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if rc.key != "" {
		hr.Header.Set("Authorization", "Bearer "+rc.key)
	}
	res, err := rc.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s: %s", rc.url, res.Status, bytes.TrimSpace(data))
	}
	var t turn
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("POST %s: response: %w", rc.url, err)
	}
	switch t.Status {
	case "completed":
		return &t, nil
	case "incomplete":
		reason := ""
		if t.IncompleteDetails != nil {
			reason = t.IncompleteDetails.Reason
		}
		return nil, fmt.Errorf("response incomplete: %s", reason)
	}
	if t.Error != nil {
		return nil, fmt.Errorf("response %s: %s", t.Status, t.Error.Message)
	}
	return nil, fmt.Errorf("response status %q", t.Status)
}
