package sampler

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Default bounds of a PrefixCache.
const (
	// DefaultPrefixCacheTokens is 64M distinct prompt tokens: 500 agents'
	// contexts of 128K at once. A bound below what the rollouts running at
	// once hold makes least-recently-used eviction drop each one just
	// before its next turn (4M does at 500 rollouts of 25K), and the cache
	// then holds nothing that is used again.
	DefaultPrefixCacheTokens = 1 << 26
	// DefaultPrefixCacheBoundaries bounds the item boundaries held, what
	// the cache's memory grows with (a node and its index entry, 115
	// bytes): some 30 MB at most.
	DefaultPrefixCacheBoundaries    = 1 << 18
	DefaultPrefixCacheConversations = 4096
	// DefaultInMemoryRetention is how long an in_memory conversation stays
	// idle: OpenAI keeps such a prefix for 5 to 10 minutes of inactivity.
	DefaultInMemoryRetention = 10 * time.Minute
)

// Retention24h is how long a conversation kept for 24h stays after its
// last use.
const Retention24h = 24 * time.Hour

// PrefixCacheOptions bounds a PrefixCache. The zero value means the defaults.
type PrefixCacheOptions struct {
	// MaxTokens bounds the distinct prompt tokens held: a prefix that several
	// conversations share counts once. 0 means DefaultPrefixCacheTokens; a
	// negative value holds nothing, so that every prompt is uncached.
	MaxTokens int
	// MaxBoundaries bounds the item boundaries held, which is what the
	// cache's memory grows with. 0 (or less) means
	// DefaultPrefixCacheBoundaries.
	MaxBoundaries int
	// MaxConversations bounds the conversations held, a conversation being a
	// prompt that no other held prompt extends. 0 (or less) means
	// DefaultPrefixCacheConversations.
	MaxConversations int
	// InMemoryRetention is how long a conversation whose latest request
	// asked for prompt_cache_retention "in_memory" stays after its last
	// use. 0 (or less) means DefaultInMemoryRetention.
	InMemoryRetention time.Duration
	// Now is the clock retention is counted by. Nil is time.Now.
	Now func() time.Time
}

// PrefixCache is the prompt cache of one model, kept the way an inference
// engine keeps KV blocks: it remembers the prompts it has read, and a new
// prompt costs prefill only for the tokens after the longest prefix it
// already holds.
//
// It matches prompts by content, never by identity. A prompt is the system
// block (Request.Instructions and Tools), then the items (Request.Prompt).
// Every item boundary is known by the hash of the tokens before it
// (Prompt keeps that hash as it grows), combined with a hash of the system
// block's content. So a continuation that extends a cached Prompt (the
// WebSocket designs), a history re-rendered from scratch into new segments
// (stateless HTTP) and a history rebuilt from the store (chained HTTP) all
// find the same prefix, and a sample costs the same prefill whatever
// transport or design delivered its request. A lookup walks back from the
// newest item to the first boundary the cache knows: it costs O(new items),
// not O(tokens).
//
// The held prompts form a tree of item boundaries, the system block at the
// root. When a bound is exceeded, the least recently used conversation is
// dropped, back to the point where it forks from another one.
//
// A conversation is kept by the retention its latest request asked for
// (Request.CacheRetention, prompt_cache_retention), counted from that
// request by the cache's clock:
//
//   - "in_memory": it goes once idle for InMemoryRetention, and first when a
//     bound is exceeded, as a prefix held in an engine's memory alone;
//   - "24h", or none asked for (OpenAI's default for an organization
//     without zero data retention): it goes 24 hours after its last use,
//     and under a bound only once no in_memory conversation is left, as
//     a prefix OpenAI keeps in storage when its memory is full.
//
// A request whose prompt ends inside a held conversation (a prefix of a
// longer one) leaves that conversation's retention as it was, just as it
// does not make it recently used.
//
// A PrefixCache is safe for concurrent use; Prefill holds its lock for the
// walk and the insertion only, never while tokenizing.
type PrefixCache struct {
	r    *Renderer
	seed maphash.Seed

	mu                  sync.Mutex
	maxTokens, maxConvs int                       // guarded by mu
	maxBoundaries       int                       // guarded by mu
	retain              [rings]time.Duration      // each ring's retention; guarded by mu
	clock               func() time.Time          // guarded by mu
	epoch               time.Time                 // what leaves' use times count from; guarded by mu
	roots               map[uint64]*prefixNode    // system blocks, by headerHash; guarded by mu
	nodes               map[prefixKey]*prefixNode // item boundaries; guarded by mu
	// lru are the sentinels of the rings of leaves, one a retention, the
	// least recently used at lru[i].next; guarded by mu. A leaf joins a
	// ring at its back as it is used, so each ring is in the order its
	// leaves expire in.
	lru    [rings]prefixNode
	tokens int // sum of the nodes' own tokens; guarded by mu
	leaves int // nodes in the rings; guarded by mu
	// headerLens are system blocks' lengths in tokens, by headerHash
	// without the cache key: a root evicted, or another key's with the
	// same instructions and tools, is not rendered again (at 500 rollouts,
	// each with a key of its own, roots go and come back every step).
	// Bounded by maxConvs; guarded by mu.
	headerLens map[uint64]int
}

