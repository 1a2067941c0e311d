package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
)

// compactionKeyName is where the servers sharing a Redis keep the key
// that seals compaction items (runtime.Options.CompactionKey).
const compactionKeyName = "tether:compaction-key"

// CompactionKey is the 32-byte key every server on this Redis seals and
// opens compaction items with: the first to ask draws it (SET NX), the
// others read it. A compaction item made on one server then opens on any,
// as a suspended rollout taken over from its checkpoint needs. It is kept
// without expiry: items sealed with it outlive any response.
func (s *Store) CompactionKey(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	key := make([]byte, 32)
	rand.Read(key)
	if err := s.c.SetNX(ctx, compactionKeyName, key, 0).Err(); err != nil {
		return nil, s.unavailable(err)
	}
	got, err := s.c.Get(ctx, compactionKeyName).Bytes()
	if err != nil {
		return nil, s.unavailable(err)
	}
	if len(got) != 32 {
		return nil, fmt.Errorf("redisstore: %s holds %d bytes, want 32", compactionKeyName, len(got))
	}
	return got, nil
}
