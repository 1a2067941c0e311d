package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// fakeMCP is an MCPClient whose sessions work until closed; it connects to
// any server but fakeMCPDown, counts the sessions it opened, and notes a
// session closed twice.
type fakeMCP struct {
	opened      atomic.Int64
	closedTwice atomic.Bool
}

const fakeMCPDown = "http://127.0.0.1:1/mcp"

func (f *fakeMCP) sessions() int64 { return f.opened.Load() }

func (f *fakeMCP) Check(protocol.MCPServer) error { return nil }

func (f *fakeMCP) Connect(ctx context.Context, s protocol.MCPServer) (MCPSession, error) {
	if s.ServerURL == fakeMCPDown {
		return nil, errors.New("mcp: MCP server 127.0.0.1:1: connection refused")
	}
	f.opened.Add(1)
	return &fakeMCPSession{client: f}, nil
}

type fakeMCPSession struct {
	client *fakeMCP
	closed atomic.Bool
}

func (s *fakeMCPSession) ListTools(context.Context) ([]protocol.MCPToolInfo, error) {
	if s.closed.Load() {
		return nil, errors.New("mcp: session closed")
	}
	return []protocol.MCPToolInfo{{Name: "add"}}, nil
}

func (s *fakeMCPSession) Call(context.Context, string, string) (string, string, error) {
	if s.closed.Load() {
		return "", "", errors.New("mcp: session closed")
	}
	return "ok", "", nil
}

func (s *fakeMCPSession) Close() error {
	if s.closed.Swap(true) {
		s.client.closedTwice.Store(true)
		return errors.New("mcp: session closed twice")
	}
	return nil
}

func TestMCPConns(t *testing.T) {
	t.Parallel()
	client := &fakeMCP{}
	sessions := client.sessions
	def := protocol.MCPServer{ServerLabel: "calc", ServerURL: "http://127.0.0.1:8080/mcp"}
	ctx := t.Context()
	works := func(s MCPSession) bool {
		_, err := s.ListTools(ctx)
		return err == nil
	}

	var c mcpConns
	s1, hold1, err := c.acquire(ctx, client, def)
	if err != nil {
		t.Fatal(err)
	}
	s2, hold2, err := c.acquire(ctx, client, def)
	if err != nil || s2 != s1 || sessions() != 1 {
		t.Fatalf("two rollouts: %p and %p, %d sessions, %v", s1, s2, sessions(), err)
	}
	hold1.release()
	hold1.release() // once only
	c.end()
	if !works(s2) {
		t.Fatal("the connection's end closed a session a rollout holds")
	}
	hold2.release()
	if works(s2) {
		t.Error("the last holder let go after the end, and the session is still open")
	}
	own, holdOwn, err := c.acquire(ctx, client, def)
	if err != nil || own == s1 || sessions() != 2 {
		t.Fatalf("after the end: %v, %d sessions", err, sessions())
	}
	holdOwn.release()
	if works(own) {
		t.Error("a session of the caller's own outlived its release")
	}

	var fresh mcpConns
	a, holdA, err := fresh.acquire(ctx, client, def)
	if err != nil {
		t.Fatal(err)
	}
	idle, holdIdle, _ := fresh.acquire(ctx, client, def)
	holdIdle.release()
	holdA.evict() // broken: out of the pool, closed once nobody holds it
	if !works(a) {
		t.Error("an evicted session closed under its holder")
	}
	holdA.release()
	if works(a) || idle != a {
		t.Error("a broken session stayed open")
	}
	b, holdB, err := fresh.acquire(ctx, client, def)
	if err != nil || b == a || sessions() != 4 {
		t.Fatalf("after a broken session: %v, %d sessions", err, sessions())
	}
	holdB.release()
	fresh.end() // b was idle: closed now
	if works(b) {
		t.Error("an idle session outlived the connection")
	}
	if _, _, err := fresh.acquire(ctx, client, protocol.MCPServer{ServerLabel: "x", ServerURL: fakeMCPDown}); err == nil {
		t.Error("a server nobody serves: connected")
	}
	if client.closedTwice.Load() {
		t.Error("a session was closed twice")
	}
}

// TestMCPReason: an MCP client's error reaches the client without its
// package prefix, whichever package made it, and as a sentence.
func TestMCPReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{errors.New("mcp: MCP server 127.0.0.1:1: connection refused"), "MCP server 127.0.0.1:1: connection refused."},
		{fmt.Errorf("%w: mcp.example.com", ErrMCPNotAllowed), "MCP server not allowed: mcp.example.com."},
		{errors.New(`Get "http://x/mcp": EOF`), `Get "http://x/mcp": EOF.`},
		{errors.New("listing tools: timeout"), "Listing tools: timeout."},
		{errors.New("401: unauthorized"), "401: unauthorized."},
		{errors.New("timeout: no answer in 30s"), "Timeout: no answer in 30s."},
		{errors.New(""), "The MCP server failed."},
	} {
		if got := mcpReason(tt.err); got != tt.want {
			t.Errorf("mcpReason(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
