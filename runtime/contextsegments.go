package runtime

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/runtime/internal/seal"
)

// A context compaction item stands for the whole context before it, but
// need not hold it all: sealed whole, the nth item would hold what the n-1
// before it hold together, O(n²) bytes over a response or a conversation.
// When the server's Store keeps segments
// (CompactionSegments), an item holds the items since the previous
// compaction and a reference (seal.Ref: key, item count, span) to a
// segment, kept server-side under the tenant, that stands for the window
// the previous compaction stood for; a segment holds its own items and a
// reference to the one before it, down to one that holds its window whole.
// Its bytes are the previous item's content as it was sealed, or, when
// that would make the chain of segments longer than the merges below
// allow, a segment that seals several of the chain's segments' items
// again as one.
//
// The merges are a binary counter's carries: each segment's span is how
// many compactions' items it holds itself, the spans along a chain grow
// from its newest segment to its oldest, and a compaction whose previous
// item (span 1) would sit on a segment of span 1 merges the two into a
// segment of span 2, which merges with one of span 2, and so on. A chain
// under the nth compaction then has at most log₂ n + 1 segments, and each
// compaction's items are sealed again at most log₂ n times: O(n log n)
// bytes in the store, and an item of the size of what one compaction adds.
//
// Opening an item (openWindow) reads its chain, following references down
// to a segment that holds its window whole or to a window opened lately
// (windowCache), and checks each segment's bytes against its key and each
// window's length against its reference. A segment the store no longer
// keeps (dropped, expired, or the item was made by a server that does not
// share this one's store) is the client's error: errContextGone.

// maxSegmentHops bounds the segments one item's window is read from, far
// above what the merges let a chain reach (log₂ of the compactions):
// what passes it was not made by this package.
const maxSegmentHops = 64

// sealContext seals items, the context the rollout compacts now, into a
// compaction item's content: the items since its window's compaction and
// a reference to a segment that stands for the window, when the server
// keeps segments and the store took it; else the whole context, as a
// server without them does. It returns the window the item opens into.
func (r *rollout) sealContext(ctx context.Context, items protocol.Items) (string, window, error) {
	s, w := r.srv, r.win
	next := window{items: items}
	if s.segments != nil && w.n > 0 {
		if ref, under, ok := s.keepWindow(ctx, r.tenant, w, r.items[w.n-1].(*protocol.Compaction).EncryptedContent); ok {
			content, err := s.sealer.Seal(seal.Payload{Prev: &ref, Items: items[len(w.items):]})
			next.chain, next.bytes = append([]seal.Ref{ref}, under...), w.bytes+len(content)
			return content, next, err
		}
	}
	content, err := s.sealer.Seal(seal.Payload{Items: items})
	next.bytes = len(content)
	return content, next, err
}

// keepWindow puts in the store the segment that stands for w's items,
// read from the compaction item whose content is content, and returns the
// reference to it and the chain under it: the item's own bytes, a segment
// of span 1 over w's chain, or, when the newest segments of that chain are
// carried into it, their items and the item's sealed again as one over
// the rest (see above). false when the store does not take it: the caller
// seals the whole window instead, and the server says why in its log.
func (s *Server) keepWindow(ctx context.Context, tenant string, w window, content string) (seal.Ref, []seal.Ref, bool) {
	span, carried := 1, 0
	for carried < len(w.chain) && w.chain[carried].Span == span {
		span += w.chain[carried].Span
		carried++
	}
	if carried > 0 {
		var prev *seal.Ref
		from := 0
		if carried < len(w.chain) {
			prev = &w.chain[carried]
			from = prev.Items
		}
		merged, err := s.sealer.Seal(seal.Payload{Prev: prev, Items: w.items[from:]})
		if err != nil {
			s.log.Warn("compaction sealed whole: could not seal a merged segment", "err", err)
			return seal.Ref{}, nil, false
		}
		content = merged
	}
	seg, _ := seal.Segment(content) // the item's was opened, the merged one sealed here: both base64url
	key := seal.Key(seg)
	if err := s.segments.PutSegment(ctx, tenant, key, seg); err != nil {
		s.log.Warn("compaction sealed whole: the store did not keep its segment", "bytes", len(seg), "err", err)
		return seal.Ref{}, nil, false
	}
	return seal.Ref{Key: key, Items: len(w.items), Span: span}, w.chain[carried:], true
}

