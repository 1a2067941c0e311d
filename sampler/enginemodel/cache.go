package enginemodel

import (
	"container/list"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"
)

// Cache is an engine's KV cache: blocks of Profile.BlockTokens tokens,
// each named by the hash of the whole prefix it ends (so that two prompts
// that begin alike share their first blocks), at most
// CapacityTokens/BlockTokens of them in memory. A block is in use while a
// sequence holds it; unused, it stays for a later prompt that begins the
// same way until the cache needs its room: then the least recently
// released unused block goes first, and a pinned block not before its pin
// expires. A swapped-out block is out of memory but kept, to come back at
// the profile's bandwidth.
//
// Not safe for concurrent use.
type Cache struct {
	p        *Profile
	capacity int               // blocks
	blocks   map[uint64]*block // every block known: in memory or swapped out
	lru      list.List         // blocks in memory that no sequence holds, least recently released first
	resident int               // blocks in memory
}

type block struct {
	hash        uint64
	refs        int           // sequences holding it
	pinnedUntil time.Time     // not evicted before
	swapped     bool          // out of memory, kept in host memory
	elem        *list.Element // in lru when unused and in memory
}

// NewCache is an empty cache for p, which must pass Check.
func NewCache(p *Profile) *Cache {
	return &Cache{p: p, capacity: p.CapacityTokens / p.BlockTokens, blocks: make(map[uint64]*block)}
}

// BlockHashes names a prompt's full blocks by the hash of the prefix each
// ends; a partial last block is not cacheable (as in vLLM).
func BlockHashes(tokens []uint32, blockTokens int) []uint64 {
	out := make([]uint64, 0, len(tokens)/blockTokens)
	var prev uint64
	var b [8]byte
	for i := 0; i+blockTokens <= len(tokens); i += blockTokens {
		h := fnv.New64a()
		binary.LittleEndian.PutUint64(b[:], prev)
		h.Write(b[:])
		for _, t := range tokens[i : i+blockTokens] {
			binary.LittleEndian.PutUint32(b[:4], t)
			h.Write(b[:4])
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out
}

// Seq is a sequence's hold on the cache: the blocks of its prompt, and
// private blocks (its partial block and output) that no other shares.
type Seq struct {
	blocks  []*block
	private int
}

// Admission is what admitting a sequence found, in blocks: in memory
// (Hit), swapped out and to be swapped in (Swapped), to be computed
// (Miss, and the private ones).
type Admission struct {
	Hit, Swapped, Miss, Private int
}

// Admit gives a sequence its prompt's blocks (hashes, BlockHashes) and
// private more, at now, evicting unused blocks as it must; ok is false,
// and nothing changes, when the cache cannot make the room.
func (c *Cache) Admit(hashes []uint64, private int, now time.Time) (*Seq, Admission, bool) {
	var a Admission
	need := private // blocks to bring into memory
	broken := false // a block before was missing: the rest are computed again
	for i, h := range hashes {
		if slices.Contains(hashes[:i], h) { // the same prefix twice: a hash collision, one block
			a.Miss++
			continue
		}
		switch b := c.blocks[h]; {
		case b == nil:
			a.Miss++
			need++
			broken = true
		case b.swapped:
			need++
			if broken {
				a.Miss++
			} else {
				a.Swapped++
			}
		case broken:
			a.Miss++ // in memory, but its prefix is computed again: so is it
		default:
			a.Hit++
		}
	}
	a.Private = private
	if free := c.capacity - c.resident; need > free && need > free+c.evictable(now, hashes) {
		return nil, Admission{}, false
	}
	for c.capacity-c.resident < need {
		c.evictOne(now, hashes)
	}
	s := &Seq{private: private}
	for _, h := range hashes {
		b := c.blocks[h]
		switch {
		case b == nil:
			b = &block{hash: h}
			c.blocks[h] = b
			c.resident++
		case b.swapped:
			b.swapped = false
			c.resident++
		case b.elem != nil:
			c.lru.Remove(b.elem)
			b.elem = nil
		}
		b.refs++
		s.blocks = append(s.blocks, b)
	}
	c.resident += private
	return s, a, true
}

// evictable counts the unused blocks in memory that may go at now, not
// counting those keep names (a prompt being admitted reuses them).
func (c *Cache) evictable(now time.Time, keep []uint64) int {
	n := 0
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if b := e.Value.(*block); !b.pinnedUntil.After(now) && !contains(keep, b.hash) {
			n++
		}
	}
	return n
}

// evictOne drops the least recently released unused block that may go.
func (c *Cache) evictOne(now time.Time, keep []uint64) {
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if b := e.Value.(*block); !b.pinnedUntil.After(now) && !contains(keep, b.hash) {
			c.lru.Remove(e)
			delete(c.blocks, b.hash)
			c.resident--
			return
		}
	}
}

func contains(hs []uint64, h uint64) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// Policy is what becomes of a sequence's cache while its rollout waits on
// tools.
type Policy struct {
	Kind PolicyKind
	TTL  time.Duration // Pin's
}

// PolicyKind names a policy.
type PolicyKind int

const (
	Discard PolicyKind = iota // its blocks are unused: kept until the cache needs the room
	Pin                       // kept for TTL whatever the cache needs, then as Discard
	Swap                      // the blocks only it holds go to host memory, freeing theirs
)

// Release ends a sequence's hold on the cache at now, as policy says. Its
// private blocks are freed whatever the policy. Its blocks join the
// unused last block first, so that the cache evicts a prompt from its end
// and its beginning, which other prompts share, stays longest (as vLLM).
func (c *Cache) Release(s *Seq, policy Policy, now time.Time) {
	c.resident -= s.private
	for _, b := range slices.Backward(s.blocks) {
		b.refs--
		if b.refs > 0 {
			continue
		}
		switch policy.Kind {
		case Swap:
			b.swapped = true
			c.resident--
			continue
		case Pin:
			if until := now.Add(policy.TTL); until.After(b.pinnedUntil) {
				b.pinnedUntil = until
			}
		}
		b.elem = c.lru.PushBack(b)
	}
	s.blocks, s.private = nil, 0
}

// NextExpiry is the earliest time after now at which a pinned unused
// block may go, and false when none is pinned past now.
func (c *Cache) NextExpiry(now time.Time) (time.Time, bool) {
	var next time.Time
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if u := e.Value.(*block).pinnedUntil; u.After(now) && (next.IsZero() || u.Before(next)) {
			next = u
		}
	}
	return next, !next.IsZero()
}

// Resident is the number of blocks in memory.
func (c *Cache) Resident() int { return c.resident }
