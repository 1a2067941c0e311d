package runtime

import (
	"cmp"
	"container/heap"
	"context"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// This file is a server's background responses (background: true, over
// HTTP, as OpenAI serves them). Each is queued at its create and run when
// one of Background.Workers is free, the most urgent first (bgRank); its
// client may go away meanwhile: the response runs on. Its events go to its
// log (bgLog), which its create's stream, a resumed stream, a poll and a
// cancel read. Once it has ended it is kept Background.Retention for them;
// then only the store has it, when it was stored.

// backgrounds is a server's background responses, queued, running and
// kept.
type backgrounds struct {
	srv  *Server
	opts BackgroundOptions

	mu       lockrank.Mutex[lockrank.Backgrounds]
	byID     map[string]*bgResponse // every one not yet let go of; guarded by mu
	queue    bgQueue                // guarded by mu
	running  int                    // guarded by mu
	tenants  map[string]int         // queued or running, by tenant; guarded by mu
	seen     map[continuation]time.Time
	retained []*bgResponse // ended, oldest first; guarded by mu
	arrivals uint64        // guarded by mu
	sweeper  *time.Timer   // lets go of the oldest retained when its time comes; guarded by mu
	closed   bool          // Shutdown has begun: nothing more runs; guarded by mu

	started func(id string) // for tests: told as each run starts, in order
}

// bgResponse is one background response.
type bgResponse struct {
	id, tenant string
	ro         *rollout
	log        *bgLog
	held       int64 // the request's share of the memory budget, while it waits or runs
	rank       bgRank
	index      int           // in the queue, -1 once out of it; guarded by backgrounds.mu
	done       chan struct{} // closed when its run has ended
	epoch      uint64        // its epoch in Options.Backgrounds, when shared; set before its mirror starts
	endedAt    time.Time     // guarded by backgrounds.mu
}

// continuation is a line of related requests, as background_options names
// it: OpenAI serves a request that continues one sooner.
type continuation struct{ tenant, model, window, id string }

// bgRank orders the queue: the faster completion window first, within it
// a request that continues a line seen before (its continuation id, model
// and window), then arrival. This simulates OpenAI's priority among its
// pricing windows ("soonest" ahead of the discounted "2h" and "8h"); it is
// not their scheduler.
type bgRank struct {
	window    int // 0 soonest, 1 2h, 2 8h
	continues bool
	arrival   uint64
}

func (a bgRank) before(b bgRank) bool {
	switch {
	case a.window != b.window:
		return a.window < b.window
	case a.continues != b.continues:
		return a.continues
	}
	return a.arrival < b.arrival
}

var windowRanks = map[string]int{protocol.WindowSoonest: 0, protocol.Window2h: 1, protocol.Window8h: 2}

func newBackgrounds(s *Server) *backgrounds {
	return &backgrounds{srv: s, opts: s.opts.Background, byID: map[string]*bgResponse{},
		tenants: map[string]int{}, seen: map[continuation]time.Time{}}
}

// enqueue queues the prepared rollout ro, announced already on log
// (queued), holding held bytes of the memory budget for its request; it
// runs when a worker is free. It refuses when the server is shutting down,
// or ro's tenant has Background.Queue responses queued or running, unless
// it was taken over (its client was told it runs: the bound is for new
// ones). With Options.Backgrounds it counts it only: share queues it once
// the store has it.
func (b *backgrounds) enqueue(ro *rollout, log *bgLog, held int64, opts *protocol.BackgroundOptions, taken bool) (*bgResponse, *protocol.Error) {
	now := b.srv.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(now)
	switch n := b.tenants[ro.tenant]; {
	case b.closed:
		return nil, errShutdown()
	case n >= b.opts.Queue && !taken:
		return nil, protocol.Errorf(http.StatusTooManyRequests, protocol.CodeBackgroundQueueFull, "",
			"Your key's tenant already has %d background responses queued or running, the limit on this server (--background-queue). Wait for one to finish, or cancel one.", n)
	}
	b.arrivals++
	e := &bgResponse{id: ro.resp.ID, tenant: ro.tenant, ro: ro, log: log, held: held, done: make(chan struct{}),
		rank: bgRank{arrival: b.arrivals}, index: -1}
	if opts != nil {
		window := cmp.Or(opts.CompletionWindow, protocol.WindowSoonest)
		e.rank.window = windowRanks[window]
		if opts.ContinuationID != "" {
			c := continuation{ro.tenant, ro.req.Model, window, opts.ContinuationID}
			_, e.rank.continues = b.seen[c]
			b.seen[c] = now
		}
	}
	b.tenants[ro.tenant]++
	b.byID[e.id] = e
	if b.srv.opts.Backgrounds == nil {
		b.queueUpLocked(e)
	}
	return e, nil
}

// queueUpLocked puts e, counted by enqueue, in the queue; or, once
// Shutdown has begun, ends it as close ends the ones queued.
func (b *backgrounds) queueUpLocked(e *bgResponse) {
	if b.closed {
		e.ro.abortBackground(b.closeCause())
		b.goRunLocked(e)
		return
	}
	heap.Push(&b.queue, e)
	b.startLocked()
}

// forget undoes enqueue's count of e, which never ran.
func (b *backgrounds) forget(e *bgResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byID, e.id)
	if b.tenants[e.tenant]--; b.tenants[e.tenant] <= 0 {
		delete(b.tenants, e.tenant)
	}
}

// announceQueued begins a background response at its create, before it
// is queued: response.created (status queued) and response.queued go to
// log, which its run goes on with.
func (r *rollout) announceQueued(log *bgLog) {
	if rec := r.srv.opts.Recorder; rec != nil {
		rec.Created(r.start, r.resp.ID, r.path, r.req)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order.sink, r.order.streamID = log, r.lane
	r.bg = log
	r.resp.Status = protocol.ResponseQueued
	r.emitLocked(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCreated}, Response: r.resp})
	r.emitLocked(&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventQueued}, Response: r.resp})
}

