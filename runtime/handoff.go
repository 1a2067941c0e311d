package runtime

import "sync/atomic"

// A handoff lets a connection's reader drive on the rollout whose pause it
// has just answered, on its own goroutine, rather than start one for it:
// the reading goes on on a new goroutine instead (session.readOn). The
// client waits for the rollout, not for the next read; and on a busy
// server a goroutine started for the rollout waits its turn for a core
// behind the writers the engine has woken, on every round trip
// (docs/measuring.md, "Where a step's time goes under load").
//
// It is open while the reader answers a frame. A rollout's kick in that
// time, on whatever goroutine, offers the drive to it (rollout.handTo); the
// reader takes it once the frame is answered, and whichever of the two
// comes second finds the other: the drive is run once, by the reader or on
// a goroutine of the offerer's.
type handoff struct {
	open  atomic.Bool
	drive atomic.Pointer[func()]
}

// begin opens h for the frame the reader answers next; nil stays shut.
func (h *handoff) begin() {
	if h != nil {
		h.open.Store(true)
	}
}

// take closes h and returns the drive offered meanwhile, if any, for the
// caller to run.
func (h *handoff) take() func() {
	if h == nil {
		return nil
	}
	h.open.Store(false)
	if f := h.drive.Swap(nil); f != nil {
		return *f
	}
	return nil
}

// offer gives drive to h's reader, if h is open, and reports whether the
// reader will run it; if not, the caller runs it on a goroutine of its own.
// drive must not be run by the caller when it reports true.
func (h *handoff) offer(drive func()) bool {
	if h == nil || !h.open.Load() {
		return false
	}
	f := &drive
	if !h.drive.CompareAndSwap(nil, f) {
		return false // another drive waits for this reader: this one goes on its own
	}
	if h.open.Load() {
		return true // take, still to come, sees it
	}
	// take closed h meanwhile: either it took f, or it will never look.
	return !h.drive.CompareAndSwap(f, nil)
}
