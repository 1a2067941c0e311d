package runtime

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// MCPClient reaches the MCP servers that requests' hosted mcp tools name;
// Options.MCP is one (package hostedtools/mcp has the official SDK's). The
// rollout's side of the tool (the mcp_list_tools and mcp_call items,
// approvals, one session per server and connection) is this package's.
//
// Check and Connect may be called from any goroutine, concurrently.
//
// The messages of the errors they and an MCPSession return are shown to
// the client (less a leading package prefix such as "mcp: "), and the
// model reads those of a failed list or call: they say what went wrong in
// words a user can act on.
type MCPClient interface {
	// Check says, without connecting, whether a request may reach its mcp
	// tool's server; a request naming one it may not is refused before
	// anything starts. The error wraps ErrMCPNotAllowed for a server
	// outside what the operator allows (the client is told
	// mcp_server_not_allowed), and is any other error for a server that is
	// not one (invalid_value).
	Check(server protocol.MCPServer) error
	// Connect opens a session with server, which passed Check. It blocks
	// until the session is ready, ctx ends, or the client's own timeout.
	Connect(ctx context.Context, server protocol.MCPServer) (MCPSession, error)
}

// MCPSession is a connection to one MCP server, which the rollouts of a
// connection share: ListTools and Call may be called from any goroutine,
// concurrently, and each honours ctx and the client's timeout. Close is
// called once, when no call is in progress; it ends the session.
// Sessions are compared by identity: an implementation is a pointer.
type MCPSession interface {
	// ListTools lists the server's tools, as an mcp_list_tools item
	// lists them.
	ListTools(ctx context.Context) ([]protocol.MCPToolInfo, error)
	// Call calls the tool name with arguments (a JSON object, as the model
	// wrote it). The output is the text of the result; toolErr is an error
	// the tool reported (or arguments it cannot take), which the mcp_call
	// item carries; err is a failure to reach the tool at all (the server
	// is gone, the call timed out), after which the rollout takes a new
	// session.
	Call(ctx context.Context, name, arguments string) (output, toolErr string, err error)
	Close() error
}
