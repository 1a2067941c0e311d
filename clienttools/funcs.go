package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Func is a client tool: a function the model may call, run by the client
// when it does. Parameters is the JSON schema of its arguments.
type Func struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	// Type is the tool's type: "" (a function), protocol.ToolCustom (a
	// freeform tool: Run gets the model's raw input), or a built-in client
	// tool, protocol.ToolShell, ToolLocalShell or ToolApplyPatch (Run gets
	// the call's payload JSON: its action or operation). A built-in tool's
	// Name is its type.
	Type protocol.ToolType
	// Run runs one call with the model's arguments (JSON) and returns the
	// output the model reads. An error is sent to the model as the output
	// ("error: ..."), as a failed command's message would be.
	Run func(ctx context.Context, arguments string) (string, error)
}

// Definition is the tool a request declares for f.
func (f Func) Definition() protocol.Tool {
	var desc *string
	if f.Description != "" {
		desc = &f.Description
	}
	switch f.Type {
	case protocol.ToolShell:
		return protocol.Tool{Type: f.Type, Environment: &protocol.ShellEnvironment{Type: "local"},
			Raw: json.RawMessage(`{"type":"shell","environment":{"type":"local"}}`)}
	case protocol.ToolLocalShell, protocol.ToolApplyPatch:
		return protocol.Tool{Type: f.Type, Raw: json.RawMessage(`{"type":"` + string(f.Type) + `"}`)}
	case protocol.ToolCustom:
		raw, _ := json.Marshal(map[string]string{"type": "custom", "name": f.Name, "description": f.Description})
		return protocol.Tool{Type: f.Type, Name: f.Name, Description: desc, Raw: raw}
	}
	return protocol.Tool{Type: protocol.ToolFunction, Name: f.Name, Description: desc, Parameters: f.Parameters}
}

// key is what a call of f looks like: its item type, and its name (a
// built-in tool's calls are named by the tool's type).
func (f Func) key() callKey {
	switch f.Type {
	case "", protocol.ToolFunction:
		return callKey{protocol.ItemFunctionCall, f.Name}
	case protocol.ToolCustom:
		return callKey{protocol.ItemCustomToolCall, f.Name}
	}
	return callKey{protocol.CallTypeOf(f.Type), string(f.Type)}
}

// callKey picks the Func that runs a call.
type callKey struct {
	typ  protocol.ItemType
	name string
}

// Funcs returns the local tools as client tools.
func (t *Tools) Funcs() []Func {
	defs := t.Definitions()
	funcs := make([]Func, len(defs))
	for i, d := range defs {
		name := d.Name
		funcs[i] = Func{Name: name, Description: derefString(d.Description), Parameters: d.Parameters,
			Run: func(ctx context.Context, args string) (string, error) { return t.Run(ctx, name, args) }}
	}
	return funcs
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Call is one client tool call the client ran.
type Call struct {
	Turn      int               // the turn whose calls it was part of
	Agent     string            // the sub-agent that called it (a multi-agent response's); "" for the root
	Type      protocol.ItemType // the call item's type: function_call, custom_tool_call, shell_call…
	CallID    string
	Name      string
	Namespace string // the namespace (or an MCP server's label) Name is in
	Arguments string // a function's arguments, a custom tool's input, a typed call's payload
	Approved  bool   // an MCP approval request: the client approved the call
	Output    string
	Err       error         // the tool's error, sent to the model as the output
	Start     time.Time     // when it began
	Duration  time.Duration // how long the tool ran
	Eager     bool          // it began before its step's pause or its turn's end
}

// executor runs a turn's client calls concurrently, at most limit at once.
// A call may start as soon as its output item is done (eager) and is
// started at most once per turn.
type executor struct {
	funcs   map[callKey]Func
	approve func(context.Context, Call) bool
	sem     chan struct{}

	mu      sync.Mutex
	started map[string]*running // call_id -> the call, this turn; guarded by mu
	wg      sync.WaitGroup
}

type running struct {
	call Call
	done chan struct{}
}

func newExecutor(funcs []Func, limit int, approve func(context.Context, Call) bool) *executor {
	e := &executor{funcs: make(map[callKey]Func, len(funcs)), approve: approve, sem: make(chan struct{}, limit), started: map[string]*running{}}
	for _, f := range funcs {
		e.funcs[f.key()] = f
	}
	return e
}

// start runs the call unless it runs already.
func (e *executor) start(ctx context.Context, turn int, c protocol.Call, eager bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.started[c.CallID]; ok {
		return
	}
	r := &running{call: Call{Turn: turn, Type: c.Type, CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Arguments: c.Input, Eager: eager}, done: make(chan struct{})}
	e.started[c.CallID] = r
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(r.done)
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			r.call.Err = ctx.Err()
			return
		}
		defer func() { <-e.sem }()
		r.call.Start = time.Now()
		if c.Type == protocol.ItemMCPApprovalRequest {
			r.call.Approved = e.approve != nil && e.approve(ctx, r.call)
		} else {
			r.call.Output, r.call.Err = e.run(ctx, callKey{c.Type, c.Name}, c.Input)
		}
		r.call.Duration = time.Since(r.call.Start)
	}()
}

