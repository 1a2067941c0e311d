package outbox

import (
	"sync/atomic"
	"time"
)

// Frame is one frame in an outbox: its bytes, when it was queued, and the
// account of the response it belongs to (nil for a frame of none, such as
// an error event).
type Frame struct {
	Bytes []byte
	At    time.Time
	Acct  *Delivery
}

// Delivery is what one response's frames cost on their way out: encoding
// them (counted by the producer), waiting in the outbox and being written
// (counted by the writer). The rollout reads it when it reports its
// timings; the fields are atomic because those are different goroutines.
//
// Queued counts the response's frames in an outbox that its writer has not
// taken yet: while there are any, the client is behind and the rollout
// merges its deltas. Holding says it holds a merged delta back; the writer
// that takes the last of its queued frames calls Flush to send it, so that
// a delta never waits for the model's next one once the client has caught
// up. The rollout sets Holding before it looks at Queued, and the writer
// lowers Queued before it looks at Holding: one of them sees the other.
type Delivery struct {
	Frames, Encode, Wait, Write atomic.Int64 // frames written; nanoseconds encoding, waiting in the outbox, being written
	Queued                      atomic.Int64
	Holding                     atomic.Bool
	Flush                       func() // set before the first frame; takes the rollout's lock
}

// Behind reports whether frames of the response wait for the writer.
func (d *Delivery) Behind() bool { return d.Queued.Load() > 0 }

// Wrote counts one frame the writer wrote: how long it waited in the
// outbox, and its share of its write.
func (d *Delivery) Wrote(wait, write time.Duration) {
	d.Frames.Add(1)
	d.Wait.Add(int64(wait))
	d.Write.Add(int64(write))
}
