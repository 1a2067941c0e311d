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
