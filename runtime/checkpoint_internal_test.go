package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestMemoryCheckpointsExpire: a checkpoint is kept for its ttl and no
// longer.
func TestMemoryCheckpointsExpire(t *testing.T) {
	m := NewMemoryCheckpoints()
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	ctx := context.Background()
	if err := m.Save(ctx, &Checkpoint{ID: "resp_1", Creds: "c", Epoch: 1, Data: []byte("x")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute - time.Nanosecond)
	if _, err := m.Load(ctx, "", "resp_1", "c"); err != nil {
		t.Fatalf("Load within its ttl: %v", err)
	}
	now = now.Add(time.Nanosecond)
	if _, err := m.Load(ctx, "", "resp_1", "c"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load past its ttl: %v, want ErrNoCheckpoint", err)
	}
	if len(m.cps) != 0 {
		t.Errorf("%d checkpoints kept past their ttl", len(m.cps))
	}
}