// The rings of leaves, by retention, in the order a bound evicts from them.
const (
	ringInMemory = iota
	ring24h
	rings
)

// ringOf is the ring of a conversation whose latest request asked for
// retention.
func ringOf(retention string) int {
	if retention == protocol.CacheInMemory {
		return ringInMemory
	}
	return ring24h
}

// prefixKey names an item boundary: the hash of the system block combined
// with the hash of the item tokens before the boundary, and their count.
type prefixKey struct {
	h uint64
	n int
}

// prefixNode is a held prefix: a system block (a root) or an item boundary.
type prefixNode struct {
	key      prefixKey // zero for a root
	header   uint64    // the root's headerHash
	parent   *prefixNode
	own      int // tokens from the parent's end to this node's
	total    int // tokens from the start of the prompt to this node's end
	children int
	// prev and next link the node into a ring of leaves while it has no
	// children; used is when it was last used, since the cache's epoch.
	prev, next *prefixNode
	used       time.Duration
}

// PrefixCacheStats is a snapshot of what a PrefixCache holds.
type PrefixCacheStats struct {
	Tokens        int // distinct prompt tokens
	Boundaries    int // item boundaries
	Conversations int // prompts that no other held prompt extends
}

// NewPrefixCache returns an empty cache whose prompts are rendered, when they
// have to be, by r. A nil r means a new Renderer.
func NewPrefixCache(r *Renderer, opts PrefixCacheOptions) *PrefixCache {
	if r == nil {
		// NewRenderer fails only for an encoding the tokenizer lacks.
		r, _ = NewRenderer()
	}
	c := &PrefixCache{r: r, seed: maphash.MakeSeed()}
	c.Configure(opts)
	return c
}

// Configure empties the cache and bounds it anew: PrefixCacheOptions{MaxTokens:
// -1} turns it off, every prompt uncached.
func (c *PrefixCache) Configure(opts PrefixCacheOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxTokens, c.maxConvs = opts.MaxTokens, opts.MaxConversations
	if c.maxTokens == 0 {
		c.maxTokens = DefaultPrefixCacheTokens
	}
	if c.maxConvs <= 0 {
		c.maxConvs = DefaultPrefixCacheConversations
	}
	c.maxBoundaries = opts.MaxBoundaries
	if c.maxBoundaries <= 0 {
		c.maxBoundaries = DefaultPrefixCacheBoundaries
	}
	c.retain = [rings]time.Duration{ringInMemory: opts.InMemoryRetention, ring24h: Retention24h}
	if c.retain[ringInMemory] <= 0 {
		c.retain[ringInMemory] = DefaultInMemoryRetention
	}
	c.clock = opts.Now
	if c.clock == nil {
		c.clock = time.Now
	}
	c.epoch = c.clock()
	c.resetLocked()
}

