package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

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

// mcpConns is what a connection keeps of the MCP servers its rollouts
// use, by server and credentials: the tool lists they fetched, so that a
// new conversation lists a server without asking it again, and the
// sessions they opened, so that every rollout and turn on the connection
// calls a server through one session, as a suspended rollout calls
// through its own: the designs pay the MCP handshake alike. A session
// closes once the connection has ended and no rollout holds it (a
// detached suspended rollout may).
type mcpConns struct {
	mu     lockrank.Mutex[lockrank.MCPConns]
	lists  map[string][]protocol.MCPToolInfo // guarded by mu
	open   map[string]*mcpConn               // guarded by mu
	closed bool                              // the connection has ended; guarded by mu
}

// mcpConn is one pooled session and the rollouts holding it.
type mcpConn struct {
	ready chan struct{} // closed once connected, or failed
	sess  MCPSession
	err   error
	refs  int  // guarded by mcpConns.mu
	gone  bool // out of the pool (broken, or the connection ended): closes at refs 0; guarded by mcpConns.mu
}

// maxMCPLists bounds a connection's cached tool lists.
const maxMCPLists = 64

func mcpKey(s protocol.MCPServer) string {
	h := s.AllHeaders()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.ServerLabel + "\x00" + s.ServerURL)
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + h[k])
	}
	return b.String()
}

func (c *mcpConns) list(s protocol.MCPServer) ([]protocol.MCPToolInfo, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tools, ok := c.lists[mcpKey(s)]
	return tools, ok
}

func (c *mcpConns) keepList(s protocol.MCPServer, tools []protocol.MCPToolInfo) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists == nil {
		c.lists = make(map[string][]protocol.MCPToolInfo)
	}
	if len(c.lists) >= maxMCPLists {
		clear(c.lists)
	}
	c.lists[mcpKey(s)] = tools
}

// mcpHold is a rollout's hold on a session: release gives it back (once);
// evict takes it out of the pool, so that nobody takes it again, and it
// closes once its holders have let go.
type mcpHold struct {
	release func()
	evict   func()
}

// acquire is a session with def's server: the connection's, connected
// now if it has none, or, over HTTP (c nil) or once the connection has
// ended, one of the caller's own.
func (c *mcpConns) acquire(ctx context.Context, client MCPClient, def protocol.MCPServer) (MCPSession, mcpHold, error) {
	if c == nil {
		return ownSession(ctx, client, def)
	}
	key := mcpKey(def)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ownSession(ctx, client, def)
	}
	mc, ok := c.open[key]
	if ok {
		mc.refs++
		c.mu.Unlock()
	} else {
		// Held from the start: the connection's end, meanwhile, leaves a
		// session being connected to its holders.
		mc = &mcpConn{ready: make(chan struct{}), refs: 1}
		if c.open == nil {
			c.open = make(map[string]*mcpConn)
		}
		c.open[key] = mc
		c.mu.Unlock()
		// Not on ctx alone: others may wait for this session, and this
		// rollout's end must not fail their calls (Connect has its own
		// timeout).
		mc.sess, mc.err = client.Connect(context.WithoutCancel(ctx), def)
		close(mc.ready)
	}
	select {
	case <-mc.ready:
	case <-ctx.Done():
		c.release(key, mc)
		return nil, mcpHold{}, ctx.Err()
	}
	if mc.err != nil {
		c.evict(key, mc) // the next rollout tries again
		c.release(key, mc)
		return nil, mcpHold{}, mc.err
	}
	var once sync.Once
	return mc.sess, mcpHold{release: func() { once.Do(func() { c.release(key, mc) }) }, evict: func() { c.evict(key, mc) }}, nil
}

// release drops a hold on mc; the last hold on a session out of the pool
// closes it.
func (c *mcpConns) release(key string, mc *mcpConn) {
	c.mu.Lock()
	mc.refs--
	closeIt := mc.gone && mc.refs == 0 && mc.sess != nil
	c.mu.Unlock()
	if closeIt {
		mc.sess.Close()
	}
}

// evict takes mc out of the pool: it closes when its last holder lets go.
func (c *mcpConns) evict(key string, mc *mcpConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mc.gone = true
	if c.open[key] == mc {
		delete(c.open, key)
	}
}

// end is the connection's end: its sessions close as their last rollout
// lets go of them, and later ones are the rollouts' own.
func (c *mcpConns) end() {
	c.mu.Lock()
	var idle []MCPSession
	for key, mc := range c.open {
		mc.gone = true
		delete(c.open, key)
		if mc.refs == 0 && mc.sess != nil { // else its holders close it
			idle = append(idle, mc.sess)
		}
	}
	c.closed = true
	c.mu.Unlock()
	for _, s := range idle {
		s.Close()
	}
}

// ownSession is a session of the caller's own, closed on release.
func ownSession(ctx context.Context, client MCPClient, def protocol.MCPServer) (MCPSession, mcpHold, error) {
	sess, err := client.Connect(ctx, def)
	if err != nil {
		return nil, mcpHold{}, err
	}
	var once sync.Once
	return sess, mcpHold{release: func() { once.Do(func() { sess.Close() }) }, evict: func() {}}, nil
}

// prepareMCP takes the request's mcp tools, refusing a server the request
// may not reach before anything starts.
func (s *Server) prepareMCP(r *rollout) *protocol.Error {
	for i, t := range r.req.Tools {
		if t.Type != protocol.ToolMCP {
			continue
		}
		param := indexParam("tools", i)
		if s.opts.MCP == nil {
			return protocol.Invalid(protocol.CodeToolNotAvailable, param+".type",
				"Hosted MCP servers are not enabled on this server (an embedding program enables them with Options.MCP; tether serve always has them).")
		}
		if err := s.opts.MCP.Check(*t.MCP); err != nil {
			code, field := protocol.CodeInvalidValue, ".server_url"
			if errors.Is(err, ErrMCPNotAllowed) {
				code = protocol.CodeMCPServerNotAllowed
			}
			return protocol.Invalid(code, param+field, "%s", mcpReason(err))
		}
		if r.mcp == nil {
			r.mcp = make(map[string]*mcpServer)
		}
		r.mcp[t.MCP.ServerLabel] = &mcpServer{def: *t.MCP, client: s.opts.MCP}
	}
	return nil
}

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
		idx := len(r.resp.Output)
		item := &protocol.MCPListTools{ID: newID("mcpl"), ServerLabel: srv.def.ServerLabel, Tools: []protocol.MCPToolInfo{}}
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
		r.resp.Output = append(r.resp.Output, item)
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
	r.calls = r.calls[:0]
	for _, c := range calls {
		idx := len(r.resp.Output)
		item := r.startItem(c, idx)
		c.index, c.pos, c.toolFinishes = idx, len(r.items), true
		r.emitCallStart(idx, item)
		r.emit(&protocol.MCPArgsDoneEvent{EventHeader: protocol.EventHeader{Type: protocol.EventMCPArgsDone}, ItemID: c.call.ID, OutputIndex: idx, Arguments: c.call.Input})
		r.resp.Output = append(r.resp.Output, item)
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
