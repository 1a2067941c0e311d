package runtime

import (
	"context"
	"crypto/subtle"
	"errors"
	"time"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// Checkpoints keeps suspended rollouts' state at their pauses where every
// server that shares it can read it, so that a rollout outlives the process
// that ran it: a response.resume sent to any of them takes the rollout over
// from its last pause. Implementations must be safe for concurrent use.
//
// Ownership is an epoch, and every write is fenced by it. A rollout's server
// writes its checkpoints at the epoch it holds; a server that takes the
// rollout over raises the epoch by one (a compare-and-swap from the epoch it
// read), after which the old owner's writes fail with ErrFenced, and it
// stops that rollout without sending anything more. A checkpoint belongs to
// one tenant: under another it is not there.
type Checkpoints interface {
	// Save writes cp, replacing the rollout's checkpoint before it, unless
	// the stored epoch is higher than cp.Epoch (ErrFenced). It is kept for
	// ttl.
	Save(ctx context.Context, cp *Checkpoint, ttl time.Duration) error
	// Load reads the checkpoint of rollout id of tenant; ErrNoCheckpoint
	// when there is none, or its credentials are not creds.
	Load(ctx context.Context, tenant, id, creds string) (*Checkpoint, error)
	// Take raises the stored epoch of rollout id from epoch to epoch+1, the
	// takeover; ErrFenced when the stored epoch is not epoch (another server
	// took it first, or its owner wrote since), ErrNoCheckpoint when there
	// is none.
	Take(ctx context.Context, tenant, id string, epoch uint64) error
	// Drop ends the rollout's checkpoint, unless a higher epoch owns it:
	// Load and Take find nothing from then on, and the epoch is raised
	// past epoch and kept for ttl, so that no write at epoch or lower (a
	// write of the same owner still in flight, a server that lost the
	// rollout) lands after it. It ends a rollout with no checkpoint yet
	// too.
	Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error
}

// Checkpoint is one suspended rollout's state at a pause.
type Checkpoint struct {
	Tenant string // the tenant whose key created the rollout ("" without keys)
	ID     string // the response id
	Creds  string // hash of the credentials that created it: only they resume it
	Epoch  uint64 // the owner's epoch: 1 for the server that created it, one more at each takeover
	Data   []byte // the state, opaque to the store
}

var (
	// ErrFenced is a checkpoint write or takeover refused because another
	// server owns the rollout now.
	ErrFenced = errors.New("runtime: the rollout's checkpoint belongs to a newer owner")
	// ErrNoCheckpoint is a rollout with no checkpoint (under that tenant and
	// those credentials).
	ErrNoCheckpoint = errors.New("runtime: no checkpoint of that rollout")
)

// MemoryCheckpoints is Checkpoints in this process's memory, with the same
// fencing as a shared store: servers in one process (tests, an embedder's
// several Servers) can take rollouts over from each other with it. It
// keeps nothing across a restart.
type MemoryCheckpoints struct {
	now func() time.Time // time.Now unless a test sets it

	mu  lockrank.Mutex[lockrank.Checkpoints]
	cps map[checkpointKey]memCheckpoint // guarded by mu
}

type checkpointKey struct{ tenant, id string }

type memCheckpoint struct {
	cp      Checkpoint
	expires time.Time
	ended   bool // dropped: only its epoch is kept, to fence
}

// NewMemoryCheckpoints returns an empty MemoryCheckpoints.
func NewMemoryCheckpoints() *MemoryCheckpoints {
	return &MemoryCheckpoints{now: time.Now, cps: make(map[checkpointKey]memCheckpoint)}
}

// lookupLocked is the live checkpoint under k; expired ones are dropped.
func (m *MemoryCheckpoints) lookupLocked(k checkpointKey) (memCheckpoint, bool) {
	c, ok := m.cps[k]
	if ok && !m.now().Before(c.expires) {
		delete(m.cps, k)
		return memCheckpoint{}, false
	}
	return c, ok
}

// Save implements Checkpoints.
func (m *MemoryCheckpoints) Save(_ context.Context, cp *Checkpoint, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{cp.Tenant, cp.ID}
	if old, ok := m.lookupLocked(k); ok && old.cp.Epoch > cp.Epoch {
		return ErrFenced
	}
	c := *cp
	c.Data = append([]byte(nil), cp.Data...)
	m.cps[k] = memCheckpoint{cp: c, expires: m.now().Add(ttl)}
	return nil
}

// Load implements Checkpoints.
func (m *MemoryCheckpoints) Load(_ context.Context, tenant, id, creds string) (*Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.lookupLocked(checkpointKey{tenant, id})
	if !ok || c.ended || subtle.ConstantTimeCompare([]byte(c.cp.Creds), []byte(creds)) != 1 {
		return nil, ErrNoCheckpoint
	}
	cp := c.cp
	cp.Data = append([]byte(nil), c.cp.Data...)
	return &cp, nil
}

// Take implements Checkpoints.
func (m *MemoryCheckpoints) Take(_ context.Context, tenant, id string, epoch uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{tenant, id}
	c, ok := m.lookupLocked(k)
	switch {
	case !ok || c.ended:
		return ErrNoCheckpoint
	case c.cp.Epoch != epoch:
		return ErrFenced
	}
	c.cp.Epoch++
	m.cps[k] = c
	return nil
}

// Drop implements Checkpoints.
func (m *MemoryCheckpoints) Drop(_ context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey{tenant, id}
	if c, ok := m.lookupLocked(k); ok && c.cp.Epoch > epoch {
		return nil
	}
	m.cps[k] = memCheckpoint{cp: Checkpoint{Tenant: tenant, ID: id, Epoch: epoch + 1}, expires: m.now().Add(ttl), ended: true}
	return nil
}