// sinceLocked is the time now, counted from the cache's epoch: time.Now's
// monotonic reading keeps it right across a change of the wall clock.
func (c *PrefixCache) sinceLocked() time.Duration { return c.clock().Sub(c.epoch) }

// Prefill looks req's prompt up and records it: it returns the prompt's length
// in tokens, system block included, and how many of them, from the start, the
// cache held already. The prefill a sample pays for is prompt - cached.
//
// The system block is rendered only the first time the cache sees it. When
// req.Prompt is nil, Prefill renders req.Items itself, which costs
// tokenizing them; a non-nil Prompt must be the render of req.Items.
func (c *PrefixCache) Prefill(req *Request) (prompt, cached int) {
	if req == nil {
		req = &Request{}
	}
	hdr := c.headerHash(req.CacheKey, req.Instructions, req.Tools)
	p := req.Prompt
	if p == nil {
		for _, it := range req.Items {
			p = p.Append(c.r.Item(it))
		}
	}

	ring := ringOf(req.CacheRetention)

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.sinceLocked()
	c.expireLocked(now) // a conversation past its retention is no hit
	root, fresh := c.roots[hdr], false
	if root == nil {
		content := hdr
		if req.CacheKey != "" {
			content = c.headerHash("", req.Instructions, req.Tools)
		}
		n, ok := c.headerLens[content]
		if !ok {
			c.mu.Unlock()
			n = len(c.r.Header(req.Instructions, req.Tools))
			c.mu.Lock()
			now = c.sinceLocked()
			if len(c.headerLens) >= c.maxConvs {
				clear(c.headerLens)
			}
			c.headerLens[content] = n
		}
		if root = c.roots[hdr]; root == nil { // unless a concurrent Prefill added it meanwhile
			root, fresh = &prefixNode{header: hdr, own: n, total: n}, true
			c.roots[hdr] = root
			c.tokens += n
			c.pushLocked(root, ring, now)
		}
	}
	cached = c.walkLocked(root, hdr, p, ring, now)
	if fresh {
		cached = 0
	}
	prompt = root.total + p.Len()
	c.evictLocked()
	return prompt, cached
}

// headerOf is req's system block as an engine model sees it: the hash of
// its content (whatever its prompt_cache_key: one engine shares blocks by
// content alone), and its length in tokens.
func (c *PrefixCache) headerOf(req *Request) (hash uint64, n int) {
	hash = c.headerHash("", req.Instructions, req.Tools)
	c.mu.Lock()
	n, ok := c.headerLens[hash]
	c.mu.Unlock()
	if ok {
		return hash, n
	}
	n = len(c.r.Header(req.Instructions, req.Tools))
	c.mu.Lock()
	if len(c.headerLens) >= c.maxConvs {
		clear(c.headerLens)
	}
	c.headerLens[hash] = n
	c.mu.Unlock()
	return hash, n
}

// walkLocked finds the longest held prefix of p under root, walking back from
// the newest item to the first boundary held (root when none is), then holds
// every boundary after it, the conversation p is now in ring, used at now.
// It returns the tokens that prefix covers, system block included.
func (c *PrefixCache) walkLocked(root *prefixNode, hdr uint64, p *Prompt, ring int, now time.Duration) int {
	var buf [16]*Prompt
	missed := buf[:0]
	hit := root
	for s := p; s != nil; s = s.parent {
		if n := c.nodes[prefixKey{boundaryHash(hdr, s.sum), s.len}]; n != nil {
			hit = n
			break
		}
		missed = append(missed, s)
	}
	cached := hit.total
	at := hit
	for i := len(missed) - 1; i >= 0; i-- {
		s := missed[i]
		total := root.total + s.len
		if total == at.total {
			continue // an item of no tokens: the same boundary as the one before
		}
		n := &prefixNode{key: prefixKey{boundaryHash(hdr, s.sum), s.len}, parent: at, own: total - at.total, total: total}
		c.nodes[n.key] = n
		c.tokens += n.own
		if at.children == 0 {
			c.unlinkLocked(at)
		}
		at.children++
		c.pushLocked(n, ring, now)
		at = n
	}
	if at == hit && hit.children == 0 {
		// Nothing new, and the prompt is a whole conversation: it was used
		// now, and is kept as this request asks.
		c.unlinkLocked(hit)
		c.pushLocked(hit, ring, now)
	}
	return cached
}

