package runtime

import (
	"net/http"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/budget"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// connScope is what the lanes of one connection share: the connection-local
// cache of responses, the in-flight and queue limits, and the models it has
// routed. A WebSocket session has one of its own; on WebTransport each
// stream is a session of one lane, and the streams of a connection share
// one scope, as the lanes of a WebSocket do.
type connScope struct {
	slots chan struct{} // one token per response in flight

	mu         lockrank.Mutex[lockrank.ConnScope]
	cache      map[string]*conversation // response id -> state, guarded by mu
	cachedAt   map[string]uint64        // response id -> when it was cached (published), guarded by mu
	published  uint64                   // responses cached so far, guarded by mu
	cacheBytes int                      // conversation.bytes of the cache, guarded by mu (Limits.CacheBytes)
	latest     map[*lane][]string       // lane -> ids of its cached responses, oldest first (at most Limits.CacheResponses), guarded by mu
	evicted    map[string]struct{}      // ids a failed continuation evicted, guarded by mu
	pending    int                      // creates accepted and not finished, guarded by mu
	inBytes    int                      // the frame bytes of those creates (Limits.ConnBytes), guarded by mu
	routed     map[string]bool          // models this connection has resolved (the route hop is paid once), guarded by mu
	sessions   map[*session]struct{}    // the sessions in the scope (a WebTransport connection's streams), guarded by mu

	mcp mcpConns       // the MCP servers' tool lists and sessions its rollouts use
	mem *budget.Budget // the server's: the creates' costs and the cache count in it
}

// end is the connection's end: its cache goes with it.
func (c *connScope) end() {
	c.mcp.end()
	c.mu.Lock()
	c.mem.Refund(int64(c.cacheBytes))
	c.cacheBytes = 0
	c.mu.Unlock()
}

func newConnScope(opts *Options, mem *budget.Budget) *connScope {
	return &connScope{mem: mem,
		slots: make(chan struct{}, opts.Limits.MaxInFlight),
		cache: make(map[string]*conversation), cachedAt: make(map[string]uint64),
		latest:   make(map[*lane][]string),
		evicted:  make(map[string]struct{}),
		routed:   make(map[string]bool),
		sessions: make(map[*session]struct{}),
	}
}

// join and leave keep the scope's sessions, which elsewhere asks.
func (c *connScope) join(sess *session) {
	c.mu.Lock()
	c.sessions[sess] = struct{}{}
	c.mu.Unlock()
}

func (c *connScope) leave(sess *session) {
	c.mu.Lock()
	delete(c.sessions, sess)
	c.mu.Unlock()
}

// elsewhere reports whether response id runs on another session of the
// scope: a WebTransport stream's event that names a response of another
// stream is told so, as a WebSocket's naming another lane's is.
func (c *connScope) elsewhere(sess *session, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other := range c.sessions {
		if other == sess {
			continue
		}
		if ln, _ := other.running(id); ln != nil {
			return true
		}
	}
	return false
}

// find is the session of the connection running response id, and what
// session.running says of it there.
func (c *connScope) find(id string) (*session, *lane, occupant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sess := range c.sessions {
		if ln, occ := sess.running(id); ln != nil {
			return sess, ln, occ
		}
	}
	return nil, nil, occupant{}
}

// reserve takes a place in the connection's queue for a create of size
// bytes, or says why there is none: the queue is full, or the create does
// not fit the connection's byte budget.
func (c *connScope) reserve(size int, opts *Options) *protocol.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending >= opts.Limits.MaxQueued {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeQueueFull, "",
			"This connection already has %d responses running or queued. Wait for one to finish, or open another connection.", opts.Limits.MaxQueued)
	}
	if perr := c.overBudgetLocked(size, opts); perr != nil {
		return perr
	}
	if size > 0 {
		if perr := c.mem.Charge(requestCost(size)); perr != nil {
			return perr
		}
	}
	c.pending++
	c.inBytes += size
	return nil
}

// hold takes a place in the queue whatever its bounds, for a job the
// server makes itself (a wake at a pause's timeout); release gives it back.
func (c *connScope) hold() {
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
}

// release gives back what reserve took.
func (c *connScope) release(size int) {
	c.mu.Lock()
	c.pending--
	c.inBytes -= size
	c.mu.Unlock()
	if size > 0 {
		c.mem.Refund(requestCost(size))
	}
}

// overBudget says why a create of size bytes does not fit the
// connection's byte budget now, or returns nil.
func (c *connScope) overBudget(size int, opts *Options) *protocol.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overBudgetLocked(size, opts)
}

func (c *connScope) overBudgetLocked(size int, opts *Options) *protocol.Error {
	if c.inBytes > 0 && c.inBytes+size > opts.Limits.ConnBytes {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeConnectionBytes, "",
			"This connection already has %d bytes of requests running or queued, and this one would take it past its limit of %d. Wait for one to finish, or open another connection.", c.inBytes, opts.Limits.ConnBytes)
	}
	return nil
}

// lookup finds id in the cache; evicted says a failed continuation evicted
// it, and it stays unknown on this connection.
func (c *connScope) lookup(id string) (conv *conversation, evicted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, evicted = c.evicted[id]
	return c.cache[id], evicted
}

// route reports whether the connection has resolved model before, and
// remembers that it has now: the cache reuses model resolution and routing.
func (c *connScope) route(model string) (before bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before = c.routed[model]
	c.routed[model] = true
	return before
}

// publish caches conv as ln's newest response; past keep of them the
// lane's oldest goes. Past limit bytes the other lanes' responses go, least
// recently cached first; a continuation of one then reads the store, or
// gets previous_response_not_found, as after OpenAI's cache evicts it.
func (c *connScope) publish(ln *lane, conv *conversation, keep, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := append(c.latest[ln], conv.response.ID)
	for len(ids) > max(keep, 1) {
		c.uncacheLocked(ids[0])
		ids = ids[1:]
	}
	c.latest[ln] = ids
	id := conv.response.ID
	c.cache[id] = conv
	c.cacheBytes += conv.bytes()
	c.mem.Add(int64(conv.bytes()))
	c.published++
	c.cachedAt[id] = c.published
	for c.cacheBytes > limit && len(c.cache) > 1 {
		oldest, at := "", uint64(0)
		for other, n := range c.cachedAt {
			if other != id && (oldest == "" || n < at) {
				oldest, at = other, n
			}
		}
		c.uncacheLocked(oldest)
		for l, cached := range c.latest {
			c.latest[l] = slices.DeleteFunc(cached, func(x string) bool { return x == oldest })
		}
	}
}

// uncacheLocked drops id from the cache.
func (c *connScope) uncacheLocked(id string) {
	if conv, ok := c.cache[id]; ok {
		c.cacheBytes -= conv.bytes()
		c.mem.Refund(int64(conv.bytes()))
		delete(c.cache, id)
		delete(c.cachedAt, id)
	}
}

// evictAfterFailure drops parent, the response a continuation on ln failed
// from, when it is one of ln's cached responses, as OpenAI does; a fork
// from another lane keeps its parent.
func (c *connScope) evictAfterFailure(ln *lane, parent *conversation) {
	if parent == nil || parent.response == nil { // none, or a Conversations API conversation's items
		return
	}
	id := parent.response.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.latest[ln], id) {
		return
	}
	c.uncacheLocked(id)
	c.latest[ln] = slices.DeleteFunc(c.latest[ln], func(x string) bool { return x == id })
	if len(c.evicted) < maxEvicted {
		c.evicted[id] = struct{}{}
	}
}
