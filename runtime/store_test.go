package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestMemoryStoreBound: a full MemoryStore drops its oldest records.
func TestMemoryStoreBound(t *testing.T) {
	t.Parallel()
	st := runtime.NewMemoryStore(3)
	ctx := context.Background()
	for i := range 5 {
		st.Put(ctx, &runtime.Record{Response: &protocol.Response{ID: fmt.Sprintf("resp_%d", i)}})
	}
	for i := range 5 {
		_, err := st.Get(ctx, fmt.Sprintf("resp_%d", i))
		if kept := i >= 2; kept != (err == nil) {
			t.Errorf("resp_%d: kept=%v, err=%v", i, kept, err)
		}
	}
	if err := st.Delete(ctx, "resp_4"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "resp_4"); err != runtime.ErrNotStored {
		t.Fatalf("after Delete: %v", err)
	}
}
