package runtime

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// This file is a rollout's side of the hosted mcp tool: listing its servers'
// tools before the first step, routing their calls, and running the calls its
// client approved.

// onConnection has the rollout's MCP servers reached through the
// connection's sessions, and listed from its lists.
func (r *rollout) onConnection(conns *mcpConns) {
	for _, s := range r.mcp {
		s.conns = conns
	}
}

// mcpReason is an MCP error for the client, without the prefix of the Go
// package that made it ("mcp: ", "runtime: "); an error that begins with
// any other word keeps it.
func mcpReason(err error) string {
	msg := err.Error()
	for _, pkg := range []string{"mcp: ", "runtime: "} {
		if rest, ok := strings.CutPrefix(msg, pkg); ok {
			msg = rest
			break
		}
	}
	if msg == "" {
		return "The MCP server failed."
	}
	return strings.ToUpper(msg[:1]) + msg[1:] + "."
}

// closeMCP ends the rollout's sessions with its servers.
func (r *rollout) closeMCP() {
	for _, s := range r.mcp {
		s.close()
	}
}

// beforeStep runs what comes before a step samples: on the first, the
// listing of the MCP servers whose tools the context lacks; on every
// step, the MCP calls the client approved since the last.
func (r *rollout) beforeStep(ctx context.Context) error {
	if len(r.mcp) == 0 {
		return nil
	}
	r.modelReady = time.Time{} // the step waits for what runs here: the model starts after it
	if r.tools == nil {
		if err := r.listMCP(ctx); err != nil {
			return err
		}
	}
	return r.runApproved(ctx)
}

// listMCP lists the tools of each server the context has no list of, as
// an mcp_list_tools item, and offers the model every server's allowed
// tools as a namespace. A server that cannot list its tools fails the
// response: the model cannot use what it cannot see.
func (r *rollout) listMCP(ctx context.Context) error {
	for _, t := range r.req.Tools {
		if t.Type != protocol.ToolMCP {
			continue
		}
		srv := r.mcp[t.MCP.ServerLabel]
		if l := newestList(r.items, srv.def.ServerLabel); l != nil {
			srv.tools = l.Tools
			continue
		}
		item := &protocol.MCPListTools{ID: ids.New("mcpl"), ServerLabel: srv.def.ServerLabel, Tools: []protocol.MCPToolInfo{}}
		idx := r.place(func(int) protocol.Item { return item })
		event := func(typ protocol.EventType) {
			r.emit(&protocol.MCPEvent{EventHeader: protocol.EventHeader{Type: typ}, OutputIndex: idx, ItemID: item.ID})
		}
		r.emit(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: item})
		event(protocol.EventMCPListToolsInProgress)
		tools, err := r.fetchList(ctx, srv)
		if err != nil && ctx.Err() != nil {
			return err
		}
		if err != nil {
			msg := mcpReason(err)
			item.Error = &msg
			event(protocol.EventMCPListToolsFailed)
		} else {
			item.Tools, srv.tools = tools, tools
			event(protocol.EventMCPListToolsCompleted)
		}
		r.mu.Lock()
		r.itemDoneLocked(idx, item)
		r.mu.Unlock()
		r.appendContext(protocol.Items{item})
		if err != nil {
			return protocol.Errorf(http.StatusFailedDependency, protocol.CodeMCPServerError, "tools",
				"Error retrieving tool list from MCP server '%s': %s", srv.def.ServerLabel, *item.Error)
		}
	}
	r.tools = offeredTools(r.req.Tools, r.mcp)
	return nil
}

