package runtime

import (
	"github.com/tether-run/tether/protocol"
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

// FrameRefused is what a FrameConn's Read returns for a frame it read to
// its end and dropped, the server's memory budget having no room for it:
// the session tells the client Err, and reads on.
type FrameRefused struct{ Err *protocol.Error }

func (e *FrameRefused) Error() string { return e.Err.Message }
