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
	// Run runs one call with the model's arguments (JSON) and returns the
	// output the model reads. An error is sent to the model as the output
	// ("error: ..."), as a failed command's message would be.
	Run func(ctx context.Context, arguments string) (string, error)
}

// Definition is the function tool a request declares for f.
func (f Func) Definition() protocol.Tool {
	t := protocol.Tool{Type: protocol.ToolFunction, Name: f.Name, Parameters: f.Parameters}
	if f.Description != "" {
		t.Description = &f.Description
	}
	return t
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
	Turn      int // the turn whose calls it was part of
	CallID    string
	Name      string
	Arguments string
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
	funcs map[string]Func
	sem   chan struct{}

	mu      sync.Mutex
	started map[string]*running // call_id -> the call, this turn; guarded by mu
	wg      sync.WaitGroup
}

type running struct {
	call Call
	done chan struct{}
}

func newExecutor(funcs []Func, limit int) *executor {
	e := &executor{funcs: make(map[string]Func, len(funcs)), sem: make(chan struct{}, limit), started: map[string]*running{}}
	for _, f := range funcs {
		e.funcs[f.Name] = f
	}
	return e
}

// start runs the call unless it runs already.
func (e *executor) start(ctx context.Context, turn int, callID, name, args string, eager bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.started[callID]; ok {
		return
	}
	r := &running{call: Call{Turn: turn, CallID: callID, Name: name, Arguments: args, Eager: eager}, done: make(chan struct{})}
	e.started[callID] = r
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
		r.call.Output, r.call.Err = e.run(ctx, name, args)
		r.call.Duration = time.Since(r.call.Start)
	}()
}

// run runs one call; a panic in the tool is its error, not the client's end.
func (e *executor) run(ctx context.Context, name, args string) (out string, err error) {
	f, ok := e.funcs[name]
	if !ok {
		return "", fmt.Errorf("unknown tool %q", name)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", name, p)
		}
	}()
	return f.Run(ctx, args)
}

// finish waits for the calls, in the order given, starting those not yet
// started, and returns them; the next turn starts afresh.
func (e *executor) finish(ctx context.Context, turn int, calls []protocol.PendingCall) ([]Call, error) {
	for _, c := range calls {
		e.start(ctx, turn, c.CallID, c.Name, c.Arguments, false)
	}
	e.mu.Lock()
	started := e.started
	e.started = map[string]*running{}
	e.mu.Unlock()
	out := make([]Call, 0, len(calls))
	for _, c := range calls {
		r := started[c.CallID]
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

// output is the function_call_output item of a finished call.
func (c *Call) output() *protocol.FunctionCallOutput {
	text := c.Output
	if c.Err != nil {
		text = "error: " + c.Err.Error()
	}
	return &protocol.FunctionCallOutput{CallID: c.CallID, Output: protocol.ToolOutput{Text: text}}
}