// abortBackground ends background response r with cause. Left to another
// server (fenced, handed over), its log takes no event more first: what
// the run makes as it stops (a part closed early) is not the response's.
func (r *rollout) abortBackground(cause error) {
	if cause == errFenced || cause == errHandedOver {
		r.bg.release()
	}
	r.abort(cause)
}

// startLocked starts the most urgent queued responses while workers are
// free.
func (b *backgrounds) startLocked() {
	for b.running < b.opts.Workers && len(b.queue) > 0 && !b.closed {
		b.goRunLocked(heap.Pop(&b.queue).(*bgResponse))
	}
}

// goRunLocked runs e on a goroutine of its own, counted among the running
// (and so among the server's goroutines Shutdown waits for).
func (b *backgrounds) goRunLocked(e *bgResponse) {
	b.running++
	b.srv.wg.Add(1)
	go b.run(e)
}

// run runs e's rollout to its end, under the server's context: its
// client's requests come and go. A rollout aborted before it starts (a
// cancel, or Shutdown, while it was queued) ends at once, as its cause
// says.
func (b *backgrounds) run(e *bgResponse) {
	defer b.srv.wg.Done()
	if b.started != nil {
		b.started(e.id)
	}
	e.ro.run(WithTenant(b.srv.ctx, e.tenant), e.log)
	cause := context.Cause(e.ro.ctx)
	released := cause == errFenced || cause == errHandedOver
	e.log.end(released)
	if e.log.hasDiverged() {
		// Taken over and run again, its model did not make the events
		// its client had: they disagree from there on.
		b.srv.log.Warn("background response diverged from its first run", "response", e.id)
	}
	b.srv.mem.Refund(e.held)
	now := b.srv.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	if b.tenants[e.tenant]--; b.tenants[e.tenant] <= 0 {
		delete(b.tenants, e.tenant)
	}
	e.endedAt = now
	e.ro = nil // what a poll or resume reads is in the log
	if released {
		// Another server runs it, or will: the store has it, not this
		// server's log.
		delete(b.byID, e.id)
	} else {
		b.retained = append(b.retained, e)
	}
	close(e.done)
	b.startLocked()
	b.sweepLocked(now)
}

// find is tenant's background response id, nil when there is none (or it
// is another tenant's, which is the same to the client: not found).
func (b *backgrounds) find(tenant, id string) *bgResponse {
	now := b.srv.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(now)
	if e := b.byID[id]; e != nil && e.tenant == tenant {
		return e
	}
	return nil
}

// cancel cancels e, queued or running, and waits for it to end, or for ctx;
// one that has ended is left as it is. A queued one is taken out of the
// queue and run at once, to end as cancelled (its run begins with its
// cause).
func (b *backgrounds) cancel(ctx context.Context, e *bgResponse) {
	b.abort(e, errCancelled)
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}

// abort ends e with cause, queued or running: a queued one is taken out of
// the queue and run at once, to end as its cause says.
func (b *backgrounds) abort(e *bgResponse, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ro := e.ro; ro != nil {
		ro.abortBackground(cause)
		if e.index >= 0 && !b.closed {
			heap.Remove(&b.queue, e.index)
			b.goRunLocked(e)
		}
	}
}

// close ends the queue as Shutdown begins: the responses queued fail
// (server_shutting_down) at once, or, shared with other servers, are left
// for one of them to take over; those running get the drain, as every
// rollout does.
func (b *backgrounds) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queue) > 0 {
		e := heap.Pop(&b.queue).(*bgResponse)
		e.ro.abortBackground(b.closeCause())
		b.goRunLocked(e)
	}
	b.closed = true
	if b.sweeper != nil {
		b.sweeper.Stop()
	}
}

// closeCause is how Shutdown ends the responses queued: failed, or left to
// the servers that share them.
func (b *backgrounds) closeCause() error {
	if b.srv.opts.Backgrounds != nil {
		return errHandedOver
	}
	return errShuttingDown
}

// sweepLocked lets go of the responses whose retention has passed, and of
// the oldest kept ones while the memory budget is over (a newer response's
// log counted room or not); and forgets the continuations not seen within
// the retention. It sets the sweeper for the next one due.
func (b *backgrounds) sweepLocked(now time.Time) {
	for len(b.retained) > 0 {
		e := b.retained[0]
		if now.Sub(e.endedAt) < b.opts.Retention && !b.srv.mem.Over() {
			break
		}
		b.retained[0] = nil
		b.retained = b.retained[1:]
		delete(b.byID, e.id)
		e.log.drop()
	}
	for c, at := range b.seen {
		if now.Sub(at) >= b.opts.Retention {
			delete(b.seen, c)
		}
	}
	if len(b.retained) == 0 || b.closed {
		return
	}
	due := b.retained[0].endedAt.Add(b.opts.Retention).Sub(now)
	if b.sweeper == nil {
		b.sweeper = time.AfterFunc(due, b.sweep)
	} else {
		b.sweeper.Reset(due)
	}
}

func (b *backgrounds) sweep() {
	now := b.srv.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(now)
}

// bgQueue is the queued responses, a heap by bgRank.
type bgQueue []*bgResponse

func (q bgQueue) Len() int           { return len(q) }
func (q bgQueue) Less(i, j int) bool { return q[i].rank.before(q[j].rank) }
func (q bgQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *bgQueue) Push(x any) {
	e := x.(*bgResponse)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *bgQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*q = old[:len(old)-1]
	return e
}
