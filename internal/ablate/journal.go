package ablate

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tether-run/tether/runtime"
)

// JournalUse is what a durable trial wrote to its rollout's journal: the
// writes that append (a pause's, an answer's) with their bytes, heads and
// entries; and apart, the bytes of those that begin it anew with a
// snapshot of the rollout (its first pause's, and any compaction's).
type JournalUse struct {
	Writes        int `json:"writes"`
	Bytes         int `json:"bytes"`
	SnapshotBytes int `json:"snapshot_bytes"`
}

// countedJournal is the durable server's store, counting what it is asked
// to write.
type countedJournal struct {
	runtime.Checkpoints
	writes, bytes, snapshotBytes atomic.Int64
}

func (c *countedJournal) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	n := len(w.Head)
	for _, e := range w.Entries {
		n += len(e)
	}
	if w.Reset {
		c.snapshotBytes.Add(int64(n))
	} else {
		c.writes.Add(1)
		c.bytes.Add(int64(n))
	}
	return c.Checkpoints.Write(ctx, w, ttl)
}

// use is what was written so far.
func (c *countedJournal) use() JournalUse {
	return JournalUse{Writes: int(c.writes.Load()), Bytes: int(c.bytes.Load()), SnapshotBytes: int(c.snapshotBytes.Load())}
}

// since is what was written since u.
func (c *countedJournal) since(u JournalUse) *JournalUse {
	now := c.use()
	return &JournalUse{Writes: now.Writes - u.Writes, Bytes: now.Bytes - u.Bytes, SnapshotBytes: now.SnapshotBytes - u.SnapshotBytes}
}
