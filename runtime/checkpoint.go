package runtime

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// Checkpoints keeps suspended rollouts' journals where every server that
// shares it can read them, so that a rollout outlives the process that ran
// it: a response.resume sent to any of them takes the rollout over from its
// last pause. Implementations must be safe for concurrent use.
//
// A journal is a small head, rewritten at each write, and entries, only
// ever appended, so that a pause writes what it adds to the rollout, never
// its whole context again; a write may begin the journal anew (Reset), with
// a snapshot of the rollout, as its first write does and a compaction.
// Heads and entries are opaque to the store.
//
// Ownership is an epoch, and every write is fenced by it. A rollout's server
// writes its journal at the epoch it holds; a server that takes the rollout
// over raises the epoch by one (a compare-and-swap from the epoch it read),
// after which the old owner's writes fail with ErrFenced, and it stops that
// rollout without sending anything more. A journal belongs to one tenant:
// under another it is not there.
//
// A live owner also holds a lease, so that a rollout is not taken from a
// server that still runs it (one response, one outcome): a Write or a Take
// leases the rollout to its caller for Lease.TTL of the store's clock, and
// the owner renews its leases (Renew) while it runs them or a client
// follows them, and releases one (Release) when it lets the rollout go.
// While another owner's lease is live, Take refuses (ErrOwnedElsewhere); a
// dead owner's rollout is taken once its lease runs out.
type Checkpoints interface {
	// Write applies w to the rollout's journal in one atomic step: the
	// head replaced and the entries appended, or with w.Reset the journal
	// begun anew with them. It refuses, changing nothing, when the stored
	// epoch is higher than w.Epoch (ErrFenced), or, without Reset, when
	// the journal does not hold exactly w.At entries (ErrJournalGap: an
	// earlier write was lost, or landed after its caller gave up on it).
	// The journal is kept for ttl.
	Write(ctx context.Context, w *JournalWrite, ttl time.Duration) error
	// Load reads the journal of rollout id of tenant, whole; ErrNoCheckpoint
	// when there is none, or its credentials are not creds.
	Load(ctx context.Context, tenant, id, creds string) (*Journal, error)
	// Take raises the stored epoch of rollout id from epoch to epoch+1, the
	// takeover, and leases it to lease.Owner; ErrFenced when the stored
	// epoch is not epoch (another server took it first, or its owner wrote
	// since), ErrNoCheckpoint when there is none, ErrOwnedElsewhere while
	// another owner's lease is live.
	Take(ctx context.Context, tenant, id string, epoch uint64, lease Lease) error
	// Renew extends lease.Owner's lease of each rollout in refs that the
	// store still has at the ref's epoch, for lease.TTL from now, and keeps
	// its journal for ttl from now at least (a live rollout's journal does
	// not expire), in one round trip; lost[i] reports that refs[i] is no
	// longer there at its epoch (taken over, dropped or expired): its
	// owner lost it. An error says nothing of any.
	Renew(ctx context.Context, lease Lease, refs []LeaseRef, ttl time.Duration) (lost []bool, err error)
	// Release ends owner's leases of refs, at their epochs, so that
	// another server may take those rollouts over at once; a lease of
	// another owner or epoch is left as it is.
	Release(ctx context.Context, owner string, refs []LeaseRef) error
	// Drop ends the rollout's journal, unless a higher epoch owns it:
	// Load and Take find nothing from then on, and the epoch is raised
	// past epoch and kept for ttl, so that no write at epoch or lower (a
	// write of the same owner still in flight, a server that lost the
	// rollout) lands after it. It ends a rollout with no journal yet too.
	Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error
}

// Journal is one suspended rollout's journal as a store holds it.
type Journal struct {
	Tenant  string   // the tenant whose key created the rollout ("" without keys)
	ID      string   // the response id
	Creds   string   // hash of the credentials that created it: only they resume it
	Epoch   uint64   // the owner's epoch: 1 for the server that created it, one more at each takeover
	Head    []byte   // the head, opaque to the store
	Entries [][]byte // the entries, oldest first, opaque to the store
}

// JournalWrite is one write of a rollout's journal (Checkpoints.Write).
type JournalWrite struct {
	Tenant, ID, Creds string
	Epoch             uint64
	// Reset begins the journal anew with Entries; otherwise they are
	// appended to the At entries it holds.
	Reset   bool
	At      int
	Head    []byte   // replaces the head
	Entries [][]byte // appended
	// Lease is the writer's: a write leases the rollout to its owner.
	Lease Lease
}

// Lease is a server's hold on the rollouts it runs: its owner id, unique
// to the process, and how long a lease lasts from the store's now unless
// renewed.
type Lease struct {
	Owner string
	TTL   time.Duration
}

// LeaseRef names one rollout's lease: the journal, and the epoch its
// owner holds it at.
type LeaseRef struct {
	Tenant, ID string
	Epoch      uint64
}

var (
	// ErrFenced is a journal write or takeover refused because another
	// server owns the rollout now.
	ErrFenced = errors.New("runtime: the rollout's checkpoint belongs to a newer owner")
	// ErrNoCheckpoint is a rollout with no journal (under that tenant and
	// those credentials).
	ErrNoCheckpoint = errors.New("runtime: no checkpoint of that rollout")
	// ErrJournalGap is a journal write refused because the journal does
	// not hold the entries its writer counted: the writer begins it anew.
	ErrJournalGap = errors.New("runtime: the rollout's journal is not where its writer left it")
	// ErrOwnedElsewhere is a takeover refused because another server,
	// whose lease is live, runs the rollout.
	ErrOwnedElsewhere = errors.New("runtime: another server's lease on the rollout is live")
)

