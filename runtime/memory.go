package runtime

import (
	"net/http"
	"sync/atomic"

	"github.com/tether-run/tether/protocol"
)

// memoryBudget is the server's memory budget (Limits.MaxMemory): the bytes
// its requests will hold, taken as each is admitted and given back as it
// ends, and what the connections cache. One atomic: taken and given from
// any goroutine, without a lock.
type memoryBudget struct {
	max  int64 // 0: no budget
	held atomic.Int64
}

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

// charge takes n bytes from the budget, or says there is no room for them.
func (b *memoryBudget) charge(n int64) *protocol.Error {
	if b == nil || b.max <= 0 || n <= 0 {
		return nil
	}
	for {
		held := b.held.Load()
		if held+n > b.max {
			if n > b.max {
				return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerMemory, "",
					"This request would hold about %d MiB while it is served, more than this server's whole memory budget of %d MiB (Limits.MaxMemory). Send a smaller one.", n>>20, b.max>>20)
			}
			return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeServerMemory, "",
				"This server's requests in progress hold %d MiB of its memory budget of %d MiB (Limits.MaxMemory), and this one would need about %d MiB more. Retry shortly.", held>>20, b.max>>20, (n+1<<20-1)>>20)
		}
		if b.held.CompareAndSwap(held, held+n) {
			return nil
		}
	}
}

// add counts n bytes (a cache's), room or not: what is cached is already
// held; it makes the requests that follow wait.
func (b *memoryBudget) add(n int64) {
	if b != nil && b.max > 0 {
		b.held.Add(n)
	}
}

// refund gives back n bytes charge or add counted.
func (b *memoryBudget) refund(n int64) { b.add(-n) }

// HoldFrame takes n bytes of the server's memory budget (Limits.MaxMemory)
// for a frame the connection's transport is about to read, or says there
// is no room for it; release gives them back once the frame is read (its
// request then takes its own cost as it is decoded and admitted). A
// transport whose frames announce their length (WebTransport's length
// prefix) asks before it reads a large one, and on a refusal reads the
// frame past and returns [FrameRefused].
func (c *Connection) HoldFrame(n int64) (release func(), perr *protocol.Error) {
	if perr := c.srv.mem.charge(n); perr != nil {
		return func() {}, perr
	}
	return func() { c.srv.mem.refund(n) }, nil
}

// FrameRefused is what a FrameConn's Read returns for a frame it read to
// its end and dropped, the server's memory budget having no room for it:
// the session tells the client Err, and reads on.
type FrameRefused struct{ Err *protocol.Error }

func (e *FrameRefused) Error() string { return e.Err.Message }
