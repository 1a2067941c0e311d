package outbox

import (
	"bytes"
	"fmt"
	"testing"
)

// TestPacker: kept frames are copies nothing writes again, packed into
// chunks; Holds tells those of the current chunk from those of a full one
// and from a frame copied on its own.
func TestPacker(t *testing.T) {
	var p Packer
	var kept [][]byte
	var want []string
	for i := range 100 {
		src := fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"delta":"x"}`, i)
		b := p.Keep(src)
		src[0] = '!' // the caller's buffer is written again
		kept, want = append(kept, b), append(want, string(b))
		if !p.Holds(b) {
			t.Fatalf("frame %d: not held by the chunk it was just kept in", i)
		}
		if cap(b) != len(b) {
			t.Fatalf("frame %d: cap %d, len %d: an append would write past it", i, cap(b), len(b))
		}
	}
	for i, b := range kept {
		if string(b) != want[i] || b[0] != '{' {
			t.Fatalf("frame %d changed: %s", i, b)
		}
	}
	if p.Holds(kept[0]) {
		t.Fatal("a frame of a full chunk is held by the current one")
	}
	big := p.Keep(bytes.Repeat([]byte("y"), packChunk))
	if Packed(big) || p.Holds(big) {
		t.Fatal("a frame past a quarter chunk was packed")
	}
	last := kept[len(kept)-1]
	if !p.Holds(last) {
		t.Fatal("a frame copied on its own took the chunk's place")
	}
	p.Reset()
	if p.Holds(last) || p.Holds(nil) {
		t.Fatal("Holds after Reset")
	}
}

// TestPackerRecycle: Recycle gives back the full chunks, not the current
// one a Reset let go (a parked rollout's frames there were compacted
// elsewhere, and whoever holds one keeps it); frames kept after it are
// whole whatever the chunk held before; Forget gives back none. In the
// race build a recycled chunk is poisoned, so that a frame read after its
// chunk was recycled shows it.
func TestPackerRecycle(t *testing.T) {
	var p Packer
	keep := func(n int) (kept [][]byte) {
		for i := range n {
			kept = append(kept, p.Keep(fmt.Appendf(nil, `{"sequence_number":%d,"delta":"%s"}`, i, bytes.Repeat([]byte("z"), 100))))
		}
		return kept
	}
	step := keep(100) // several chunks
	if len(p.full) == 0 {
		t.Fatal("100 frames of 130 bytes filled no chunk")
	}
	current := step[len(step)-1]
	p.Reset() // a pause: the current chunk goes to the collector
	full := len(p.full)
	p.Recycle()
	if len(p.full) != 0 || p.cur != nil {
		t.Fatalf("after Recycle: %d full chunks, a current one %v", len(p.full), p.cur != nil)
	}
	if poisonRecycled {
		if step[0][0] != 0xff {
			t.Errorf("a frame of a recycled chunk reads %q: not poisoned", step[0][:8])
		}
		if current[0] != '{' {
			t.Error("the chunk a Reset let go was recycled")
		}
	}
	t.Logf("%d chunks recycled", full)
	for i, b := range keep(100) {
		if want := fmt.Sprintf(`{"sequence_number":%d,"delta":"%s"}`, i, bytes.Repeat([]byte("z"), 100)); string(b) != want {
			t.Fatalf("frame %d kept after Recycle: %q", i, b)
		}
	}
	again := keep(100)
	p.Forget()
	if len(p.full) != 0 || p.cur != nil {
		t.Fatal("Forget kept chunks")
	}
	if again[0][0] != '{' {
		t.Error("Forget recycled a chunk")
	}
}