// evictLocked drops least recently used conversations until the cache is
// within its bounds: the in_memory ones first.
func (c *PrefixCache) evictLocked() {
	for ring := range c.lru {
		s := &c.lru[ring]
		for (c.tokens > c.maxTokens || c.leaves > c.maxConvs || len(c.nodes) > c.maxBoundaries) && s.next != s {
			c.dropLocked(s.next)
		}
	}
}

// expireLocked drops the conversations whose retention has run out by
// now: each ring's, from its front.
func (c *PrefixCache) expireLocked(now time.Duration) {
	for ring := range c.lru {
		s := &c.lru[ring]
		for s.next != s && now-s.next.used >= c.retain[ring] {
			c.dropLocked(s.next)
		}
	}
}

// dropLocked drops the conversation that ends at leaf n, from its newest
// boundary back to the first one that another conversation still extends
// (or, when none does, with its system block).
func (c *PrefixCache) dropLocked(n *prefixNode) {
	c.unlinkLocked(n)
	for {
		c.tokens -= n.own
		if n.parent == nil {
			delete(c.roots, n.header)
			return
		}
		delete(c.nodes, n.key)
		n.parent.children--
		if n.parent.children > 0 {
			return
		}
		n = n.parent
	}
}

// pushLocked links n into ring as its most recently used leaf, used at now.
func (c *PrefixCache) pushLocked(n *prefixNode, ring int, now time.Duration) {
	s := &c.lru[ring]
	n.prev, n.next, n.used = s.prev, s, now
	s.prev.next = n
	s.prev = n
	c.leaves++
}

// unlinkLocked takes n out of its ring of leaves.
func (c *PrefixCache) unlinkLocked(n *prefixNode) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
	c.leaves--
}

// Stats reports what the cache holds, now.
func (c *PrefixCache) Stats() PrefixCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(c.sinceLocked())
	return PrefixCacheStats{Tokens: c.tokens, Boundaries: len(c.nodes), Conversations: c.leaves}
}

// Reset empties the cache, as a restarted engine would be: every next prompt
// is uncached. A benchmark that plays the same workload more than once resets
// between runs, or the later runs read the earlier runs' prompts for free.
func (c *PrefixCache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetLocked()
}

func (c *PrefixCache) resetLocked() {
	c.roots = make(map[uint64]*prefixNode)
	c.nodes = make(map[prefixKey]*prefixNode)
	c.headerLens = make(map[uint64]int)
	for i := range c.lru {
		s := &c.lru[i]
		s.prev, s.next = s, s
	}
	c.tokens, c.leaves = 0, 0
}

// headerHash hashes the cache key and what Renderer.Header renders: the instructions and each
// tool's type, name, description, parameters and definition as sent. It costs
// a pass over their bytes, far less than tokenizing them.
func (c *PrefixCache) headerHash(key, instructions string, tools []protocol.Tool) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	hashField(&h, key)
	hashField(&h, instructions)
	for _, t := range tools {
		hashField(&h, string(t.Type))
		hashField(&h, t.Name)
		if t.Description != nil {
			h.WriteByte(1)
			hashField(&h, *t.Description)
		} else {
			h.WriteByte(0)
		}
		hashBytes(&h, t.Parameters)
		hashBytes(&h, t.Raw)
	}
	return h.Sum64()
}

// hashField writes s with its length, so that fields cannot run into each other.
func hashField(h *maphash.Hash, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.WriteString(s)
}

func hashBytes(h *maphash.Hash, b []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// boundaryHash combines a system block's hash with the hash of the item
// tokens before a boundary (splitmix64's finalizer over their mix), so that
// the same items after another system block make another prefix.
func boundaryHash(header, items uint64) uint64 {
	x := header ^ (items * 0xbf58476d1ce4e5b9)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