// run runs one call; a panic in the tool is its error, not the client's end.
func (e *executor) run(ctx context.Context, k callKey, args string) (out string, err error) {
	f, ok := e.funcs[k]
	if !ok && k.typ == protocol.ItemFunctionCall {
		return "", fmt.Errorf("unknown tool %q", k.name)
	}
	if !ok {
		return "", fmt.Errorf("unknown tool %q (a %s)", k.name, k.typ)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", k.name, p)
		}
	}()
	return f.Run(ctx, args)
}

// finish waits for the calls, in the order given, starting those not yet
// started, and returns them; they may run again afterwards (a call_id of
// a later turn). Other calls started go on: another agent's, in a tree.
func (e *executor) finish(ctx context.Context, turn int, calls []protocol.Call) ([]Call, error) {
	for _, c := range calls {
		e.start(ctx, turn, c, false)
	}
	e.mu.Lock()
	runs := make([]*running, len(calls))
	for i, c := range calls {
		runs[i] = e.started[c.CallID]
	}
	for _, c := range calls {
		delete(e.started, c.CallID)
	}
	e.mu.Unlock()
	out := make([]Call, 0, len(calls))
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		out = append(out, r.call)
	}
	return out, nil
}

// wait joins every tool goroutine (at the end of a rollout).
func (e *executor) wait() { e.wg.Wait() }

// output is the output item of a finished call, of the type that answers
// it.
func (c *Call) output() protocol.Item {
	text := c.Output
	if c.Err != nil {
		text = "error: " + c.Err.Error()
	}
	switch c.Type {
	case protocol.ItemMCPApprovalRequest:
		return &protocol.MCPApprovalResponse{ApprovalRequestID: c.CallID, Approve: c.Approved}
	case protocol.ItemCustomToolCall:
		return &protocol.CustomToolCallOutput{CallID: c.CallID, Output: protocol.ToolOutput{Text: text}}
	case protocol.ItemShellCall:
		run := map[string]any{"stdout": c.Output, "stderr": "", "outcome": map[string]any{"type": "exit", "exit_code": 0}}
		if c.Err != nil {
			run = map[string]any{"stdout": c.Output, "stderr": c.Err.Error(), "outcome": map[string]any{"type": "exit", "exit_code": 1}}
		}
		out, _ := json.Marshal([]any{run})
		return &protocol.ShellCallOutput{CallID: c.CallID, Output: out}
	case protocol.ItemLocalShellCall:
		out, _ := json.Marshal(map[string]string{"output": text})
		return &protocol.LocalShellCallOutput{ID: c.CallID, Output: string(out)}
	case protocol.ItemApplyPatchCall:
		status := protocol.StatusCompleted
		if c.Err != nil {
			status = "failed"
		}
		return &protocol.ApplyPatchCallOutput{CallID: c.CallID, Status: status, Output: &text}
	}
	return &protocol.FunctionCallOutput{CallID: c.CallID, Output: protocol.ToolOutput{Text: text}}
}
