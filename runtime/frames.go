package runtime

import (
	"bytes"

	"github.com/tether-run/tether/protocol"
)

// A stream's frames are mostly deltas of a few hundred bytes, one a token.
// The sinks encode each event into a buffer of their own (eventBuf) and the
// outbox copies it into a frame buffer it reuses (outbox.putCopy); a
// suspended rollout, which keeps its step's frames for a resume to replay,
// packs them into shared chunks (framePacker). Either way a streamed token
// costs no allocation in steady state.

// eventBuf encodes a sink's events into one buffer, reused: the bytes
// encode returns are valid until its next call.
type eventBuf struct{ b []byte }

func (e *eventBuf) encode(ev protocol.Event) ([]byte, error) {
	return e.encodeWith(appendJSON, ev)
}

func appendJSON(b []byte, ev protocol.Event) ([]byte, error) { return protocol.AppendMarshal(b, ev) }

// encodeWith is encode with the framing of appendFrame (an SSE sink's).
func (e *eventBuf) encodeWith(appendFrame func([]byte, protocol.Event) ([]byte, error), ev protocol.Event) ([]byte, error) {
	b, err := appendFrame(e.b[:0], ev)
	if cap(b) <= maxKeptEncode {
		e.b = b
	}
	return b, err
}

// maxKeptEncode is the largest buffer an eventBuf keeps: room for the
// deltas, not for a response object, which a parked rollout would keep for
// nothing.
const maxKeptEncode = 2 << 10

// framePacker keeps immutable copies of frames in chunks of packChunk
// bytes: a step's deltas cost an allocation a chunk rather than one each,
// and pack the bytes tighter than their own allocations would. A frame
// larger than a quarter chunk is copied on its own.
type framePacker struct {
	chunk []byte // the current chunk; what is past its length is free
}

const packChunk = 4 << 10

// keep returns a copy of b that nothing will write again.
func (p *framePacker) keep(b []byte) []byte {
	if len(b) > packChunk/4 {
		return bytes.Clone(b)
	}
	if cap(p.chunk)-len(p.chunk) < len(b) {
		p.chunk = make([]byte, 0, packChunk)
	}
	start := len(p.chunk)
	p.chunk = append(p.chunk, b...)
	return p.chunk[start:len(p.chunk):len(p.chunk)]
}

// reset lets the current chunk go: the frames kept in it keep it alive as
// long as they are kept.
func (p *framePacker) reset() { p.chunk = nil }
