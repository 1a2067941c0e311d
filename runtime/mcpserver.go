package runtime

import (
	"context"
	"encoding/json"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// The hosted mcp tool. A request's mcp tool names a server; before its
// first step a rollout lists the server's tools (an mcp_list_tools item,
// unless the context has one) and offers them to the model as a namespace
// named by the server's label. A call of one of them runs on the server
// (an mcp_call item), or, when the tool needs approval, goes to the client
// as an mcp_approval_request: a call of the client's like any other, which
// ends the turn or parks the suspended rollout, and which the client
// answers with an mcp_approval_response. The approved calls run before
// the next step samples.

// mcpServer is one mcp tool of a rollout: the server, the tools it
// listed, and the session the rollout calls it through (the connection's,
// or its own over HTTP), taken on first use and given back when the
// rollout ends. It is the Tool its calls go to.
type mcpServer struct {
	def    protocol.MCPServer
	client MCPClient
	conns  *mcpConns              // the connection's MCP state; nil over HTTP
	tools  []protocol.MCPToolInfo // as listed; set before the first step, read-only after

	mu      lockrank.Mutex[lockrank.MCPServer]
	sess    MCPSession // guarded by mu
	held    mcpHold    // sess's hold; guarded by mu
	retired []mcpHold  // holds on sessions let go as broken, given back at the end; guarded by mu
}

func (s *mcpServer) Definition() protocol.Tool { return protocol.Tool{Type: protocol.ToolMCP} }

// info is the listed tool name, and whether the server listed it.
func (s *mcpServer) info(name string) (protocol.MCPToolInfo, bool) {
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return protocol.MCPToolInfo{Name: name}, false
}

// session is the rollout's session with the server, taken now if need be.
func (s *mcpServer) session(ctx context.Context) (MCPSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	sess, held, err := s.conns.acquire(ctx, s.client, s.def)
	if err != nil {
		return nil, err
	}
	s.sess, s.held = sess, held
	return sess, nil
}

// broken lets go of sess after a failure: the rollout's next call, and
// the connection's next rollout, take a new session; sess closes once
// every call still using it (a sibling of this step) is done, when the
// rollouts holding it end.
func (s *mcpServer) broken(sess MCPSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != sess {
		return // let go already
	}
	s.held.evict()
	s.retired = append(s.retired, s.held)
	s.sess, s.held = nil, mcpHold{}
}

// close gives back every session the rollout took.
func (s *mcpServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		s.held.release()
	}
	for _, h := range s.retired {
		h.release()
	}
	s.sess, s.held, s.retired = nil, mcpHold{}, nil
}

// Call runs a sampled call the server's tool needs no approval for.
func (s *mcpServer) Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error) {
	return s.run(ctx, call, nil, emit)
}

// run calls the tool and returns the finished mcp_call item: completed
// with the tool's output, or failed with why (the tool's own error, a
// tool the server does not offer, the server out of reach or too slow),
// which the model reads. An error is only the rollout ending.
func (s *mcpServer) run(ctx context.Context, call protocol.Call, approval *string, emit func(protocol.Event)) (protocol.Item, error) {
	item := &protocol.MCPCall{ID: call.ID, ServerLabel: s.def.ServerLabel, Name: call.Name, Arguments: call.Input,
		ApprovalRequestID: approval, Status: protocol.StatusCompleted}
	fail := func(msg string) (protocol.Item, error) {
		item.Error, _ = json.Marshal(msg)
		item.Status = protocol.StatusFailed
		emit(&protocol.MCPEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPCallFailed}})
		return item, nil
	}
	if info, listed := s.info(call.Name); !listed || !s.def.Allows(info) {
		return fail("Tool '" + call.Name + "' is not available on MCP server '" + s.def.ServerLabel + "'.")
	}
	out, toolErr, err := func() (string, string, error) {
		sess, err := s.session(ctx)
		if err != nil {
			return "", "", err
		}
		out, toolErr, err := sess.Call(ctx, call.Name, call.Input)
		if err != nil && ctx.Err() == nil {
			s.broken(sess) // the server went away, or hangs: a new session next time
		}
		return out, toolErr, err
	}()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err
	case err != nil:
		return fail(err.Error())
	case toolErr != "":
		return fail(toolErr)
	}
	item.Output = &out
	emit(&protocol.MCPEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPCallCompleted}})
	return item, nil
}

// approvedMCP runs a call the client approved on its server: the call's
// mcp_call item names the approval request.
type approvedMCP struct {
	*mcpServer
	request string
}

func (a approvedMCP) Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error) {
	return a.run(ctx, call, &a.request, emit)
}