// openWindow opens the context compaction item it, at param (its
// encrypted_content's), under tenant: the items it stands for, read from
// the segments it refers to, or from a window opened lately. Its n is the
// caller's to set.
func (s *Server) openWindow(ctx context.Context, tenant string, it *protocol.Compaction, param string) (window, *protocol.Error) {
	seg, ok := seal.Segment(it.EncryptedContent)
	if !ok {
		return window{}, seal.Unverified(param)
	}
	key := seal.Key(seg)
	if w, ok := s.windows.get(tenant, key); ok {
		return w, nil
	}
	p, perr := s.sealer.OpenSegment(seg, param)
	if perr != nil {
		return window{}, perr
	}
	w := window{bytes: len(it.EncryptedContent)}
	tails := []protocol.Items{p.Items} // the item's own items, then each segment's read, newest first
	var base window                    // the window the chain ends on, when it ends on one opened lately
	for ref := p.Prev; ref != nil; {
		if len(w.chain) == maxSegmentHops {
			return window{}, protocol.Invalid(protocol.CodeInvalidEncrypted, param,
				"The compaction item %s refers through more than %d segments: this server did not make it.", it.ID, maxSegmentHops)
		}
		w.chain = append(w.chain, *ref)
		if cached, ok := s.windows.get(tenant, ref.Key); ok {
			base = cached
			w.chain = append(w.chain, cached.chain...)
			w.bytes += cached.bytes
			break
		}
		b, perr := s.segment(ctx, tenant, ref.Key, it, param)
		if perr != nil {
			return window{}, perr
		}
		q, perr := s.sealer.OpenSegment(b, param)
		if perr != nil {
			return window{}, perr
		}
		tails = append(tails, q.Items)
		w.bytes += len(b)
		ref = q.Prev
	}
	// Oldest first: each window read must be as long as the reference to
	// it says, the chain's own or one opened lately.
	items := slices.Clip(base.items)
	for j := len(tails) - 1; j >= 0; j-- {
		if j < len(w.chain) && w.chain[j].Items != len(items) {
			return window{}, protocol.Invalid(protocol.CodeInvalidEncrypted, param,
				"The compaction item %s refers to a window of %d items that opened into %d: this server did not make it.", it.ID, w.chain[j].Items, len(items))
		}
		items = append(items, tails[j]...)
	}
	w.items = slices.Clip(items)
	s.windows.put(tenant, key, w)
	return w, nil
}

// sealedKey is the key of a content this server sealed: the window
// cache's, and the store's once it is kept as a segment.
func sealedKey(content string) string {
	seg, _ := seal.Segment(content)
	return seal.Key(seg)
}

// segment reads the segment of key under tenant, for the compaction item
// it at param: errContextGone when the server does not keep it (or keeps
// bytes that are not it), a store's error as the client reads it.
func (s *Server) segment(ctx context.Context, tenant, key string, it *protocol.Compaction, param string) ([]byte, *protocol.Error) {
	if s.segments == nil {
		return nil, errContextGone(it, param)
	}
	b, err := s.segments.GetSegment(ctx, tenant, key)
	switch {
	case errors.Is(err, ErrNotStored):
		return nil, errContextGone(it, param)
	case err != nil:
		return nil, protocol.AsError(err) // a store's errors are StoreUnavailable
	case seal.Key(b) != key:
		s.log.Warn("a compaction segment read back is not the one put", "key", key)
		return nil, errContextGone(it, param)
	}
	return b, nil
}

// errContextGone: a compaction item that refers to a segment this server
// does not keep.
func errContextGone(it *protocol.Compaction, param string) *protocol.Error {
	name := "The compaction item"
	if it.ID != "" {
		name += " " + it.ID
	}
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidEncrypted, param,
		"%s refers to earlier context that this server no longer keeps (it expired or was dropped from the server's store, or the item was made by a server that does not share this one's store). Send the items it stands for instead, or start the conversation again.", name)
}

// windowCache holds the windows a server opened or sealed lately, by
// tenant and content key, so that a continuation from an item (a
// stateless client's, a store's) does not read its chain of segments at
// every turn, and a chain whose newer part is new reads only that part.
// Bounded by the bytes the windows were sealed in (window.bytes), the
// least recently used dropped first. Safe for concurrent use; its lock
// is a leaf.
type windowCache struct {
	max int
	mu  lockrank.Mutex[lockrank.Windows]
	by  map[segmentKey]*list.Element // of *cachedWindow; guarded by mu
	lru list.List                    // least recently used first; guarded by mu
	n   int                          // bytes held; guarded by mu
}

type cachedWindow struct {
	key segmentKey
	w   window
}

// defaultWindowCacheBytes bounds a server's window cache, unless a
// sixteenth of its memory budget is less.
const defaultWindowCacheBytes = 16 << 20

func newWindowCache(budget int64) *windowCache {
	n := defaultWindowCacheBytes
	if budget > 0 {
		n = int(min(int64(n), budget/16))
	}
	return &windowCache{max: n, by: make(map[segmentKey]*list.Element)}
}

func (c *windowCache) get(tenant, key string) (window, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.by[segmentKey{tenant, key}]
	if !ok {
		return window{}, false
	}
	c.lru.MoveToBack(e)
	return e.Value.(*cachedWindow).w, true
}

// put keeps w, its n left out, unless it is larger than the whole cache.
func (c *windowCache) put(tenant, key string, w window) {
	if w.bytes > c.max {
		return
	}
	w.n = 0
	k := segmentKey{tenant, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.by[k]; ok {
		c.lru.MoveToBack(e)
		return
	}
	c.by[k] = c.lru.PushBack(&cachedWindow{key: k, w: w})
	c.n += w.bytes
	for c.n > c.max {
		old := c.lru.Remove(c.lru.Front()).(*cachedWindow)
		delete(c.by, old.key)
		c.n -= old.w.bytes
	}
}
