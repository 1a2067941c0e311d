package admission

import (
	"testing"

	"github.com/tether-run/tether/protocol"
)

func TestAdmission(t *testing.T) {
	t.Parallel()
	a := New(Limits{Conns: 3, TenantConns: 2, TenantInFlight: 1, TenantRPM: 2})
	code := func(perr *protocol.Error) string {
		if perr == nil {
			return ""
		}
		return perr.Code
	}
	// Connections: a tenant's bound, then the server's.
	for i, want := range []string{"", "", protocol.CodeTenantConnections} {
		if got := code(a.Conn("t1")); got != want {
			t.Errorf("t1's connection %d: %q, want %q", i, got, want)
		}
	}
	if got := code(a.Conn("")); got != "" {
		t.Errorf("a connection of no tenant: %q", got)
	}
	if got := code(a.Conn("t2")); got != protocol.CodeTooManyConnections {
		t.Errorf("past the server's bound: %q, want %q", got, protocol.CodeTooManyConnections)
	}
	a.ConnDone("t1")
	if got := code(a.Conn("t2")); got != "" {
		t.Errorf("a slot given back is taken again: %q", got)
	}
	// Responses in progress.
	if got := code(a.Response("t1")); got != "" {
		t.Errorf("t1's response: %q", got)
	}
	if got := code(a.Response("t1")); got != protocol.CodeTenantInFlight {
		t.Errorf("t1's second response: %q, want %q", got, protocol.CodeTenantInFlight)
	}
	a.ResponseDone("t1")
	a.Counted("t1") // a fork's: counted past the bound
	if got := code(a.Response("t1")); got != protocol.CodeTenantInFlight {
		t.Errorf("with a fork counted: %q, want %q", got, protocol.CodeTenantInFlight)
	}
	if got := code(a.Response("")); got != "" {
		t.Errorf("no tenant's response: %q", got)
	}
	// Requests a minute: a bucket of TenantRPM.
	for i, want := range []string{"", "", protocol.CodeRateLimited} {
		if got := code(a.Request("t1")); got != want {
			t.Errorf("t1's request %d: %q, want %q", i, got, want)
		}
	}
	if got := code(a.Request("t2")); got != "" {
		t.Errorf("t2's first request: %q (buckets are the tenant's)", got)
	}
}
