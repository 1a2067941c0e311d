package runtime

import (
	"context"
	"slices"
	"time"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// BackgroundStore keeps background responses where every server that
// shares it reads them, so that a background response is one response
// whichever server a client asks: its record (the request that made it, the
// response as it stands, whether it has ended), and, for one created with
// stream: true, its event log, which a stream resumed on another server
// replays and then follows live. Implementations must be safe for
// concurrent use. What one is given and what it returns are the caller's:
// it keeps, and hands out, copies.
//
// Ownership is an epoch and a lease, as for Checkpoints: the server that
// runs a response writes at the epoch it holds, each write renewing its
// lease for Lease.TTL of the store's clock; a server that finds the lease
// run out (its owner died) takes the response over, raising the epoch, and
// the old owner's writes fail with ErrFenced from then on. A record belongs
// to one tenant: under another it is not there.
type BackgroundStore interface {
	// CreateBackground records a new background response, with its first
	// events, leased to lease.Owner at epoch 1.
	CreateBackground(ctx context.Context, rec *BackgroundRecord, events [][]byte, lease Lease) error
	// WriteBackground appends w.Events to the response's log, which must
	// hold exactly w.At events (ErrJournalGap otherwise), replaces its
	// response when w.Response is not nil, marks it ended with w.Ended,
	// and renews w.Lease; ErrFenced when the stored epoch is not w.Epoch,
	// ErrNotStored when there is no such response. It reports whether a
	// cancel was asked (CancelBackground). Once ended, the record and its
	// log are kept for w.Keep.
	WriteBackground(ctx context.Context, w *BackgroundWrite) (cancelAsked bool, err error)
	// GetBackground reads the record, without its events; ErrNotStored
	// when there is none.
	GetBackground(ctx context.Context, tenant, id string) (*BackgroundRecord, error)
	// BackgroundEvents is the response's events after sequence number
	// after (every one, for any after below 0), waiting up to wait for one
	// while there is none; none, and no error, when wait passed; ctx's
	// error when ctx ended first. ErrNotStored when there is no such
	// response.
	BackgroundEvents(ctx context.Context, tenant, id string, after int, wait time.Duration) ([][]byte, error)
	// CancelBackground asks the response's owner to cancel it (its next
	// WriteBackground reports it); ErrNotStored when there is none.
	CancelBackground(ctx context.Context, tenant, id string) error
	// TakeBackground raises the response's epoch from epoch to epoch+1
	// and leases it to lease.Owner: ErrOwnedElsewhere while its owner's
	// lease is live, ErrFenced when the epoch is not epoch any more,
	// ErrNotStored when there is none.
	TakeBackground(ctx context.Context, tenant, id string, epoch uint64, lease Lease) error
}

// BackgroundRecord is a background response as a BackgroundStore keeps it.
type BackgroundRecord struct {
	Tenant, ID string
	Epoch      uint64 // its owner's; 1 at its create
	Owner      string // the server whose lease it is
	Leased     bool   // the owner's lease is live (as the store's clock has it)
	Request    []byte // the create's request, JSON: a takeover runs it again
	Response   []byte // the response as it stands, JSON
	Stream     bool   // created with stream: true: its events are logged
	Events     int    // how many are logged
	Ended      bool   // its terminal event is logged
	Cancel     bool   // a cancel was asked
}

// BackgroundWrite is one write of a background response's owner.
type BackgroundWrite struct {
	Tenant, ID string
	Epoch      uint64
	Lease      Lease
	At         int      // the events logged before these
	Events     [][]byte // its events after them, in order
	Response   []byte   // the response as it stands now, JSON; nil: as it was
	Ended      bool
	Keep       time.Duration // how long it is kept once ended
}

// MemoryBackgrounds is BackgroundStore in this process's memory, with the
// same fencing and leases as a shared store: servers in one process (tests,
// an embedder's several Servers) read and take over each other's background
// responses with it. It keeps nothing across a restart.
type MemoryBackgrounds struct {
	now func() time.Time // time.Now unless a test sets it

	mu       lockrank.Mutex[lockrank.BackgroundStore]
	byKey    map[checkpointKey]*memBackground // guarded by mu
	appended chan struct{}                    // closed, and made anew, at each write; guarded by mu
}

type memBackground struct {
	rec     BackgroundRecord
	events  [][]byte
	leased  time.Time // the owner's lease ends then
	expires time.Time // once ended: it is let go then
}

// NewMemoryBackgrounds returns an empty MemoryBackgrounds.
func NewMemoryBackgrounds() *MemoryBackgrounds {
	return &MemoryBackgrounds{now: time.Now, byKey: map[checkpointKey]*memBackground{}, appended: make(chan struct{})}
}

func (m *MemoryBackgrounds) lookupLocked(tenant, id string) (*memBackground, bool) {
	k := checkpointKey{tenant, id}
	b, ok := m.byKey[k]
	if ok && b.rec.Ended && !m.now().Before(b.expires) {
		delete(m.byKey, k)
		return nil, false
	}
	return b, ok
}

func (m *MemoryBackgrounds) wakeLocked() {
	close(m.appended)
	m.appended = make(chan struct{})
}

// CreateBackground implements BackgroundStore.
func (m *MemoryBackgrounds) CreateBackground(_ context.Context, rec *BackgroundRecord, events [][]byte, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &memBackground{rec: *rec, events: cloneFrames(events), leased: m.now().Add(lease.TTL)}
	b.rec.Epoch, b.rec.Owner, b.rec.Events = 1, lease.Owner, len(events)
	b.rec.Request, b.rec.Response = slices.Clone(rec.Request), slices.Clone(rec.Response)
	m.byKey[checkpointKey{rec.Tenant, rec.ID}] = b
	m.wakeLocked()
	return nil
}

// WriteBackground implements BackgroundStore.
func (m *MemoryBackgrounds) WriteBackground(_ context.Context, w *BackgroundWrite) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.lookupLocked(w.Tenant, w.ID)
	switch {
	case !ok:
		return false, ErrNotStored
	case b.rec.Epoch != w.Epoch:
		return false, ErrFenced
	case b.rec.Events != w.At:
		return false, ErrJournalGap
	}
	now := m.now()
	b.events = append(b.events, cloneFrames(w.Events)...)
	b.rec.Events = len(b.events)
	if w.Response != nil {
		b.rec.Response = slices.Clone(w.Response)
	}
	b.rec.Owner, b.leased = w.Lease.Owner, now.Add(w.Lease.TTL)
	if w.Ended {
		b.rec.Ended, b.expires = true, now.Add(w.Keep)
	}
	m.wakeLocked()
	return b.rec.Cancel, nil
}

