package o200k

import (
	"strings"
	"sync/atomic"
)

// mergeCache holds the byte-pair merges of pieces that are no token, the
// latest one seen in each of its slots. Such a piece (an identifier, a
// run of spaces and a word, a number) is merged by repeated lookups,
// quadratic in its length, and the same ones come back: a repository's
// names in every file a tool reads. Reads and writes are one atomic each;
// a slot holds whichever piece was merged into it last.
type mergeCache struct {
	slots [mergeSlots]atomic.Pointer[merged]
}

// mergeSlots bounds the cache: at most this many pieces, each under
// maxScanMerge bytes, with their tokens.
const mergeSlots = 1 << 12

// merged is a piece's merge: each token's id and the offset in the piece
// where it ends (a piece is shorter than maxScanMerge, which a byte holds).
type merged struct {
	piece string
	ids   []uint32
	ends  []uint8
}

const _ uint8 = maxScanMerge

func slotOf(h uint64) uint64 { return h >> (64 - 12) }

// get is piece's merge, if its slot holds it; h is its vocab hash.
func (c *mergeCache) get(piece string, h uint64) *merged {
	if m := c.slots[slotOf(h)].Load(); m != nil && m.piece == piece {
		return m
	}
	return nil
}

// put keeps the merge of piece whose part boundaries are parts (merge's,
// the piece's length last), and returns it. The piece is copied: it is a
// part of text the cache must not keep alive.
func (c *mergeCache) put(piece string, h uint64, parts []part, v *vocab) *merged {
	m := &merged{piece: strings.Clone(piece), ids: make([]uint32, len(parts)-1), ends: make([]uint8, len(parts)-1)}
	for k := range len(parts) - 1 {
		m.ids[k], _ = v.lookup(piece[parts[k].offset:parts[k+1].offset])
		m.ends[k] = uint8(parts[k+1].offset)
	}
	c.slots[slotOf(h)].Store(m)
	return m
}
