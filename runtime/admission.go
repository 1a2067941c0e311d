package runtime

import (
	"net/http"
	"sync"

	"golang.org/x/time/rate"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// admission is what a server lets in, and for whom: the connections open
// (Limits.MaxConnections, Tenant.Conns), each tenant's responses in progress
// (Tenant.InFlight) and its request rate (Tenant.RPM). Each bound is checked
// and taken in one step under mu, so that requests arriving together cannot
// all pass a check before any of them is counted; what is taken is given
// back by the matching done. Its lock is a leaf.
type admission struct {
	opts *Options

	mu       lockrank.Mutex[lockrank.Admission]
	conns    map[string]int // open connections by tenant; guarded by mu
	inFlight map[string]int // responses in progress by tenant; guarded by mu
	limiters sync.Map       // tenant -> *rate.Limiter, with Tenant.RPM
}

func newAdmission(opts *Options) *admission {
	return &admission{opts: opts, conns: map[string]int{}, inFlight: map[string]int{}}
}

// conn takes a connection slot for tenant, or says why there is none.
func (a *admission) conn(tenant string) *protocol.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, n := range a.conns {
		total += n
	}
	switch {
	case total >= a.opts.Limits.MaxConnections:
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeTooManyConnections, "",
			"This server already holds %d WebSocket connections, its limit (Limits.MaxConnections). Retry later.", total)
	case tenant != "" && a.conns[tenant] >= a.opts.Tenant.Conns:
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantConnections, "",
			"Your key's tenant already holds %d WebSocket connections, its limit on this server (Tenant.Conns). Close one first.", a.conns[tenant])
	}
	a.conns[tenant]++
	return nil
}

// connDone gives back the slot conn took.
func (a *admission) connDone(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns[tenant]--; a.conns[tenant] == 0 {
		delete(a.conns, tenant)
	}
}

// response takes a place among tenant's Tenant.InFlight responses for one
// about to start, or says why there is none. The rollout given the place
// (its inFlightHeld) keeps it until it ends; a create that starts no
// rollout gives it back with responseDone.
func (a *admission) response(tenant string) *protocol.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.inFlight[tenant]
	if tenant != "" && n >= a.opts.Tenant.InFlight {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantInFlight, "",
			"Your key's tenant already has %d responses in progress, its limit on this server (Tenant.InFlight). Wait for one to finish.", n)
	}
	a.inFlight[tenant]++
	return nil
}

// counted counts a response of tenant that no create admitted (a fork): it
// is in progress all the same.
func (a *admission) counted(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight[tenant]++
}

// responseDone gives back a place response (or counted) took.
func (a *admission) responseDone(tenant string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlight[tenant]--; a.inFlight[tenant] == 0 {
		delete(a.inFlight, tenant)
	}
}

// request takes one request from tenant's bucket, or says why it is empty:
// an HTTP request, a WebSocket upgrade and a response.create on a WebSocket
// are each a request.
func (a *admission) request(tenant string) *protocol.Error {
	rpm := a.opts.Tenant.RPM
	if rpm <= 0 || tenant == "" || a.limiter(tenant).Allow() {
		return nil
	}
	return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeRateLimited, "",
		"Your key's tenant made more than %d requests in a minute, its limit on this server (Tenant.RPM). Retry shortly.", rpm)
}

// limiter is tenant's request bucket: Tenant.RPM requests, refilled at
// Tenant.RPM a minute.
func (a *admission) limiter(tenant string) *rate.Limiter {
	if l, ok := a.limiters.Load(tenant); ok {
		return l.(*rate.Limiter)
	}
	rpm := a.opts.Tenant.RPM
	l, _ := a.limiters.LoadOrStore(tenant, rate.NewLimiter(rate.Limit(float64(rpm)/60), rpm))
	return l.(*rate.Limiter)
}
