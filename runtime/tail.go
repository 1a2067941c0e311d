package runtime

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
)

// maxTailBytes bounds what the tails a server keeps hold, all together
// (tail.bytes); beyond it the oldest go first.
const maxTailBytes = 64 << 20

// A tail is the end of a suspended rollout that ended on a connection: the
// frames since its client last appended, and its terminal frame. The
// connection it went out on may have been dying (half-open: the writes
// succeed, nothing arrives), and nothing but the client can tell, so the
// server keeps the tail for the resume window, and a response.resume with
// the same credentials reads it back from the sequence_number it names,
// store or not. response.processed (Codex sends it for every response it
// has read) lets it go early. A tail is immutable once kept.
//
// Every rollout that ends on a WebSocket leaves one, for a minute by
// default, and few are ever read: a tail keeps its frames packed (newTail)
// into one allocation of their size, compressed. They repeat each other
// (the response object is in the response.in_progress that began the last
// step and in the terminal frame; each delta names its item): a small
// rollout's 4.3 KB of frames pack into 1.4 KB. Kept as the rollout left
// them, in the 4 KiB chunks its deltas were packed into as they streamed,
// they held 7.8 KB (TestStoredRolloutMemory).
type tail struct {
	id, creds, lane string
	packed          []byte        // the frames in sequence order, then the terminal frame (newTail)
	bytes           int           // what it holds: packed, and tailOverhead
	elem            *list.Element // in the server's tails, oldest first
	expiry          *time.Timer
}

// tailOverhead is what a kept tail holds besides its packed frames: the
// tail and its id, its expiry timer, its entries in the server's map and
// list of tails; about 510 bytes, measured (TestStoredRolloutMemory).
const tailOverhead = 512

// newTail packs frames (in sequence order) and terminal into a tail: the
// frames as a journal entry lays them out (appendFrames), then the
// terminal frame, compressed into an allocation of their compressed size.
// It copies what it keeps: the frames' bytes may stay with whoever holds
// them (a connection's queue).
func newTail(id, creds, lane string, frames []frame, terminal []byte) *tail {
	size := 2*binary.MaxVarintLen64 + len(terminal)
	for _, f := range frames {
		size += 2*binary.MaxVarintLen64 + len(f.b)
	}
	scratch := tailScratch.Get().(*tailBufs)
	defer scratch.put()
	body := appendFrames(slices.Grow(scratch.body[:0], size), frames)
	body = binary.AppendUvarint(body, uint64(len(terminal)))
	body = append(body, terminal...)
	if n := s2.MaxEncodedLen(len(body)); cap(scratch.packed) < n {
		scratch.packed = make([]byte, n) // s2 writes for the worst case
	}
	packed := bytes.Clone(s2.Encode(scratch.packed[:cap(scratch.packed)], body))
	scratch.body = body
	return &tail{id: id, creds: creds, lane: lane, packed: packed, bytes: len(packed) + tailOverhead}
}

// tailBufs are the buffers a tail is packed through (newTail): its frames
// laid end to end, and s2's output at its worst case. Every rollout that
// ends on a WebSocket packs one, and keeps only the packed bytes: through
// fresh buffers, these were 8% of the bytes a server allocated under
// load.
type tailBufs struct{ body, packed []byte }

var tailScratch = sync.Pool{New: func() any { return new(tailBufs) }}

// maxTailScratch is the largest buffer tailScratch keeps: a rollout's
// frames since its last append are a few KB; a long detached log's are not
// worth holding.
const maxTailScratch = 256 << 10

func (b *tailBufs) put() {
	if cap(b.body) > maxTailScratch {
		b.body = nil
	}
	if cap(b.packed) > maxTailScratch {
		b.packed = nil
	}
	tailScratch.Put(b)
}

// errTailUnreadable is a tail that does not unpack: never, unless the
// server's memory is corrupt.
var errTailUnreadable = errors.New("runtime: a kept tail does not unpack")

// since is what a client that has seen every frame up to after (nil: all
// that went out) has not: the frames after it, then the terminal frame.
func (t *tail) since(after *int) ([][]byte, error) {
	body, err := s2.Decode(nil, t.packed)
	if err != nil {
		return nil, errTailUnreadable
	}
	r := entryReader{b: body}
	frames, terminal := r.frames(), r.bytes()
	if !r.done() {
		return nil, errTailUnreadable
	}
	var out [][]byte
	if after != nil {
		for _, f := range frames {
			if f.seq > *after {
				out = append(out, f.b)
			}
		}
	}
	return append(out, terminal), nil
}
