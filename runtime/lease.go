package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-run/tether/runtime/internal/ids"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// This file is a server's leases on the durable rollouts it runs (see
// Checkpoints): a rollout is leased to its server while its state says so
// (lifecycle's Leased: it runs, or a connection follows it), from its
// journal's first write or its takeover on. The server renews every lease
// it holds in one call every third of Suspension.LeaseTTL, while it holds
// any; it releases a lease as the rollout lets go of it (parked with
// nobody following, hibernated, handed over), so that its client may
// resume it on another server at once; and a rollout whose lease the store
// no longer has at its epoch is fenced out here, its client told
// (fenceLocked). A server that cannot reach the store lets its rollouts go
// the same way before its leases can run out there. One stopped meanwhile
// (SIGSTOP, a VM paused) finds out as it goes on, at its first renewal,
// write or timeout: until then the epoch fences every write, and it sends,
// at most, frames of a step no store will keep.

// leases is a server's side of its leases.
type leases struct {
	srv   *Server
	lease Lease // this process's owner id, and the TTL

	renewing  atomic.Bool  // a renewal goroutine runs
	renewedAt atomic.Int64 // when the last renewal that reached the store began (Unix ns of srv.now), or the lease it began with

	mu       lockrank.Mutex[lockrank.Leases]
	released []LeaseRef // releases not yet sent; guarded by mu
	sending  bool       // a goroutine sends them; guarded by mu
	inFlight sync.WaitGroup
}

func newLeases(s *Server) *leases {
	return &leases{srv: s, lease: Lease{Owner: ids.New("srv"), TTL: s.opts.Suspension.LeaseTTL}}
}

// held starts renewing, unless a renewal goroutine runs already: a
// rollout has come to hold its lease (a write or a takeover leased it).
func (l *leases) held() {
	if !l.renewing.CompareAndSwap(false, true) {
		return
	}
	l.renewedAt.Store(l.srv.now().UnixNano()) // as the write or takeover that leased it did
	l.srv.wg.Add(1)
	go l.renew()
}

// valid reports whether the server's leases still hold as far as it can
// tell: its last renewal that reached the store began less than the TTL
// ago, less a tenth for the clocks' rates. Past that, the store may have
// let another server take its rollouts.
func (l *leases) valid() bool {
	return l.srv.now().Before(l.expiry())
}

func (l *leases) expiry() time.Time {
	return time.Unix(0, l.renewedAt.Load()).Add(l.lease.TTL - l.lease.TTL/10)
}

// renew renews the server's leases every third of their TTL, until it
// holds none or the server shuts down. While the store does not answer it
// tries every tenth of the TTL, and once its leases may have run out
// there (valid), it lets every rollout it holds go, its client told, as
// for a lease lost: another server may run it by then.
func (l *leases) renew() {
	defer l.srv.wg.Done()
	t := time.NewTimer(l.lease.TTL / 3)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-l.srv.ctx.Done():
			l.renewing.Store(false)
			return
		case <-t.C:
		}
		start := l.srv.now()
		n, err := l.renewOnce()
		switch {
		case err != nil:
			if !failing {
				l.srv.log.Warn("leases not renewed: the store did not answer", "rollouts", n, "err", err)
			}
			failing = true
			if !start.Before(l.expiry()) {
				l.srv.log.Warn("leases ran out: the store did not answer their renewals", "rollouts", n, "err", err)
				for _, h := range l.leased() {
					h.sp.leaseLost(h.ref.Epoch)
				}
			}
			t.Reset(l.lease.TTL / 10)
			continue
		case n > 0:
			failing = false
			l.renewedAt.Store(start.UnixNano())
			t.Reset(l.lease.TTL / 3)
			continue
		}
		// None held: stop, unless one came to be held as it did (held,
		// finding the goroutine still running, started none).
		l.renewing.Store(false)
		if len(l.leased()) == 0 || !l.renewing.CompareAndSwap(false, true) {
			return
		}
		t.Reset(l.lease.TTL / 3)
	}
}

