package runtime

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// Tool is a hosted tool: one the server runs for the model, such as
// web_search or an MCP server's tools. The calls the model makes of its
// client's tools are not a Tool's: the rollout hands them to its client,
// by the design it runs (left open for the next request, or answered in
// the same response by response.append).
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

// clientCalls answers the calls of a step that are the client's: every
// call no hosted tool takes (protocol.RunnerOf says which types are which;
// the members of the request's namespaces are always the client's), and an
// MCP call that needs its client's approval. It is the one seam between the
// loop and the design it runs: the loop gives it the step's client calls,
// all of them, in output order, once the step's hosted calls have started,
// and takes their outputs by call_id.
//
// answer runs on the loop's goroutine while the step's hosted calls run on
// theirs. It returns either every call's output, or none (nil): the calls
// stay open, and the response ends after the step with them in its output
// for the client's next request. An error means the rollout is ending: its
// cause.
type clientCalls interface {
	answer(ctx context.Context, calls []protocol.Call) (map[string]protocol.Item, error)
}

// openCalls answers the client's calls in the cached-state design and
// over HTTP: it leaves them all open. The response ends, its state stays in
// the connection cache (or the store), and the client's next
// response.create with previous_response_id brings the outputs.
type openCalls struct{}

func (openCalls) answer(context.Context, []protocol.Call) (map[string]protocol.Item, error) {
	return nil, nil
}
