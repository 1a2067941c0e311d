// Package stackroom grows a new goroutine's stack, while it is still
// shallow, to room for the deep calls it is about to make.
//
// A goroutine starts with a small stack, and grows it by doubling, each
// time copying what it holds and adjusting every frame on it: a goroutine
// that goes deep (a rollout's step: the sampler, the encoders, a socket's
// write) grows several times, deep each time. A rollout's step runs on a
// goroutine new at every resume (a parked loop is a value), so it would
// pay for that at every round trip. Make, called first, grows the stack
// once, while it holds one frame.
//
// Only a goroutine that would grow anyway gains: a stack grown past the
// size goroutines start with is freed when the goroutine exits, not kept
// for the next. A connection's writer, new at every batch, fits the
// stack it starts with (the runtime sizes that by the stacks it scans);
// made room for, it cost 2.7% of the server's CPU at 500 streams.
package stackroom

// size is the room Make makes: the stack grows to the 16 KiB of the
// runtime's per-P stack cache, which a step fits in.
const size = 12 << 10

// Make grows the calling goroutine's stack to about 16 KiB, unless it is
// that large already.
//
//go:noinline
func Make() {
	var room [size]byte
	keep(&room)
}

//go:noinline
func keep(*[size]byte) {}
