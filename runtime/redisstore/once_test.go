package redisstore

import (
	"testing"
	"time"

	"github.com/tether-run/tether/runtime"
)

var _ runtime.OnceStore = (*Store)(nil)

// TestUseOnce: of two servers on one Redis, the first to use an id has it;
// the other, and the first again, do not; Redis keeps it until the secret
// expires.
func TestUseOnce(t *testing.T) {
	t.Parallel()
	a, rd := newCheckpointStore(t)
	b, err := New(rd.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	until := time.Now().Add(300 * time.Millisecond)
	for i, tc := range []struct {
		s    *Store
		want bool
	}{{a, true}, {b, false}, {a, false}} {
		if first, err := tc.s.UseOnce(t.Context(), "n1", until); err != nil || first != tc.want {
			t.Fatalf("use %d: %v %v, want %v", i+1, first, err, tc.want)
		}
	}
	if first, err := b.UseOnce(t.Context(), "n2", time.Now().Add(-time.Second)); err != nil || first {
		t.Errorf("an expired id: %v %v", first, err)
	}
	// It is kept as long as the secret lives, no longer.
	if ttl, err := a.c.PTTL(t.Context(), "tether:once:n1").Result(); err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
		t.Errorf("its expiry in %v (%v), want within 300 ms", ttl, err)
	}
}
