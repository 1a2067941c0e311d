package runtime

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// This file is what a connection keeps of the MCP servers its rollouts use.

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