// leasedRollout is a rollout the server holds the lease of, as it stood.
type leasedRollout struct {
	sp  *suspension
	ref LeaseRef
}

// leased is every rollout whose lease the server holds now.
func (l *leases) leased() []leasedRollout {
	var out []leasedRollout
	for _, sp := range l.srv.suspended.all() {
		if ref, ok := sp.leaseRef(); ok {
			out = append(out, leasedRollout{sp, ref})
		}
	}
	return out
}

// renewOnce renews every lease the server holds, in one call, and fences
// out the rollouts the store says it lost. It returns how many it renewed
// or tried to, and the store's error.
func (l *leases) renewOnce() (int, error) {
	held := l.leased()
	if len(held) == 0 {
		return 0, nil
	}
	refs := make([]LeaseRef, len(held))
	for i, h := range held {
		refs[i] = h.ref
	}
	ctx, cancel := context.WithTimeout(l.srv.ctx, checkpointTimeout)
	defer cancel()
	lost, err := l.srv.opts.Checkpoints.Renew(ctx, l.lease, refs, l.srv.checkpointTTL())
	if err != nil {
		return len(refs), err
	}
	for i, h := range held {
		if lost[i] {
			h.sp.leaseLost(h.ref.Epoch)
		}
	}
	return len(refs), nil
}

// release sends, soon, the release of ref's lease: releases that come
// while one is sent go together in the next call.
func (l *leases) release(ref LeaseRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, ref)
	if l.sending {
		return
	}
	l.sending = true
	l.inFlight.Add(1)
	l.srv.wg.Add(1)
	go l.sendReleases()
}

func (l *leases) sendReleases() {
	defer l.srv.wg.Done()
	defer l.inFlight.Done()
	for {
		l.mu.Lock()
		refs := l.released
		l.released = nil
		if len(refs) == 0 {
			l.sending = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		if err := l.srv.opts.Checkpoints.Release(ctx, l.lease.Owner, refs); err != nil {
			// Their leases run out by themselves, within LeaseTTL.
			l.srv.log.Warn("leases not released", "rollouts", len(refs), "err", err)
		}
		cancel()
	}
}

// flush waits until the releases sent so far have landed, or ctx ends:
// Shutdown's, before it closes the connections whose clients will resume
// the rollouts it handed over elsewhere.
func (l *leases) flush(ctx context.Context) {
	done := make(chan struct{})
	go func() { l.inFlight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// leaseRef is the rollout's lease, when the server holds it.
func (sp *suspension) leaseRef() (LeaseRef, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	// A takeover not yet taken (epoch 0) holds no lease: a renewal at any
	// epoch would find the store elsewhere and fence it out before it runs.
	return LeaseRef{Tenant: sp.ro.tenant, ID: sp.id, Epoch: sp.epoch}, sp.st.Leased() && sp.epoch > 0
}

// leaseLost fences the rollout out: the store no longer has it at epoch,
// at which the server held its lease. A rollout that let go of its lease
// since (it ended, it was taken back at a higher epoch) is left alone.
func (sp *suspension) leaseLost(epoch uint64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.epoch == epoch && sp.st.Leased() {
		sp.fenceLocked()
	}
}

// leaseChangedLocked acts on what an event did to the rollout's lease:
// one it came to hold is renewed from now on; one it let go of, parked
// with nobody following or released to its journal (hibernated, handed
// over), is released in the store. One that ended has its journal dropped,
// lease and all; one fenced out is another server's. The caller holds mu.
func (sp *suspension) leaseChangedLocked(was bool) {
	if sp.srv.opts.Checkpoints == nil {
		return
	}
	switch now, p := sp.st.Leased(), sp.st.Phase(); {
	case now && !was:
		sp.srv.leases.held()
	case was && !now && (p == lifecycle.Parked || p == lifecycle.Hibernated || p == lifecycle.HandedOver):
		sp.srv.leases.release(LeaseRef{Tenant: sp.ro.tenant, ID: sp.id, Epoch: sp.epoch})
	}
}
