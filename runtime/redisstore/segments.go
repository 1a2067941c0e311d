package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/runtime"
)

// A Store is a runtime.CompactionSegments too: the segments context
// compactions refer to, each one string key in its tenant's slot,
// tether:{tTENANT}:s:KEY (KEY the segment's content address), holding the
// segment's sealed bytes, with the records' TTL. A segment put again is
// written again, its TTL counted from then; one larger than
// MaxRecordBytes is not kept (the compaction is sealed whole instead).

// segmentKey is where tenant's segment of key is kept.
func (s *Store) segmentKey(tenant, key string) string { return s.slot(tenant) + ":s:" + key }

// PutSegment keeps seg under tenant and key for the TTL
// (runtime.CompactionSegments).
func (s *Store) PutSegment(ctx context.Context, tenant, key string, seg []byte) error {
	if len(seg) > s.opts.MaxRecordBytes {
		return runtime.ErrTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.unavailable(s.c.Set(ctx, s.segmentKey(tenant, key), seg, s.opts.TTL).Err())
}

// GetSegment reads the segment tenant keeps under key, or
// runtime.ErrNotStored (runtime.CompactionSegments).
func (s *Store) GetSegment(ctx context.Context, tenant, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b, err := s.c.Get(ctx, s.segmentKey(tenant, key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, runtime.ErrNotStored
	}
	if err != nil {
		return nil, s.unavailable(err)
	}
	return b, nil
}

var _ runtime.CompactionSegments = (*Store)(nil)
