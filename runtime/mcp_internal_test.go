package runtime

import (
	"testing"
	"time"

	"github.com/tether-run/tether/hostedtools"
	"github.com/tether-run/tether/internal/mcptest"
	"github.com/tether-run/tether/protocol"
)

// TestMCPConns: a connection's rollouts share one session with a server;
// at the connection's end an idle session closes at once and a held one
// when its last holder lets go; after the end, sessions are the callers'
// own; a session let go as broken is replaced.
func TestMCPConns(t *testing.T) {
	t.Parallel()
	url, sessions := mcptest.HTTP(t)
	client := hostedtools.NewMCP(hostedtools.MCPOptions{Timeout: 10 * time.Second})
	def := protocol.MCPServer{ServerLabel: "calc", ServerURL: url}
	ctx := t.Context()
	works := func(s *hostedtools.MCPSession) bool {
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
	if _, _, err := fresh.acquire(ctx, client, protocol.MCPServer{ServerLabel: "x", ServerURL: "http://127.0.0.1:1/mcp"}); err == nil {
		t.Error("a server nobody serves: connected")
	}
}
