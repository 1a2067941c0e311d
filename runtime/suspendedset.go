package runtime

import (
	"container/list"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/budget"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// suspendedSet is a server's suspended rollouts by response id, bounded by
// Suspension.Max and Tenant.Suspended, and the tails of those that settled
// (tail.go), under a lock of their own: response.resume finds a rollout, or
// its tail, there. Lock order: mu, then a suspension's (settle retires a
// rollout under both, so that a resume that finds it settled finds its
// tail kept).
type suspendedSet struct {
	opts *Options
	now  func() time.Time

	mu        lockrank.Mutex[lockrank.SuspendedSet]
	byID      map[string]*suspension // guarded by mu
	asleep    map[string]asleepEntry // hibernated rollouts, by response id; guarded by mu
	tails     map[string]*tail       // guarded by mu
	tailOrder *list.List             // of *tail, oldest first; guarded by mu
	tailBytes int                    // guarded by mu; counted in mem too
	mem       *budget.Budget         // the server's memory budget, which the tails count in
	closed    bool                   // the server is shutting down: no rollout is added, no tail kept; guarded by mu
}

func newSuspendedSet(opts *Options, now func() time.Time, mem *budget.Budget) *suspendedSet {
	return &suspendedSet{opts: opts, now: now, mem: mem, byID: make(map[string]*suspension), asleep: make(map[string]asleepEntry),
		tails: make(map[string]*tail), tailOrder: list.New()}
}

// asleepEntry is what a server keeps of a rollout that hibernated here:
// enough to count it against the quotas until it wakes here, or its
// checkpoint's time is up. A rollout woken by another server stays counted
// here until then.
type asleepEntry struct {
	tenant string
	until  time.Time
}

// add lists sp, so that response.resume finds it; it counts against
// Suspension.Max (and its tenant's Tenant.Suspended) until it settles or
// expires. A rollout taken over that this server holds already, awake (a
// takeover racing another for it), is refused.
func (set *suspendedSet) add(sp *suspension) *protocol.Error {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.closed { // Shutdown took its list of them: it would not stop this one
		return errShutdown()
	}
	old := set.byID[sp.id]
	if old != nil && old.awake() {
		return errNoSuspended(sp.id)
	}
	_, waking := set.asleep[sp.id] // it counts already, asleep
	held := func() int {
		n := len(set.byID) + len(set.asleep)
		if old != nil {
			n--
		}
		if waking {
			n--
		}
		return n
	}
	if held() >= set.opts.Suspension.Max {
		set.sweepLocked()
		_, waking = set.asleep[sp.id]
	}
	if held() >= set.opts.Suspension.Max {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTooManySuspended, "suspend",
			"This server already holds %d suspended rollouts. Finish or cancel one, or retry without 'suspend'.", set.opts.Suspension.Max)
	}
	if t := sp.ro.tenant; t != "" {
		n := 0
		for id, other := range set.byID {
			if other.ro.tenant == t && id != sp.id {
				n++
			}
		}
		now := set.now()
		for id, a := range set.asleep {
			if a.tenant == t && id != sp.id && now.Before(a.until) {
				n++
			}
		}
		if n >= set.opts.Tenant.Suspended {
			return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantSuspended, "suspend",
				"Your key's tenant already holds %d suspended rollouts, its limit on this server. Finish or cancel one, or retry without 'suspend'.", n)
		}
	}
	delete(set.asleep, sp.id) // it wakes
	set.byID[sp.id] = sp
	return nil
}

// heldAwake reports whether this server holds rollout id, awake: an event
// naming it from a connection it does not report to is refused, not a
// wake.
func (set *suspendedSet) heldAwake(id string) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	sp := set.byID[id]
	return sp != nil && sp.awake()
}

// sleep lists sp, which hibernated, as asleep: it leaves memory, and its
// checkpoint, kept for ttl, holds it.
func (set *suspendedSet) sleep(sp *suspension, ttl time.Duration) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.byID[sp.id] != sp {
		return
	}
	delete(set.byID, sp.id)
	if !set.closed {
		set.asleep[sp.id] = asleepEntry{tenant: sp.ro.tenant, until: set.now().Add(ttl)}
	}
}

// sweepLocked forgets the rollouts asleep past their checkpoints' time.
func (set *suspendedSet) sweepLocked() {
	now := set.now()
	for id, a := range set.asleep {
		if !now.Before(a.until) {
			delete(set.asleep, id)
		}
	}
}

// remove takes sp off the list (it expired).
func (set *suspendedSet) remove(sp *suspension) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.byID[sp.id] == sp {
		delete(set.byID, sp.id)
	}
}

// lookup is the suspended rollout of response id; nil when there is none.
func (set *suspendedSet) lookup(id string) *suspension {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.byID[id]
}

// all are the suspended rollouts listed.
func (set *suspendedSet) all() []*suspension {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.listLocked()
}

func (set *suspendedSet) listLocked() []*suspension {
	sps := make([]*suspension, 0, len(set.byID))
	for _, sp := range set.byID {
		sps = append(sps, sp)
	}
	return sps
}

// parked are the rollouts of the suspensions parked on their clients.
func (set *suspendedSet) parked() []*rollout {
	set.mu.Lock()
	defer set.mu.Unlock()
	var ros []*rollout
	for _, sp := range set.byID {
		if sp.waitsOnClient() {
			ros = append(ros, sp.ro)
		}
	}
	return ros
}

// close keeps no more tails and lets go of those kept; it returns the
// suspended rollouts, for Shutdown to stop their timers.
func (set *suspendedSet) close() []*suspension {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.closed = true
	clear(set.asleep) // their checkpoints hold them
	for _, t := range set.tails {
		set.dropTailLocked(t)
	}
	return set.listLocked()
}

// retireLocked takes a settled rollout off the list and keeps its tail.
func (set *suspendedSet) retireLocked(sp *suspension, t *tail) {
	if set.byID[sp.id] == sp {
		delete(set.byID, sp.id)
	}
	if t == nil || t.bytes > maxTailBytes || set.closed {
		return
	}
	if old := set.tails[t.id]; old != nil {
		set.dropTailLocked(old)
	}
	t.elem = set.tailOrder.PushBack(t)
	set.tails[t.id] = t
	set.tailBytes += t.bytes
	set.mem.Add(int64(t.bytes)) // kept whatever the room: the oldest go past maxTailBytes
	for set.tailBytes > maxTailBytes {
		set.dropTailLocked(set.tailOrder.Front().Value.(*tail))
	}
	t.expiry = afterFunc(set.opts.Suspension.ResumeWindow, t, set.dropTail) // set.tails holds t meanwhile
}

// lookupTail is the tail of response id, for a resume with creds; nil when
// there is none under them.
func (set *suspendedSet) lookupTail(id, creds string) *tail {
	set.mu.Lock()
	defer set.mu.Unlock()
	if t := set.tails[id]; t != nil && t.creds == creds {
		return t
	}
	return nil
}

// processed lets the tail of response id go: its client says it has read
// the response.
func (set *suspendedSet) processed(id, creds string) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if t := set.tails[id]; t != nil && t.creds == creds {
		set.dropTailLocked(t)
	}
}

func (set *suspendedSet) dropTail(t *tail) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.dropTailLocked(t)
}

func (set *suspendedSet) dropTailLocked(t *tail) {
	if set.tails[t.id] != t {
		return
	}
	delete(set.tails, t.id)
	set.tailOrder.Remove(t.elem)
	set.tailBytes -= t.bytes
	set.mem.Refund(int64(t.bytes))
	if t.expiry != nil {
		t.expiry.Stop()
	}
}
