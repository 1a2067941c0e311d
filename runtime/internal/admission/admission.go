// Package admission is what a server lets in, and for whom: the
// connections open, each tenant's responses in progress and its request
// rate. It knows the bounds and counts against them; the runtime says when
// a connection, a response or a request begins and ends.
package admission

import (
	"net/http"
	"sync"

	"golang.org/x/time/rate"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// Limits are the bounds admission counts against, as the server's Options
// set them.
type Limits struct {
	Conns          int // open connections in all (Limits.MaxConnections)
	TenantConns    int // a tenant's open connections (Tenant.Conns)
	TenantInFlight int // a tenant's responses in progress (Tenant.InFlight)
	TenantRPM      int // a tenant's requests a minute (Tenant.RPM); 0: no bound
}

// Admission counts the connections open (Limits.MaxConnections,
// Tenant.Conns), each tenant's responses in progress (Tenant.InFlight) and
// its request rate (Tenant.RPM). Each bound is checked and taken in one step
// under mu, so that requests arriving together cannot all pass a check
// before any of them is counted; what is taken is given back by the
// matching Done. Its lock is a leaf. Tenant "" is no tenant: only the
// server-wide bound applies to it.
type Admission struct {
	limits Limits

	mu       lockrank.Mutex[lockrank.Admission]
	conns    map[string]int // open connections by tenant; guarded by mu
	inFlight map[string]int // responses in progress by tenant; guarded by mu
	limiters sync.Map       // tenant -> *rate.Limiter, with Tenant.RPM
}

// New is an admission counting against limits.
func New(limits Limits) *Admission {
	return &Admission{limits: limits, conns: map[string]int{}, inFlight: map[string]int{}}
}

// Conn takes a connection slot for tenant, or says why there is none.
func (a *Admission) Conn(tenant string) *protocol.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, n := range a.conns {
		total += n
	}
	switch {
	case total >= a.limits.Conns:
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeTooManyConnections, "",
			"This server already holds %d WebSocket connections, its limit (Limits.MaxConnections). Retry later.", total)
	case tenant != "" && a.conns[tenant] >= a.limits.TenantConns:
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantConnections, "",
			"Your key's tenant already holds %d WebSocket connections, its limit on this server (Tenant.Conns). Close one first.", a.conns[tenant])
	}
	a.conns[tenant]++
	return nil
}

// ConnDone gives back the slot Conn took.
func (a *Admission) ConnDone(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns[tenant]--; a.conns[tenant] == 0 {
		delete(a.conns, tenant)
	}
}

// Response takes a place among tenant's Tenant.InFlight responses for one
// about to start, or says why there is none. The response given the place
// keeps it until it ends; a request that starts none gives it back with
// ResponseDone.
func (a *Admission) Response(tenant string) *protocol.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.inFlight[tenant]
	if tenant != "" && n >= a.limits.TenantInFlight {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantInFlight, "",
			"Your key's tenant already has %d responses in progress, its limit on this server (Tenant.InFlight). Wait for one to finish.", n)
	}
	a.inFlight[tenant]++
	return nil
}

// Counted counts a response of tenant that no create admitted (a fork): it
// is in progress all the same.
func (a *Admission) Counted(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight[tenant]++
}

// ResponseDone gives back a place Response (or Counted) took.
func (a *Admission) ResponseDone(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlight[tenant]--; a.inFlight[tenant] == 0 {
		delete(a.inFlight, tenant)
	}
}

// Request takes one request from tenant's bucket, or says why it is empty:
// an HTTP request, a WebSocket upgrade and a response.create on a WebSocket
// are each a request.
func (a *Admission) Request(tenant string) *protocol.Error {
	rpm := a.limits.TenantRPM
	if rpm <= 0 || tenant == "" || a.limiter(tenant).Allow() {
		return nil
	}
	return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeRateLimited, "",
		"Your key's tenant made more than %d requests in a minute, its limit on this server (Tenant.RPM). Retry shortly.", rpm)
}

// limiter is tenant's request bucket: Tenant.RPM requests, refilled at
// Tenant.RPM a minute.
func (a *Admission) limiter(tenant string) *rate.Limiter {
	if l, ok := a.limiters.Load(tenant); ok {
		return l.(*rate.Limiter)
	}
	rpm := a.limits.TenantRPM
	l, _ := a.limiters.LoadOrStore(tenant, rate.NewLimiter(rate.Limit(float64(rpm)/60), rpm))
	return l.(*rate.Limiter)
}