// GetBackground implements BackgroundStore.
func (m *MemoryBackgrounds) GetBackground(_ context.Context, tenant, id string) (*BackgroundRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.lookupLocked(tenant, id)
	if !ok {
		return nil, ErrNotStored
	}
	rec := b.rec
	rec.Request, rec.Response = slices.Clone(b.rec.Request), slices.Clone(b.rec.Response)
	rec.Leased = m.now().Before(b.leased)
	return &rec, nil
}

// BackgroundEvents implements BackgroundStore.
func (m *MemoryBackgrounds) BackgroundEvents(ctx context.Context, tenant, id string, after int, wait time.Duration) ([][]byte, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	from := max(after+1, 0) // any after below 0 is every event
	for {
		m.mu.Lock()
		b, ok := m.lookupLocked(tenant, id)
		var events [][]byte
		if ok {
			events = cloneFrames(b.events[min(from, len(b.events)):])
		}
		appended := m.appended
		m.mu.Unlock()
		switch {
		case !ok:
			return nil, ErrNotStored
		case len(events) > 0:
			return events, nil
		}
		select {
		case <-appended:
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CancelBackground implements BackgroundStore.
func (m *MemoryBackgrounds) CancelBackground(_ context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.lookupLocked(tenant, id)
	if !ok {
		return ErrNotStored
	}
	b.rec.Cancel = true
	return nil
}

// TakeBackground implements BackgroundStore.
func (m *MemoryBackgrounds) TakeBackground(_ context.Context, tenant, id string, epoch uint64, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.lookupLocked(tenant, id)
	now := m.now()
	switch {
	case !ok:
		return ErrNotStored
	case b.rec.Epoch != epoch:
		return ErrFenced
	case now.Before(b.leased) && b.rec.Owner != lease.Owner:
		return ErrOwnedElsewhere
	}
	b.rec.Epoch, b.rec.Owner, b.leased = epoch+1, lease.Owner, now.Add(lease.TTL)
	return nil
}

func cloneFrames(frames [][]byte) [][]byte {
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = slices.Clone(f)
	}
	return out
}
