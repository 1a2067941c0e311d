package enginemodel

import (
	"container/heap"
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

	// What sequences waiting on tools hold (Held): unused blocks in
	// memory under a pin, counted until their pin is seen to expire (pins
	// holds them by expiry), and blocks swapped out.
	pinnedIdle, swapped int
	pins                pinHeap

	admitting map[uint64]bool // the prompt Admit is admitting, by hash
	releases  int             // Releases so far: what may make room
}

type block struct {
	hash        uint64
	refs        int           // sequences holding it
	pinnedUntil time.Time     // not evicted before
	swapped     bool          // out of memory, kept in host memory
	elem        *list.Element // in lru when unused and in memory
	heldPinned  bool          // counted in pinnedIdle
}

// NewCache is an empty cache for p, which must pass Check.
func NewCache(p *Profile) *Cache {
	return &Cache{p: p, capacity: p.CapacityTokens / p.BlockTokens, blocks: make(map[uint64]*block), admitting: make(map[uint64]bool)}
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
	named   []uint64 // its first private blocks' hashes (Name)
}

// Name names the first of s's private blocks by hashes (BlockHashes of
// its prompt and output, past its prompt's full blocks): the full blocks
// its output completed. Released, they are cached as its prompt's blocks
// are, so that the next turn, whose prompt begins with this one's prompt
// and output, finds them (as vLLM caches a block once its tokens fill it).
func (s *Seq) Name(hashes []uint64) { s.named = hashes }

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
	clear(c.admitting)
	for _, h := range hashes {
		if c.admitting[h] { // the same prefix twice: a hash collision, one block
			a.Miss++
			continue
		}
		c.admitting[h] = true
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
	if free := c.capacity - c.resident; need > free && need > free+c.evictable(now, need-free) {
		return nil, Admission{}, false
	}
	if short := need - (c.capacity - c.resident); short > 0 {
		c.evict(now, short)
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
			c.swapped--
		case b.elem != nil:
			c.lru.Remove(b.elem)
			b.elem = nil
			c.unpin(b)
		}
		b.refs++
		s.blocks = append(s.blocks, b)
	}
	c.resident += private
	return s, a, true
}

// evictable counts the unused blocks in memory that may go at now, up to
// enough, not counting those being admitted (the prompt reuses them).
func (c *Cache) evictable(now time.Time, enough int) int {
	n := 0
	for e := c.lru.Front(); e != nil && n < enough; e = e.Next() {
		if b := e.Value.(*block); !b.pinnedUntil.After(now) && !c.admitting[b.hash] {
			n++
		}
	}
	return n
}

// evict drops the n least recently released unused blocks that may go.
func (c *Cache) evict(now time.Time, n int) {
	for e := c.lru.Front(); e != nil && n > 0; {
		b, next := e.Value.(*block), e.Next()
		if !b.pinnedUntil.After(now) && !c.admitting[b.hash] {
			c.lru.Remove(e)
			delete(c.blocks, b.hash)
			c.resident--
			c.unpin(b)
			n--
		}
		e = next
	}
}

// Policy is what becomes of a sequence's cache while its rollout waits on
// tools.
type Policy struct {
	Kind PolicyKind
	TTL  time.Duration // Pin's
	// Unpin ends the pins on the blocks released (those no other
	// sequence holds): the rollout they were pinned for has ended, and
	// says so.
	Unpin bool
}

// Ending is the policy a turn's cache is released by as the turn ends: p,
// for a rollout that goes on once its tools have run, unless the engine
// knows that the rollout ended with the turn (a suspended rollout's
// response completes; Design.KnowsEnd): then its blocks are unused at
// once, unpinned and not swapped out. The simulator (RunLoad) and a served
// engine (sampler.EngineModel) both release by it.
func (p Policy) Ending(rolloutEnded bool) Policy {
	if rolloutEnded {
		return Policy{Kind: Discard, Unpin: true}
	}
	return p
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
	c.releases++
	// Its named private blocks become prompt blocks, which it holds, the
	// rest are freed.
	for _, h := range s.named[:min(len(s.named), s.private)] {
		if c.blocks[h] != nil {
			continue // already cached (a collision): its own copy is freed
		}
		b := &block{hash: h, refs: 1}
		c.blocks[h] = b
		s.blocks = append(s.blocks, b)
		s.private--
	}
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
			c.swapped++
			continue
		case Pin:
			if until := now.Add(policy.TTL); until.After(b.pinnedUntil) {
				b.pinnedUntil = until
				heap.Push(&c.pins, pin{until, b})
			}
		}
		if policy.Unpin {
			b.pinnedUntil = time.Time{}
		}
		if b.pinnedUntil.After(now) && !b.heldPinned {
			b.heldPinned = true
			c.pinnedIdle++
		}
		b.elem = c.lru.PushBack(b)
	}
	s.blocks, s.private, s.named = nil, 0, nil
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

// Held is the number of blocks that sequences waiting on tools hold at
// now: unused blocks in memory under a pin, and blocks swapped out to host
// memory. now must not go back between calls.
func (c *Cache) Held(now time.Time) int {
	for len(c.pins) > 0 && !c.pins[0].until.After(now) {
		p := heap.Pop(&c.pins).(pin)
		if !p.b.pinnedUntil.After(now) {
			c.unpin(p.b)
		}
	}
	return c.pinnedIdle + c.swapped
}

// unpin stops counting b among the pinned unused blocks.
func (c *Cache) unpin(b *block) {
	if b.heldPinned {
		b.heldPinned = false
		c.pinnedIdle--
	}
}

// pin is a block's pin, by its expiry; a later pin of the block leaves
// an earlier entry, which Held then skips.
type pin struct {
	until time.Time
	b     *block
}

type pinHeap []pin

func (h pinHeap) Len() int           { return len(h) }
func (h pinHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h pinHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pinHeap) Push(x any)        { *h = append(*h, x.(pin)) }
func (h *pinHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Resident is the number of blocks in memory.
func (c *Cache) Resident() int { return c.resident }
