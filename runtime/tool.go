package runtime

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// Tool is every tool a rollout calls: a hosted tool (web_search, an MCP
// tool) or the client's functions. The loop calls them all the same way and
// cannot tell them apart.
//
// Call runs one call, on a goroutine of its own: a step's calls run
// concurrently, so Call must be safe for concurrent use, and it must honour
// ctx. call.ID is the id of the output item the rollout started for the
// call; call.Type, CallID, Name, Namespace and Input are what the model
// sampled.
// emit sends progress events (web_search_call.searching); the rollout stamps
// sequence_number, output_index and item_id on them, so a tool sets only the
// event type. emit is called on Call's goroutine and returns before Call
// does.
//
// Call returns one of:
//   - the call's finished output item (its id is call.ID), which replaces the
//     item the rollout started;
//   - another item, which joins the context after the step's output, in the
//     output order of the calls (a function_call_output); the call's own
//     item is then completed as it stands;
//   - a nil item and a nil error: the call stays open, and the response
//     ends after this step with the call in its output for the client to
//     answer in its next request;
//   - an error. While ctx is live, that is the tool failing: the call's
//     item ends failed and the model reads that. Once ctx has ended, the
//     rollout is ending and the error is its cause.
type Tool interface {
	Definition() protocol.Tool
	Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error)
}

// stepTool is a Tool that is told a step's calls before they run, all of
// them, in output order: a suspended rollout's client tool announces them
// together, in one response.done.
type stepTool interface {
	Tool
	beginStep(calls []protocol.Call)
}

// parker is a stepTool whose calls of a step the rollout waits for on its
// own goroutine, all at once (park returns their results by call_id),
// rather than on a goroutine per call: the suspended rollout's client.
type parker interface {
	stepTool
	park(ctx context.Context) (map[string]protocol.Item, error)
}

// openCalls is the client's tool in the cached-state design and over HTTP:
// every call stays open. The response ends, its state stays in the
// connection cache (or the store), and the client's next response.create
// with previous_response_id brings the outputs.
type openCalls struct{}

func (openCalls) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolFunction} }

func (openCalls) Call(context.Context, protocol.Call, func(protocol.Event)) (protocol.Item, error) {
	return nil, nil
}
