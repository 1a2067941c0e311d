package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestMemoryStoreBound: a full MemoryStore drops its oldest records.
func TestMemoryStoreBound(t *testing.T) {
	t.Parallel()
	st := runtime.NewMemoryStore(runtime.MemoryStoreOptions{MaxRecords: 3})
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

// TestMemoryStoreBytes: past its bytes in all, a MemoryStore drops the
// oldest records of all; past a tenant's bytes, that tenant's oldest only;
// a record larger than a bound is not kept.
func TestMemoryStoreBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := func(tenant string, i int) *runtime.Record {
		text := strings.Repeat("x", 10_000)
		return &runtime.Record{Tenant: tenant, Response: &protocol.Response{ID: fmt.Sprintf("resp_%s%d", tenant, i)},
			Input: protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}}}
	}
	kept := func(st *runtime.MemoryStore, tenant string, n int) (ids []int) {
		for i := range n {
			if _, err := st.Get(ctx, fmt.Sprintf("resp_%s%d", tenant, i)); err == nil {
				ids = append(ids, i)
			}
		}
		return ids
	}
	// Each record holds a little over 11 KB: a tenant keeps 3, all keep 5.
	st := runtime.NewMemoryStore(runtime.MemoryStoreOptions{MaxBytes: 60_000, MaxTenantBytes: 36_000})
	for i := range 4 {
		if err := st.Put(ctx, rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := kept(st, "a", 4); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("tenant a past its bytes kept %v, want its newest three", got)
	}
	for i := range 3 {
		st.Put(ctx, rec("b", i))
	}
	if a, b := kept(st, "a", 4), kept(st, "b", 3); !slices.Equal(a, []int{2, 3}) || !slices.Equal(b, []int{0, 1, 2}) {
		t.Fatalf("past the bytes in all: a kept %v, b kept %v; want the oldest of all gone first", a, b)
	}
	big := rec("a", 9)
	big.Input = protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: strings.Repeat("y", 60_000)}}}}
	if err := st.Put(ctx, big); err != runtime.ErrTooLarge {
		t.Fatalf("a record past a bound on its own: %v", err)
	}
}

// wrappingStore is a Store whose misses wrap ErrNotStored, as a networked
// store's errors do (context: the key, the backend).
type wrappingStore struct{ runtime.Store }

func (s wrappingStore) Get(ctx context.Context, id string) (*runtime.Record, error) {
	rec, err := s.Store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("store get %s: %w", id, err)
	}
	return rec, nil
}

// TestWrappedNotStored: an unknown previous_response_id is a 400
// previous_response_not_found even when the Store wraps ErrNotStored, over
// HTTP and WebSocket: it guards against such a miss becoming a 500
// server_error.
func TestWrappedNotStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Store: wrappingStore{runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}})
	const missing = "resp_0123456789abcdef0123456789abcdef0123456789abcdef"
	status, body := h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": missing, "input": "hi"})
	if status != 400 || !strings.Contains(string(body), `"previous_response_not_found"`) || !strings.Contains(string(body), `"previous_response_id"`) {
		t.Fatalf("HTTP: %d %s", status, body)
	}
	c := h.dial(t, nil)
	c.send(t, create(map[string]any{"model": "tether-scripted", "previous_response_id": missing, "input": "hi"}))
	c.wantError(t, "previous_response_not_found")
	// A stored chain still loads through the wrapping store.
	status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "input": "hi"})
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	id, _ := obj(t, body)["id"].(string)
	if status, body = h.post(t, "/responses", map[string]any{"model": "tether-scripted", "previous_response_id": id, "input": "again"}); status != 200 {
		t.Fatalf("chained: %d %s", status, body)
	}
}

// TestStoredAsPut: a stored response reads as the store took it, the same
// from memory as from Redis, whose record is encoded as it is put: what
// the response gets after the store (its timings) is not written into the
// record a reader may be encoding meanwhile.
func TestStoredAsPut(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	for name, h := range map[string]*harness{"memory": newHarness(t, runtime.Options{}), "redis": redisHarness(t, rd.URL(), runtime.Options{})} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := h.dial(t, nil)
			c.send(t, create(map[string]any{"model": "tether-scripted", "include": []string{protocol.IncludeTimings}, "input": "Say hello."}))
			end := last(c.untilTerminal(t))
			var ev struct {
				Response struct {
					ID      string
					Timings json.RawMessage
				}
			}
			if json.Unmarshal(end, &ev); len(ev.Response.Timings) == 0 {
				t.Fatalf("%.300s: want the response with its timings", end)
			}
			code, b := h.get(t, "/responses/"+ev.Response.ID)
			var stored map[string]json.RawMessage
			if json.Unmarshal(b, &stored); code != 200 || stored["timings"] != nil {
				t.Errorf("stored: %d %.300s: want the record as put, without the timings given after", code, b)
			}
		})
	}
}
