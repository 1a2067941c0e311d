package runtime

import (
	"container/list"
	"context"
	"errors"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/sampler"
)

// Record is what the store keeps of one response: the response object, its
// input items, and every item the response added to the conversation, in
// order (its input, then each step's output and, for a suspended rollout,
// the tool outputs and steering messages appended between steps). The
// conversation before it is reached through Response.PreviousResponseID.
type Record struct {
	Response *protocol.Response
	// Input is the items the create sent, as sent.
	Input protocol.Items
	Items protocol.Items // nil in records that predate it: Input then Output
	// Prompt is the whole conversation up to and including this response,
	// rendered, when the server keeps tokens with records (Options.StoreTokens);
	// nil otherwise, and a store that cannot keep it may drop it.
	Prompt *sampler.Prompt
	// Tenant is the tenant whose key created the response ("" without
	// keys): only that tenant reads, continues or deletes it.
	Tenant string
	// Chain is the ids of the stored responses whose items come before
	// this one's, oldest first, when the server knows them: a store may
	// load a whole conversation by them at once (ChainStore).
	Chain []string
}

// inputs are what input_items lists: the create's input, then what the
// client appended while the response ran (a suspended rollout's tool
// outputs and steering messages), in the order it joined the context:
// the items after the input that are not the response's output (known by
// type and id: a client's output may carry its call's id). Derived, not
// stored twice: a long rollout's appended outputs are most of it. An
// item_reference in the input is listed as the item it named (the API's
// item union has no reference), which the record's context holds.
func (rec *Record) inputs() protocol.Items {
	items := slices.Clip(rec.Input)
	isRef := func(it protocol.Item) bool { _, ok := it.(*protocol.ItemReferenceItem); return ok }
	if slices.ContainsFunc(items, isRef) {
		items = slices.Clone(items) // rec is immutable
		for i, it := range items {
			if ref, ok := it.(*protocol.ItemReferenceItem); ok {
				if found := findItem(rec.Items, ref.ID); found != nil {
					items[i] = found
				}
			}
		}
	}
	if len(rec.Items) <= len(rec.Input) {
		return items
	}
	type key struct {
		typ protocol.ItemType
		id  string
	}
	out := make(map[key]bool, len(rec.Response.Output))
	for _, it := range rec.Response.Output {
		out[key{it.ItemType(), it.ItemID()}] = true
	}
	for _, it := range rec.Items[len(rec.Input):] {
		if id := it.ItemID(); id == "" || !out[key{it.ItemType(), id}] {
			items = append(items, it)
		}
	}
	return items
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

// ItemStore is a Store that finds a stored item by its id: the record of
// a response that holds it (under the context's tenant, as Get), or
// ErrNotStored. An item_reference then names any item a stored response
// of the tenant holds, as the API's does; without it, only the items of
// the previous_response_id chain.
type ItemStore interface {
	GetItemRecord(ctx context.Context, itemID string) (*Record, error)
}

// ChainStore is a Store that loads a whole conversation at once: the
// record of id, then the records before it, newest first (package redisstore: in
// two round trips, by Record.Chain). A store without it is read a record
// at a time, following PreviousResponseID.
type ChainStore interface {
	GetChain(ctx context.Context, id string) ([]*Record, error)
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

// GetChain loads by the inner store's ChainStore, when it has one (nil,
// nil when it has not), with every record checked as Get checks it.
func (st scopedStore) GetChain(ctx context.Context, id string) ([]*Record, error) {
	cs, ok := st.Store.(ChainStore)
	if !ok {
		return nil, nil
	}
	recs, err := cs.GetChain(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.Tenant != Tenant(ctx) {
			return nil, ErrNotStored
		}
	}
	return recs, nil
}

// GetItemRecord finds by the inner store's ItemStore, when it has one
// (ErrNotStored when it has not), with the record checked as Get checks
// it.
func (st scopedStore) GetItemRecord(ctx context.Context, itemID string) (*Record, error) {
	is, ok := st.Store.(ItemStore)
	if !ok {
		return nil, ErrNotStored
	}
	rec, err := is.GetItemRecord(ctx, itemID)
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

// MemoryStore is the default Store: records in memory, bounded by count
// and by bytes, in all and per tenant. It keeps the segments context
// compactions refer to too (CompactionSegments, store_segments.go),
// counted in its bytes and dropped as records are. A record's bytes are
// what it holds in memory: its encoded size (the response, its input and
// items, and its tokens when kept) and its structs' and indexes'
// overhead. Past a bound the oldest records and segments go first: the
// tenant's own oldest for its bound, the oldest of all for the others. A
// record larger than a bound on its own is not kept (Put returns
// ErrTooLarge; the response is served all the same, and reads as not
// stored).
type MemoryStore struct {
	opts MemoryStoreOptions

	mu      lockrank.RWMutex[lockrank.Store]
	recs    map[string]*stored     // guarded by mu
	items   map[itemKey]*stored    // the latest record of each tenant holding each item id; guarded by mu
	segs    map[segmentKey]*stored // compaction segments (store_segments.go); guarded by mu
	all     list.List              // of *stored, records and segments, oldest first; guarded by mu
	tenants map[string]*tenantRecords
	bytes   int // guarded by mu
}

// MemoryStoreOptions bound a MemoryStore (and a server's
// MemoryConversations); zero fields take the defaults. In a server's
// Options, MaxBytes defaults to a quarter of Limits.MaxMemory when that is
// set, and MaxTenantBytes to all of MaxBytes without Keys.
type MemoryStoreOptions struct {
	MaxRecords     int // DefaultStoreMax
	MaxBytes       int // DefaultStoreBytes
	MaxTenantBytes int // a quarter of MaxBytes
}

// itemKey is an item id under a tenant: one tenant's item ids never hide
// another's.
type itemKey struct{ tenant, id string }

// stored is a record, or a compaction segment (seg, when rec is nil),
// in the store's lists.
type stored struct {
	rec       *Record
	seg       *segment
	bytes     int
	all, mine *list.Element
}

// tenant is whose it is.
func (e *stored) tenant() string {
	if e.rec == nil {
		return e.seg.key.tenant
	}
	return e.rec.Tenant
}

// tenantRecords are one tenant's records and segments, oldest first, and
// their bytes.
type tenantRecords struct {
	list  list.List
	bytes int
}

// The default bounds of a MemoryStore on its own, and of a server's
// without a memory budget.
const (
	DefaultStoreMax         = 100_000
	DefaultStoreBytes       = 1 << 30
	DefaultTenantStoreBytes = DefaultStoreBytes / tenantShareOfStore
)

// ErrTooLarge is a record larger than a store's bound on its own.
var ErrTooLarge = errors.New("runtime: record larger than the store's bound")

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore(opts MemoryStoreOptions) *MemoryStore {
	opts.setDefaults()
	return &MemoryStore{opts: opts, recs: make(map[string]*stored), items: make(map[itemKey]*stored), segs: make(map[segmentKey]*stored),
		tenants: make(map[string]*tenantRecords)}
}

// A record in memory holds more than its encoding: the structs behind its
// response and items, the store's index entries (by id, by item id, in its
// lists). Measured (TestStoreMemory): small records of a few KB took about
// 1.3× their encoded size until these were counted; 0.95× since.
const (
	recordOverhead = 512 // the response's struct and fields, the record, its entries in the store's maps and lists
	itemOverhead   = 64  // an item's struct and interface, its entry in the item index
)

// recordBytes is what a record holds in memory: its encoded size (as a
// store would write it) and the overheads of its structs and indexes.
func recordBytes(rec *Record) int {
	n := recordOverhead + itemOverhead*(len(rec.Input)+len(rec.Items)+len(rec.Response.Output))
	for _, v := range []any{rec.Response, rec.Input, rec.Items} {
		if b, err := protocol.Marshal(v); err == nil {
			n += len(b)
		}
	}
	if rec.Prompt != nil {
		n += 4 * rec.Prompt.Len()
	}
	return n
}

// Put stores rec under its response id, replacing a record of that id and
// making room as the bounds say.
func (m *MemoryStore) Put(_ context.Context, rec *Record) error {
	size := recordBytes(rec)
	if size > m.opts.MaxBytes || size > m.opts.MaxTenantBytes {
		return ErrTooLarge
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.recs[rec.Response.ID]; old != nil {
		m.removeLocked(old)
	}
	e := &stored{rec: rec, bytes: size}
	m.recs[rec.Response.ID] = e
	for _, it := range rec.added() {
		if id := it.ItemID(); id != "" {
			m.items[itemKey{rec.Tenant, id}] = e
		}
	}
	m.addLocked(e)
	return nil
}

// addLocked puts e, indexed already, last in the lists, and makes room
// as the bounds say: the tenant's oldest first for its bound, the oldest
// of all for the others.
func (m *MemoryStore) addLocked(e *stored) {
	t := m.tenants[e.tenant()]
	if t == nil {
		t = new(tenantRecords)
		m.tenants[e.tenant()] = t
	}
	e.all, e.mine = m.all.PushBack(e), t.list.PushBack(e)
	m.bytes += e.bytes
	t.bytes += e.bytes
	for t.bytes > m.opts.MaxTenantBytes {
		m.removeLocked(t.list.Front().Value.(*stored))
	}
	for len(m.recs) > m.opts.MaxRecords || m.bytes > m.opts.MaxBytes {
		m.removeLocked(m.all.Front().Value.(*stored))
	}
}

func (m *MemoryStore) removeLocked(e *stored) {
	if e.rec == nil {
		delete(m.segs, e.seg.key)
	} else {
		delete(m.recs, e.rec.Response.ID)
		for _, it := range e.rec.added() {
			if k := (itemKey{e.rec.Tenant, it.ItemID()}); k.id != "" && m.items[k] == e {
				delete(m.items, k)
			}
		}
	}
	m.all.Remove(e.all)
	t := m.tenants[e.tenant()]
	t.list.Remove(e.mine)
	t.bytes -= e.bytes
	m.bytes -= e.bytes
	if t.list.Len() == 0 {
		delete(m.tenants, e.tenant())
	}
}

// Get returns the record for id, or ErrNotStored.
func (m *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	m.mu.RLock()
	e, ok := m.recs[id]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotStored
	}
	return e.rec, nil
}

// GetItemRecord returns the latest record of the context's tenant that
// holds item itemID, or ErrNotStored (ItemStore).
func (m *MemoryStore) GetItemRecord(ctx context.Context, itemID string) (*Record, error) {
	m.mu.RLock()
	e, ok := m.items[itemKey{Tenant(ctx), itemID}]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotStored
	}
	return e.rec, nil
}

// Delete removes id, or returns ErrNotStored.
func (m *MemoryStore) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.recs[id]
	if !ok {
		return ErrNotStored
	}
	m.removeLocked(e)
	return nil
}

// loadChain rebuilds the whole context that ends with response id: every
// stored input and output from the first response of the chain on, and
// the ids of the responses it came from, oldest first.
func loadChain(ctx context.Context, st Store, id string) (*Record, protocol.Items, []string, error) {
	var recs []*Record
	cur := id
	if cs, ok := st.(ChainStore); ok {
		all, err := cs.GetChain(ctx, id)
		if err != nil {
			return nil, nil, nil, err
		}
		// Linked as far as the records go; a gap (a record written
		// without its chain) is read a link at a time from there.
		for i, rec := range all {
			if i > 0 && prevID(recs[i-1]) != rec.Response.ID {
				break
			}
			recs = append(recs, rec)
		}
		cur = id
		if len(recs) > 0 {
			cur = prevID(recs[len(recs)-1])
		}
	}
	for cur != "" {
		rec, err := st.Get(ctx, cur)
		if err != nil {
			return nil, nil, nil, err
		}
		recs = append(recs, rec)
		cur = prevID(rec)
		if len(recs) > 100000 {
			return nil, nil, nil, errChainTooLong
		}
	}
	var items protocol.Items
	chain := make([]string, 0, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		items = append(items, recs[i].added()...)
		chain = append(chain, recs[i].Response.ID)
	}
	return recs[0], items, chain, nil
}

// prevID is the id of the response rec continued from, "" for none.
func prevID(rec *Record) string {
	if p := rec.Response.PreviousResponseID; p != nil {
		return *p
	}
	return ""
}
