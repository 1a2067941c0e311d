package outbox

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/tether-run/tether/protocol"
)

// A stream's frames are mostly deltas of a few hundred bytes, one a token.
// The sinks encode each event into a buffer of their own (EventBuf) and the
// outbox copies it into a frame buffer it reuses (Outbox.PutCopy); a
// suspended rollout, which keeps its step's frames for a resume to replay,
// packs them into shared chunks (Packer). Either way a streamed token
// costs no allocation in steady state.

// EventBuf encodes a sink's events into one buffer, reused: the bytes
// encode returns are valid until its next call. A response event (a
// response object of some KB, a few a step) is encoded into a buffer from
// a pool instead, taken back at the next call, so that the buffer a
// rollout keeps stays small and the big one is not grown anew each time.
type EventBuf struct {
	b   []byte
	big *[]byte // the last response event's, from responseBufs
}

// Encode encodes ev, into bytes valid until the next call.
func (e *EventBuf) Encode(ev protocol.Event) ([]byte, error) {
	return e.EncodeWith(appendJSON, ev)
}

func appendJSON(b []byte, ev protocol.Event) ([]byte, error) { return protocol.AppendMarshal(b, ev) }

// EncodeWith is Encode with the framing of appendFrame (an SSE sink's).
func (e *EventBuf) EncodeWith(appendFrame func([]byte, protocol.Event) ([]byte, error), ev protocol.Event) ([]byte, error) {
	e.putBig()
	if _, ok := ev.(*protocol.ResponseEvent); ok {
		e.big = responseBufs.Get().(*[]byte)
		b, err := appendFrame((*e.big)[:0], ev)
		if cap(b) <= maxPooledEncode {
			*e.big = b
		}
		return b, err
	}
	b, err := appendFrame(e.b[:0], ev)
	if cap(b) <= maxKeptEncode {
		e.b = b
	}
	return b, err
}

// putBig gives the last response event's buffer back: the bytes encode
// returned for it are no longer in use.
func (e *EventBuf) putBig() {
	if e.big != nil {
		responseBufs.Put(e.big)
		e.big = nil
	}
}

// Release lets e's buffers go.
func (e *EventBuf) Release() {
	e.putBig()
	e.b = nil
}

// responseBufs are the buffers response events are encoded into; one
// grown past maxPooledEncode is not kept.
var responseBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEncode = 64 << 10

// maxKeptEncode is the largest buffer an EventBuf keeps: room for the
// deltas, not for a response object, which a parked rollout would keep for
// nothing.
const maxKeptEncode = 2 << 10

// Packed reports whether Packer.Keep packed b into a chunk,
// rather than copying it on its own.
func Packed(b []byte) bool { return len(b) <= packChunk/4 }

// Packer keeps immutable copies of frames in chunks of packChunk
// bytes: a step's deltas cost an allocation a chunk rather than one each,
// and pack the bytes tighter than their own allocations would. A frame
// larger than a quarter chunk is copied on its own.
//
// The chunks come from a pool the packers share. A frame kept is written
// again only once its packer's owner says that nothing holds it any more
// (Recycle): then the full chunks go back to the pool. Otherwise (Forget,
// Reset) they go to the collector, with whoever still holds a frame kept
// in them.
type Packer struct {
	chunk []byte             // the current chunk; what is past its length is free
	full  []*[packChunk]byte // the chunks filled since the last Recycle or Forget
	cur   *[packChunk]byte   // the current chunk's array
}

const packChunk = 4 << 10

// chunks are the packers' chunks, given back by Recycle.
var chunks = sync.Pool{New: func() any { return new([packChunk]byte) }}

// Keep returns a copy of b that nothing will write again until the
// packer's owner recycles it.
func (p *Packer) Keep(b []byte) []byte {
	if !Packed(b) {
		return bytes.Clone(b)
	}
	if cap(p.chunk)-len(p.chunk) < len(b) {
		if p.cur != nil {
			p.full = append(p.full, p.cur)
		}
		p.cur = chunks.Get().(*[packChunk]byte)
		p.chunk = p.cur[:0]
	}
	start := len(p.chunk)
	p.chunk = append(p.chunk, b...)
	return p.chunk[start:len(p.chunk):len(p.chunk)]
}

// Reset lets the current chunk go, to the collector: the frames kept in it
// keep it alive as long as they are kept. The chunks filled before it stay
// the packer's to recycle.
func (p *Packer) Reset() { p.chunk, p.cur = nil, nil }

// Recycle gives every chunk filled since the last Recycle or Forget back to
// the pool, and lets the current one go (Reset). The caller must know that
// nothing holds a frame kept in them any more, nor will: the frames are
// written, and no slice of them is left anywhere.
func (p *Packer) Recycle() {
	for i, c := range p.full {
		if poisonRecycled {
			for k := range c {
				c[k] = 0xff
			}
		}
		chunks.Put(c)
		p.full[i] = nil
	}
	p.full = p.full[:0]
	p.Reset()
}

// Forget lets every chunk filled since the last Recycle or Forget go to
// the collector, and the current one (Reset): some frame kept in them may
// still be held.
func (p *Packer) Forget() {
	clear(p.full)
	p.full = p.full[:0]
	p.Reset()
}

// Holds reports whether b is a frame kept in the current chunk, the one
// with room to spare: the earlier chunks are full but for less than a
// frame's bytes.
func (p *Packer) Holds(b []byte) bool {
	if len(b) == 0 || cap(p.chunk) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p.chunk)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return at >= start && at < start+uintptr(cap(p.chunk))
}
