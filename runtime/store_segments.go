package runtime

import "context"

// CompactionSegments is a Store that keeps the segments context
// compactions refer to (contextsegments.go): the sealed bytes of an
// earlier compaction's window, which a later compaction item refers to by
// key rather than sealing that window again. A key is the segment's
// content address (the hex SHA-256 of its bytes), kept apart by tenant: a
// key asked for under another tenant is not there. PutSegment of a key
// kept already keeps it as if newly put (a store that bounds or expires
// segments counts from then). GetSegment returns ErrNotStored for a
// segment it does not keep: never put, dropped, expired. Segments are
// sealed: the store cannot read them, and any change to one is refused
// when it is read back. The bytes are the store's once put, and the
// caller's to read once got: neither side changes them.
//
// A server whose Store is not one seals each compaction whole, as one
// holding a segment it could not put does.
type CompactionSegments interface {
	PutSegment(ctx context.Context, tenant, key string, seg []byte) error
	GetSegment(ctx context.Context, tenant, key string) ([]byte, error)
}

// segmentKey is a segment's key under its tenant.
type segmentKey struct{ tenant, key string }

// segment is a compaction segment a MemoryStore keeps.
type segment struct {
	key  segmentKey
	data []byte
}

// segmentOverhead is what a segment holds in memory besides its bytes:
// its key (64 hex digits and the tenant), its entry in the store's map
// and lists.
const segmentOverhead = 320

// PutSegment keeps seg under tenant and key (CompactionSegments), or keeps
// it again as newly put, last to be dropped. A segment larger than a bound
// on its own is not kept (ErrTooLarge).
func (m *MemoryStore) PutSegment(_ context.Context, tenant, key string, seg []byte) error {
	size := segmentOverhead + len(tenant) + len(key) + len(seg)
	if size > m.opts.MaxBytes || size > m.opts.MaxTenantBytes {
		return ErrTooLarge
	}
	k := segmentKey{tenant, key}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.segs[k]; e != nil {
		m.all.MoveToBack(e.all)
		m.tenants[tenant].list.MoveToBack(e.mine)
		return nil
	}
	e := &stored{seg: &segment{key: k, data: seg}, bytes: size}
	m.segs[k] = e
	m.addLocked(e)
	return nil
}

// GetSegment returns the segment tenant keeps under key, or ErrNotStored
// (CompactionSegments).
func (m *MemoryStore) GetSegment(_ context.Context, tenant, key string) ([]byte, error) {
	m.mu.RLock()
	e, ok := m.segs[segmentKey{tenant, key}]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotStored
	}
	return e.seg.data, nil
}
