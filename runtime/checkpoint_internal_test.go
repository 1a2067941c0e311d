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

// FuzzDecodeCheckpoint: whatever a store hands back, reading it never
// panics, and what it accepts writes out again.
func FuzzDecodeCheckpoint(f *testing.F) {
	pause := `{"version":1,"request":{"model":"tether-scripted","input":"hi"},"response":{"id":"resp_1","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]},` +
		`"items":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"rendered":1,"sequence_number":3,"calls":[{"type":"function_call","call_id":"c","name":"f","index":0,"pos":0,"client":true}]}`
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"pause":` + pause + `,"frames":[{"seq":2,"event":{"type":"response.done","sequence_number":2}}]}`))
	f.Add([]byte(`{"version":1,"pause":` + pause + `,"frames":[{"seq":1,"event":{}},{"seq":2,"event":{}}],"answer":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`))
	f.Add([]byte(`{"version":1,"pause":` + pause + `,"frames":[{"seq":2,"event":{}},{"seq":1,"event":{}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		lc, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		if len(lc.frames) == 0 || lc.frames[len(lc.frames)-1].seq >= lc.pause.Seq {
			t.Fatalf("accepted frames %v for a pause whose next event is %d", lc.frames, lc.pause.Seq)
		}
		if _, err := lc.data.encode(lc.answer); err != nil {
			t.Fatalf("a checkpoint read back does not write out: %v", err)
		}
	})
}
