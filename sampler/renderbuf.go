package sampler

import (
	"slices"
	"sync"
	"unsafe"
)

// renderBuf is the text of a system block or an item, rendered to be
// tokenized: a strings.Builder's writing methods over a buffer from a pool.
// The text is read once, by the tokenizer, which keeps none of it (its
// cache of merges copies what it keeps), so the buffer is used again. A
// tool's output rendered into a new Builder, grown by doubling, would be
// 8% of the bytes the server allocates at 500 streams.
type renderBuf struct{ b []byte }

func (r *renderBuf) WriteString(s string) { r.b = append(r.b, s...) }

func (r *renderBuf) WriteByte(c byte) error {
	r.b = append(r.b, c)
	return nil
}

// Grow makes room for n more bytes.
func (r *renderBuf) Grow(n int) { r.b = slices.Grow(r.b, n) }

// text is what was written, valid until the buffer is released.
func (r *renderBuf) text() string { return unsafe.String(unsafe.SliceData(r.b), len(r.b)) }

// newRenderBuf is an empty buffer from the pool.
func newRenderBuf() *renderBuf { return renderBufs.Get().(*renderBuf) }

// release gives the buffer back, unless a very long text grew it past
// maxRenderBuf; nothing may read its text after.
func (r *renderBuf) release() {
	if cap(r.b) <= maxRenderBuf {
		r.b = r.b[:0]
		renderBufs.Put(r)
	}
}

var renderBufs = sync.Pool{New: func() any { return new(renderBuf) }}

const maxRenderBuf = 256 << 10
