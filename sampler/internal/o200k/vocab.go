package o200k

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// vocab maps o200k_base's pieces to their ids in one flat open-addressed
// table. A round trip tokenizes a tool's output after the client's tool
// ran, when the caches hold other things: each lookup then costs its cache
// misses, not its instructions. Through a Go map, whose lookup touches a
// group's control word, its slots and the key's bytes elsewhere, cold
// tokenizing costs many times warm tokenizing; through this table it costs
// markedly less (BenchmarkEncodeCold). A piece of up to 8 bytes, most
// tokens, is found in its 16-byte slot alone; a longer one is checked
// against the arena of all pieces too.
type vocab struct {
	seed  maphash.Seed
	mask  uint64
	slots []slot
	arena string   // every piece, by id
	start []uint32 // id → where its piece starts in arena
}

// slot is one entry: the piece's first 8 bytes, its length, a few more
// bits of its hash, and its id + 1 (0: empty).
type slot struct {
	head uint64
	id   uint32
	n    uint16
	fp   uint16
}

// head is s's first 8 bytes, zero-padded.
func head(s string) uint64 {
	if len(s) >= 8 {
		return binary.LittleEndian.Uint64([]byte(s[:8]))
	}
	var b [8]byte
	copy(b[:], s)
	return binary.LittleEndian.Uint64(b[:])
}

// newVocab builds the table of pieces, whose index is the id (an empty
// piece is no token).
func newVocab(pieces []string) *vocab {
	v := &vocab{seed: maphash.MakeSeed(), start: tableOf[uint32](len(pieces) + 1)}
	n, size := 0, 0
	for _, p := range pieces {
		if p != "" {
			n++
			size += len(p)
		}
	}
	// About three quarters full, 4 MB: half the size, with as many cache
	// lines touched by a probe (four slots to a line), measured faster
	// cold than a table half full.
	v.slots = tableOf[slot](1 << bits.Len(uint(n)))
	v.mask = uint64(len(v.slots) - 1)
	arena := tableOf[byte](size)[:0]
	for id, p := range pieces {
		v.start[id] = uint32(len(arena))
		arena = append(arena, p...)
		if p == "" || len(p) > 1<<16-1 {
			continue
		}
		h := maphash.String(v.seed, p)
		i := h & v.mask
		for v.slots[i].id != 0 {
			i = (i + 1) & v.mask
		}
		v.slots[i] = slot{head: head(p), id: uint32(id) + 1, n: uint16(len(p)), fp: uint16(h >> 48)}
	}
	v.start[len(pieces)] = uint32(len(arena))
	v.arena = unsafe.String(unsafe.SliceData(arena), len(arena)) // never written again
	return v
}

// tableOf is n zeroed values of T for a table the vocabulary keeps: in huge
// pages where the kernel grants them (hugeSlice), else on the heap. A
// lookup touches one place in megabytes of tables, most often on caches a
// round trip's other work has filled: in small pages each also misses the
// TLB, and tokenizing a tool's output after other work took a quarter
// longer (BenchmarkEncodeCold).
func tableOf[T any](n int) []T {
	if t := hugeSlice[T](n); t != nil {
		return t
	}
	return make([]T, n)
}

// lookup is piece's id, if it is a token.
func (v *vocab) lookup(piece string) (uint32, bool) {
	return v.lookupHashed(piece, v.hash(piece))
}

// hash is piece's hash, as lookupHashed takes it.
func (v *vocab) hash(piece string) uint64 { return maphash.String(v.seed, piece) }

// lookupHashed is lookup, for a piece whose hash is h.
func (v *vocab) lookupHashed(piece string, h uint64) (uint32, bool) {
	if piece == "" || len(piece) > 1<<16-1 {
		return 0, false
	}
	hd, n, fp := head(piece), uint16(len(piece)), uint16(h>>48)
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := &v.slots[i]
		if s.id == 0 {
			return 0, false
		}
		if s.fp != fp || s.n != n || s.head != hd {
			continue
		}
		id := s.id - 1
		if n <= 8 || v.arena[v.start[id]:v.start[id+1]] == piece {
			return id, true
		}
	}
}
