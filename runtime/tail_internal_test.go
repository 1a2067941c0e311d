package runtime

import (
	"slices"
	"strconv"
	"testing"
)

// TailBytes is what the tails s keeps hold, as it counts them.
func TailBytes(s *Server) int {
	s.suspended.mu.Lock()
	defer s.suspended.mu.Unlock()
	return s.suspended.tailBytes
}

// TestTailSince: a tail packed from a rollout's last frames gives back
// what a resume from each sequence number has not seen, byte for byte,
// then the terminal frame; and it holds less than its frames.
func TestTailSince(t *testing.T) {
	t.Parallel()
	delta := func(seq int) []byte {
		return []byte(`{"type":"response.output_text.delta","sequence_number":` + strconv.Itoa(seq) + `,"item_id":"msg_1","delta":"word "}`)
	}
	var frames []frame
	for seq := 7; seq < 40; seq++ {
		frames = append(frames, frame{seq: seq, b: delta(seq)})
	}
	terminal := []byte(`{"type":"response.completed","sequence_number":40,"response":{"id":"resp_1","status":"completed"}}`)
	for _, tc := range []struct {
		name   string
		frames []frame
		after  *int
		want   int // frames before the terminal
	}{
		{"no sequence number: the terminal alone", frames, nil, 0},
		{"seen none of them", frames, ptr(6), len(frames)},
		{"seen some", frames, ptr(20), 39 - 20},
		{"seen all", frames, ptr(39), 0},
		{"no frames", nil, ptr(6), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := newTail("resp_1", "creds", "", tc.frames, terminal)
			got, err := tl.since(tc.after)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			for _, f := range tc.frames {
				if tc.after != nil && f.seq > *tc.after {
					want = append(want, f.b)
				}
			}
			want = append(want, terminal)
			if len(got) != tc.want+1 || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("since(%v): %d frames, want %d", tc.after, len(got), tc.want+1)
			}
			size := len(terminal)
			for _, f := range tc.frames {
				size += len(f.b)
			}
			if len(tc.frames) > 0 && len(tl.packed) >= size {
				t.Errorf("a tail of %d bytes of frames packs into %d", size, len(tl.packed))
			}
		})
	}
}
