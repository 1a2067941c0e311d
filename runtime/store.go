package runtime

import (
	"context"
	"sync"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Record is what the store keeps of one response: the response object, the
// input items sent with it, and every item the response added to the
// conversation, in order (its input, then each step's output and, for a
// suspended rollout, the tool outputs and steering messages appended between
// steps). The conversation before it is reached through
// Response.PreviousResponseID.
type Record struct {
	Response *protocol.Response
	Input    protocol.Items
	Items    protocol.Items // nil in records that predate it: Input then Output
	// Prompt is the whole conversation up to and including this response,
	// rendered, when the server keeps tokens with records (Cost.StoreTokens);
	// nil otherwise, and a store that cannot keep it may drop it.
	Prompt *sampler.Prompt
	// Tenant is the tenant whose key created the response ("" without
	// keys): only that tenant reads, continues or deletes it.
	Tenant string
}

// added is what the record contributes to the conversation.
func (rec *Record) added() protocol.Items {
	if rec.Items != nil {
		return rec.Items
	}
	return append(append(protocol.Items{}, rec.Input...), rec.Response.Output...)
}

// Store keeps responses created with store: true. Implementations must be
// safe for concurrent use and must treat records as immutable.
type Store interface {
	Put(ctx context.Context, rec *Record) error
	Get(ctx context.Context, id string) (*Record, error)
	Delete(ctx context.Context, id string) error
}

// scopedStore is the server's view of its Store: every record belongs to
// the tenant of the context it was put with, and another tenant's id reads
// exactly as an unknown one (ErrNotStored), for Get and Delete alike.
type scopedStore struct{ Store }

func (st scopedStore) Put(ctx context.Context, rec *Record) error {
	own := *rec
	own.Tenant = Tenant(ctx)
	return st.Store.Put(ctx, &own)
}

func (st scopedStore) Get(ctx context.Context, id string) (*Record, error) {
	rec, err := st.Store.Get(ctx, id)
	if err == nil && rec.Tenant != Tenant(ctx) {
		return nil, ErrNotStored
	}
	return rec, err
}

func (st scopedStore) Delete(ctx context.Context, id string) error {
	if _, err := st.Get(ctx, id); err != nil {
		return err
	}
	return st.Store.Delete(ctx, id)
}

// MemoryStore is the default Store: a map guarded by a mutex, holding at
// most Max records (the oldest go first).
type MemoryStore struct {
	max int

	mu    sync.RWMutex
	recs  map[string]*Record // guarded by mu
	order []string           // ids, oldest first, guarded by mu
}

// DefaultStoreMax is how many responses a MemoryStore keeps by default.
const DefaultStoreMax = 100_000

// NewMemoryStore returns an empty in-memory store that keeps at most max
// records; max <= 0 means DefaultStoreMax.
func NewMemoryStore(max int) *MemoryStore {
	if max <= 0 {
		max = DefaultStoreMax
	}
	return &MemoryStore{max: max, recs: make(map[string]*Record)}
}

// Put stores rec under its response id, dropping the oldest record when full.
func (m *MemoryStore) Put(_ context.Context, rec *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[rec.Response.ID]; !ok {
		m.order = append(m.order, rec.Response.ID)
	}
	m.recs[rec.Response.ID] = rec
	for len(m.recs) > m.max && len(m.order) > 0 {
		delete(m.recs, m.order[0])
		m.order = m.order[1:]
	}
	if len(m.order) > 2*m.max { // ids of deleted records linger: compact
		live := m.order[:0:0]
		for _, id := range m.order {
			if _, ok := m.recs[id]; ok {
				live = append(live, id)
			}
		}
		m.order = live
	}
	return nil
}

// Get returns the record for id, or ErrNotStored.
func (m *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	m.mu.RLock()
	rec, ok := m.recs[id]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotStored
	}
	return rec, nil
}

// Delete removes id, or returns ErrNotStored.
func (m *MemoryStore) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[id]; !ok {
		return ErrNotStored
	}
	delete(m.recs, id)
	return nil
}

// loadChain rebuilds the whole context that ends with response id: every
// stored input and output from the first response of the chain on.
func loadChain(ctx context.Context, st Store, id string) (*Record, protocol.Items, error) {
	var recs []*Record
	for cur := id; cur != ""; {
		rec, err := st.Get(ctx, cur)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, rec)
		cur = ""
		if p := rec.Response.PreviousResponseID; p != nil {
			cur = *p
		}
		if len(recs) > 100000 {
			return nil, nil, errChainTooLong
		}
	}
	var items protocol.Items
	for i := len(recs) - 1; i >= 0; i-- {
		items = append(items, recs[i].added()...)
	}
	return recs[0], items, nil
}
