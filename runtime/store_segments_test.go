package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestMemoryStoreSegments: a MemoryStore keeps compaction segments by
// tenant and key; another tenant's key is not there. They count in its
// bytes with its records: past its bound the oldest of either go first,
// a segment put again is as new, and one larger than a bound on its own
// is not kept.
func TestMemoryStoreSegments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 10_000) }
	key := func(i int) string { return fmt.Sprintf("%064x", i) }
	has := func(st *runtime.MemoryStore, tenant string, i int) bool {
		got, err := st.GetSegment(ctx, tenant, key(i))
		if err != nil && !errors.Is(err, runtime.ErrNotStored) {
			t.Fatalf("segment %d: %v", i, err)
		}
		if err == nil && !bytes.Equal(got, seg(i)) {
			t.Fatalf("segment %d read back other bytes", i)
		}
		return err == nil
	}
	// Each segment and record holds a little over 10 KB: five fit.
	var _ runtime.CompactionSegments = (*runtime.MemoryStore)(nil)
	st := runtime.NewMemoryStore(runtime.MemoryStoreOptions{MaxBytes: 56_000, MaxTenantBytes: 56_000})
	for i := range 3 {
		if err := st.PutSegment(ctx, "a", key(i), seg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !has(st, "a", 0) || has(st, "b", 0) {
		t.Fatalf("tenant a's segment: kept for a %v, for b %v; want a's alone", has(st, "a", 0), has(st, "b", 0))
	}
	st.PutSegment(ctx, "a", key(0), seg(0)) // as new: segment 1 is the oldest now
	rec := &runtime.Record{Tenant: "a", Response: &protocol.Response{ID: "resp_1"},
		Input: protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: strings.Repeat("x", 9_000)}}}}}
	if err := st.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	st.PutSegment(ctx, "a", key(3), seg(3))
	st.PutSegment(ctx, "a", key(4), seg(4)) // the sixth: the oldest goes
	if has(st, "a", 1) || !has(st, "a", 0) || !has(st, "a", 2) || !has(st, "a", 4) {
		t.Fatalf("past the bytes: kept 0 %v, 1 %v, 2 %v, 4 %v; want all but segment 1, the oldest", has(st, "a", 0), has(st, "a", 1), has(st, "a", 2), has(st, "a", 4))
	}
	for i := 5; i < 8; i++ {
		st.PutSegment(ctx, "a", key(i), seg(i))
	}
	if _, err := st.Get(ctx, "resp_1"); !errors.Is(err, runtime.ErrNotStored) {
		t.Fatalf("the record, older than the segments put since: %v, want it dropped", err)
	}
	if err := st.PutSegment(ctx, "a", key(9), make([]byte, 60_000)); !errors.Is(err, runtime.ErrTooLarge) {
		t.Fatalf("a segment past a bound on its own: %v, want ErrTooLarge", err)
	}
}
