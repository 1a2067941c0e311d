package redisstore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestSegments: a compaction segment is the one key the package doc names,
// in its tenant's slot, holding its bytes with the store's TTL, counted
// again from a second put; another tenant's key, or one never put, is
// runtime.ErrNotStored; one past MaxRecordBytes is not kept
// (runtime.ErrTooLarge); a Redis that does not answer is
// store_unavailable.
func TestSegments(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	st, err := New(rd.URL(), Options{Timeout: time.Second, TTL: time.Hour, MaxRecordBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var _ runtime.CompactionSegments = st
	ctx := context.Background()
	key := strings.Repeat("ab", 32)
	seg := []byte{0, 1, 0xff, '"', '\n'}
	if err := st.PutSegment(ctx, "t1", key, seg); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetSegment(ctx, "t1", key); err != nil || !bytes.Equal(got, seg) {
		t.Fatalf("GetSegment: %q %v, want the bytes put", got, err)
	}
	for _, c := range []struct{ tenant, key string }{{"t2", key}, {"", key}, {"t1", strings.Repeat("cd", 32)}} {
		if _, err := st.GetSegment(ctx, c.tenant, c.key); !errors.Is(err, runtime.ErrNotStored) {
			t.Errorf("GetSegment under tenant %q of %.8s…: %v, want ErrNotStored", c.tenant, c.key, err)
		}
	}
	redisKey := "tether:{t7431}:s:" + key // tenant "t1" hex-coded
	st.c.Expire(ctx, redisKey, time.Minute)
	if err := st.PutSegment(ctx, "t1", key, seg); err != nil {
		t.Fatal(err)
	}
	if d, err := st.c.PTTL(ctx, redisKey).Result(); err != nil || d <= time.Minute || d > time.Hour {
		t.Fatalf("PTTL of %s after a second put: %v %v, want the TTL again, within (1m, 1h]", redisKey, d, err)
	}
	if err := st.PutSegment(ctx, "t1", key, make([]byte, 1001)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Fatalf("a segment past MaxRecordBytes: %v, want ErrTooLarge", err)
	}
	rd.Kill()
	for name, err := range map[string]error{"PutSegment": st.PutSegment(ctx, "t1", key, seg), "GetSegment": func() error { _, err := st.GetSegment(ctx, "t1", key); return err }()} {
		if perr := protocol.AsError(err); err == nil || perr.Code != protocol.CodeStoreUnavailable {
			t.Errorf("%s while Redis is down: %v, want store_unavailable", name, err)
		}
	}
}
