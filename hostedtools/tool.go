package hostedtools

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// Tool is every tool the rollout can call: web_search, an MCP tool, or a
// client function (the runtime's bridge).
//
// Call runs one call. call.ID is the output item id the rollout assigned;
// call.CallID, call.Name and call.Arguments are what the model sampled.
// emit sends progress events; the rollout stamps sequence_number,
// output_index and item_id on them, so a tool sets only the event type.
// emit is called on Call's goroutine and returns before Call does.
// Call returns the finished output item, or a nil item and an error. A result
// whose id is call.ID replaces the call's output item; any other result (a
// client's function_call_output) joins the context after the step's output;
// a nil result with a nil error leaves the call open for the next turn.
// Call must honour ctx and be safe for concurrent use.
type Tool interface {
	Definition() protocol.Tool
	Call(ctx context.Context, call protocol.FunctionCall, emit func(protocol.Event)) (protocol.Item, error)
}

// Searcher runs one search and returns at most limit sources, best first.
// Implementations are safe for concurrent use and honour ctx.
type Searcher interface {
	Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error)
}
