//go:build race

package outbox

// poisonRecycled has Recycle overwrite the chunks it gives back, so that
// a frame still held and read after its chunk was recycled is garbage,
// and the race detector sees the write against the read.
const poisonRecycled = true
