package runtime

import (
	"net/http"
	"sync/atomic"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/budget"
	"github.com/tether-run/tether/runtime/internal/outbox"
)

// The estimate of what a request holds while it is served: its decoded
// input, the input rendered to tokens, the model's answer and its frames,
// a few times the request's size (TestHostileFramesMemory measures it: 2-3×
// for a 12.5 MB create), and a floor for a rollout's own state.
const (
	requestAmplification = 4
	requestFloor         = 64 << 10
)

// requestCost is what a request of size bytes holds while it is served.
func requestCost(size int) int64 { return int64(size)*requestAmplification + requestFloor }

// HoldFrame takes n bytes of the server's memory budget (Limits.MaxMemory)
// for a frame the connection's transport is about to read, or says there
// is no room for it; release gives them back once the frame is read (its
// request then takes its own cost as it is decoded and admitted). A
// transport whose frames announce their length (WebTransport's length
// prefix) asks before it reads a large one, and on a refusal reads the
// frame past and returns [FrameRefused].
func (c *Connection) HoldFrame(n int64) (release func(), perr *protocol.Error) {
	if perr := c.srv.mem.Charge(n); perr != nil {
		return func() {}, perr
	}
	return func() { c.srv.mem.Refund(n) }, nil
}

// newOutbox is a queue of frames for a client (a connection's, an SSE
// stream's): what it holds, a slow reader's frames, counts in the memory
// budget until written or dropped.
func (s *Server) newOutbox() *outbox.Outbox {
	o := outbox.New(outQueueFrames, s.opts.Timeouts.SlowClient, s.tick)
	o.CountIn(s.mem)
	return o
}

// FrameRefused is what a FrameConn's Read returns for a frame it read to
// its end and dropped, the server's memory budget having no room for it:
// the session tells the client Err, and reads on.
type FrameRefused struct{ Err *protocol.Error }

func (e *FrameRefused) Error() string { return e.Err.Message }

// bytesPerToken is what the budget charges a rollout for each token of its
// context: the token in its rendered prompt (4 bytes) and the text it came
// from, about 4 bytes a token for prose and code. A context whose text
// tokenizes sparsely (a client's long run of one byte) is charged its
// bytes as they arrived besides (heldMemory.take at the append, the steer).
const bytesPerToken = 8

// heldMemory is what one rollout holds of the server's memory budget
// (Limits.MaxMemory) beyond the request that created it, which is charged
// only while it is served (requestCost): its context as it grows (the
// model's output, tool results), the input its client appends or steers
// in, and a woken rollout's state. A parked rollout keeps its charge for
// as long as it is in memory; its run's end (endRun: completed, failed,
// hibernated, handed over) gives all of it back. Its counts are atomic:
// the loop charges the context's growth, the read loop an append's or a
// steer's input, and the end may come on either.
type heldMemory struct {
	held atomic.Int64 // charged to the budget and not yet given back
	gone atomic.Bool  // the run has ended: what is taken now goes back at once
}

// take charges n bytes to b for the rollout, or says there is no room.
func (m *heldMemory) take(b *budget.Budget, n int64) *protocol.Error {
	if n <= 0 {
		return nil
	}
	if perr := b.Charge(n); perr != nil {
		return perr
	}
	m.held.Add(n)
	if m.gone.Load() { // the run ended meanwhile: nothing keeps it now
		b.Refund(m.held.Swap(0))
	}
	return nil
}

// giveBack returns n bytes take charged, for input the rollout did not keep.
func (m *heldMemory) giveBack(b *budget.Budget, n int64) {
	if n > 0 && m.held.Add(-n) >= 0 {
		b.Refund(n)
	} else if n > 0 {
		m.held.Add(n) // letGo gave it back already
	}
}

// letGo gives back everything the rollout holds, once and for all.
func (m *heldMemory) letGo(b *budget.Budget) {
	m.gone.Store(true)
	b.Refund(m.held.Swap(0))
}

// holdInput charges what its client sent into the rollout (an append's or
// a steer's frame, n bytes), before the rollout takes it.
func (r *rollout) holdInput(n int) *protocol.Error {
	return r.held.take(r.srv.mem, int64(n))
}

// contextFootprint is what the rollout's context holds by the budget's
// estimate: bytesPerToken for each token of its instructions and tools and
// of its prompt, and the text of its step's output not rendered yet, byte
// for byte (the model's output is measured as it streams: a final answer
// is never rendered).
func (r *rollout) contextFootprint() int64 {
	return bytesPerToken*int64(len(r.header)+r.prompt.Len()) + int64(r.stepOut)
}

// holdContext charges the budget with what the context grew by since its
// last charge (the loop's, or a wake's before its loop runs), or says
// there is no room: the response then ends failed, server_memory_full,
// and gives back all it held.
func (r *rollout) holdContext() *protocol.Error {
	grown := r.contextFootprint() - r.contextHeld
	if grown <= 0 {
		return nil
	}
	if err := r.held.take(r.srv.mem, grown); err != nil {
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerMemory, "",
			"This response's context has grown to about %d MiB, and this server's memory budget (--max-memory) has no room for more of it.", (r.contextFootprint()+1<<20-1)>>20)
	}
	r.contextHeld += grown
	return nil
}

// MemoryHeld is what the server's memory budget (Limits.MaxMemory) holds
// now: the requests in progress, what its rollouts hold, the connections'
// caches and the frames waiting for slow readers. 0 without a budget.
func (s *Server) MemoryHeld() int64 { return s.mem.Held() }