// fetchList is a server's tools: from the connection's lists, else from
// the server.
func (r *rollout) fetchList(ctx context.Context, srv *mcpServer) ([]protocol.MCPToolInfo, error) {
	if tools, ok := srv.conns.list(srv.def); ok {
		return tools, nil
	}
	sess, err := srv.session(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := sess.ListTools(ctx)
	if err != nil {
		srv.broken(sess) // the next rollout connects again
		return nil, err
	}
	if tools == nil {
		tools = []protocol.MCPToolInfo{}
	}
	srv.conns.keepList(srv.def, tools)
	return tools, nil
}

// newestList is the newest successful mcp_list_tools of label in items.
func newestList(items protocol.Items, label string) *protocol.MCPListTools {
	for i := len(items) - 1; i >= 0; i-- {
		if l, ok := items[i].(*protocol.MCPListTools); ok && l != nil && l.ServerLabel == label && l.Error == nil {
			return l
		}
	}
	return nil
}

// offeredTools are the tools the model is offered: the request's, with
// each mcp tool as a namespace of the server's allowed tools.
func offeredTools(tools []protocol.Tool, servers map[string]*mcpServer) []protocol.Tool {
	out := make([]protocol.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Type != protocol.ToolMCP {
			out = append(out, t)
			continue
		}
		srv := servers[t.MCP.ServerLabel]
		ns := protocol.Tool{Type: protocol.ToolNamespace, Name: srv.def.ServerLabel}
		if d := srv.def.ServerDescription; d != "" {
			ns.Description = &d
		}
		for _, info := range srv.tools {
			if srv.def.Allows(info) {
				ns.Tools = append(ns.Tools, protocol.Tool{Type: protocol.ToolFunction, Name: info.Name, Description: info.Description, Parameters: info.InputSchema})
			}
		}
		if len(ns.Tools) > 0 {
			out = append(out, ns)
		}
	}
	return out
}

// routeMCP routes a sampled call of a server's tool: to the server, or,
// when the tool needs approval, to the client as an approval request (c
// becomes one). It is nil for a call of no server's.
func (r *rollout) routeMCP(c *protocol.Call) *stepCall {
	srv, ok := r.mcp[c.Namespace]
	if !ok || c.Type != protocol.ItemFunctionCall {
		return nil
	}
	if info, _ := srv.info(c.Name); srv.def.NeedsApproval(info) {
		c.Type = protocol.ItemMCPApprovalRequest
		return &stepCall{kind: clientCall}
	}
	return &stepCall{kind: mcpCall, tool: srv}
}

// runApproved runs, as a step without sampling, the calls whose approval
// came into the context since it last looked and that have not run.
func (r *rollout) runApproved(ctx context.Context) error {
	var calls []*stepCall
	queued := map[string]bool{}
	for i := r.approvedFrom; i < len(r.items); i++ {
		ok, isOK := r.items[i].(*protocol.MCPApprovalResponse)
		if !isOK || ok == nil || !ok.Approve {
			continue
		}
		req, _ := findItem(r.items[:i], ok.ApprovalRequestID).(*protocol.MCPApprovalRequest)
		if req == nil || queued[req.ID] || ranApproved(r.items[i+1:], req.ID) || r.mcp[req.ServerLabel] == nil {
			continue
		}
		queued[req.ID] = true
		calls = append(calls, &stepCall{
			call: protocol.Call{Type: protocol.ItemFunctionCall, Name: req.Name, Namespace: req.ServerLabel, Input: req.Arguments},
			kind: approvedCall, tool: approvedMCP{r.mcp[req.ServerLabel], req.ID}, approval: req.ID,
		})
	}
	r.approvedFrom = len(r.items)
	if len(calls) == 0 {
		return nil
	}
	// They count against max_tool_calls, but run whatever it says: the
	// client approved each by name.
	r.toolCalls += len(calls)
	r.calls = r.calls[:0]
	for _, c := range calls {
		var item protocol.Item
		idx := r.place(func(idx int) protocol.Item {
			item = r.startItem(c, idx)
			return item
		})
		c.index, c.pos, c.toolFinishes = idx, len(r.items), true
		r.emitCallStart(idx, item)
		r.emit(&protocol.MCPArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPArgsDone}, ItemID: c.call.ID, OutputIndex: idx, Arguments: c.call.Input})
		r.items = append(r.items, item)
		r.calls = append(r.calls, c)
	}
	_, err := r.dispatch(ctx)
	return err
}

// ranApproved reports whether an mcp_call in items ran on approval id.
func ranApproved(items protocol.Items, id string) bool {
	for _, it := range items {
		if c, ok := it.(*protocol.MCPCall); ok && c != nil && c.ApprovalRequestID != nil && *c.ApprovalRequestID == id {
			return true
		}
	}
	return false
}