// MemoryCheckpoints is Checkpoints in this process's memory, with the same
// fencing as a shared store: servers in one process (tests, an embedder's
// several Servers) can take rollouts over from each other with it. It
// keeps nothing across a restart.
type MemoryCheckpoints struct {
	now func() time.Time // time.Now unless a test sets it

	mu       lockrank.Mutex[lockrank.Checkpoints]
	journals map[checkpointKey]memJournal // guarded by mu
}

type checkpointKey struct{ tenant, id string }

type memJournal struct {
	j       Journal
	expires time.Time
	ended   bool // dropped: only its epoch is kept, to fence
	owner   string
	leased  time.Time // the owner's lease ends then
}

// NewMemoryCheckpoints returns an empty MemoryCheckpoints.
func NewMemoryCheckpoints() *MemoryCheckpoints {
	return &MemoryCheckpoints{now: time.Now, journals: make(map[checkpointKey]memJournal)}
}

// lookupLocked is the live journal under k; expired ones are dropped.
func (m *MemoryCheckpoints) lookupLocked(k checkpointKey) (memJournal, bool) {
	c, ok := m.journals[k]
	if ok && !m.now().Before(c.expires) {
		delete(m.journals, k)
		return memJournal{}, false
	}
	return c, ok
}

// Write implements Checkpoints. The entries are copied; those already
// held are shared with nothing outside, so an append copies no more.
func (m *MemoryCheckpoints) Write(_ context.Context, w *JournalWrite, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{w.Tenant, w.ID}
	old, ok := m.lookupLocked(k)
	switch {
	case ok && old.j.Epoch > w.Epoch:
		return ErrFenced
	case !w.Reset && (!ok || old.ended || len(old.j.Entries) != w.At):
		return ErrJournalGap
	}
	j := Journal{Tenant: w.Tenant, ID: w.ID, Creds: w.Creds, Epoch: w.Epoch, Head: bytes.Clone(w.Head)}
	if !w.Reset {
		j.Entries = old.j.Entries[:len(old.j.Entries):len(old.j.Entries)]
	}
	for _, e := range w.Entries {
		j.Entries = append(j.Entries, bytes.Clone(e))
	}
	now := m.now()
	m.journals[k] = memJournal{j: j, expires: now.Add(ttl), owner: w.Lease.Owner, leased: now.Add(w.Lease.TTL)}
	return nil
}

// Load implements Checkpoints.
func (m *MemoryCheckpoints) Load(_ context.Context, tenant, id, creds string) (*Journal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.lookupLocked(checkpointKey{tenant, id})
	if !ok || c.ended || subtle.ConstantTimeCompare([]byte(c.j.Creds), []byte(creds)) != 1 {
		return nil, ErrNoCheckpoint
	}
	j := c.j
	j.Head = bytes.Clone(c.j.Head)
	j.Entries = make([][]byte, len(c.j.Entries))
	for i, e := range c.j.Entries {
		j.Entries[i] = bytes.Clone(e)
	}
	return &j, nil
}

// Take implements Checkpoints.
func (m *MemoryCheckpoints) Take(_ context.Context, tenant, id string, epoch uint64, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{tenant, id}
	c, ok := m.lookupLocked(k)
	switch {
	case !ok || c.ended:
		return ErrNoCheckpoint
	case c.j.Epoch != epoch:
		return ErrFenced
	case c.owner != lease.Owner && m.now().Before(c.leased):
		return ErrOwnedElsewhere
	}
	c.j.Epoch++
	c.owner, c.leased = lease.Owner, m.now().Add(lease.TTL)
	m.journals[k] = c
	return nil
}

// Renew implements Checkpoints.
func (m *MemoryCheckpoints) Renew(_ context.Context, lease Lease, refs []LeaseRef, ttl time.Duration) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lost := make([]bool, len(refs))
	for i, r := range refs {
		k := checkpointKey{r.Tenant, r.ID}
		c, ok := m.lookupLocked(k)
		if !ok || c.ended || c.j.Epoch != r.Epoch {
			lost[i] = true
			continue
		}
		now := m.now()
		c.owner, c.leased, c.expires = lease.Owner, now.Add(lease.TTL), later(c.expires, now.Add(ttl))
		m.journals[k] = c
	}
	return lost, nil
}

// Release implements Checkpoints.
func (m *MemoryCheckpoints) Release(_ context.Context, owner string, refs []LeaseRef) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range refs {
		k := checkpointKey{r.Tenant, r.ID}
		if c, ok := m.lookupLocked(k); ok && c.j.Epoch == r.Epoch && c.owner == owner {
			c.leased = time.Time{}
			m.journals[k] = c
		}
	}
	return nil
}

// Drop implements Checkpoints.
func (m *MemoryCheckpoints) Drop(_ context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{tenant, id}
	if c, ok := m.lookupLocked(k); ok && c.j.Epoch > epoch {
		return nil
	}
	m.journals[k] = memJournal{j: Journal{Tenant: tenant, ID: id, Epoch: epoch + 1}, expires: m.now().Add(ttl), ended: true}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
