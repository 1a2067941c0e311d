package webtransport

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	wtgo "github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// maxStreamHeader bounds a stream's header frame.
const maxStreamHeader = 1 << 10

// streamHeader is a stream's first frame.
type streamHeader struct {
	Encoding string `json:"encoding"`
}

// stream is a WebTransport stream as a session's runtime.FrameConn. The
// session's goroutines use it as FrameConn says: the read loop reads, the
// writer writes and flushes.
type stream struct {
	str    *wtgo.Stream
	max    int64               // the largest frame read (Limits.MaxFrame)
	conn   *runtime.Connection // whose server's memory budget a large frame takes (HoldFrame); nil: none (a stream refused at once)
	binary bool                // the stream's frames are msgpack

	release func() // gives back the stream's place among the connection's lanes; nil for one refused at once

	held    []byte // the batch being written, owned by the writer
	aborted atomic.Bool
	closed  atomic.Bool // Close has been called: a flush must not wait
}

// header reads the stream's header frame and returns its encoding.
func (c *stream) header() (protocol.Encoding, *protocol.Error) {
	b, err := c.readFrame(maxStreamHeader)
	var perr *protocol.Error
	switch {
	case errors.As(err, &perr):
		return 0, perr
	case err != nil:
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"Every WebTransport stream begins with a header frame, {\"encoding\":\"json\"} or {\"encoding\":\"msgpack\"}: %v.", err)
	}
	var h streamHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"A WebTransport stream's first frame is its header, a JSON object such as {\"encoding\":\"json\"} or {\"encoding\":\"msgpack\"} (%v).", err)
	}
	enc, err := protocol.ParseEncoding(h.Encoding)
	if err != nil || h.Encoding == "" {
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"Unsupported encoding %q in the stream header: want \"json\" or \"msgpack\".", h.Encoding)
	}
	return enc, nil
}

// refuseStream answers a stream that gets no session with one error event,
// in JSON (its encoding may be what was wrong), and closes it.
func refuseStream(str *wtgo.Stream, perr *protocol.Error) {
	c := &stream{str: str}
	deadline := time.Now().Add(time.Second)
	c.Write(runtime.ErrorFrame(perr), false, deadline)
	c.Flush(deadline)
	str.CancelRead(wtgo.StreamErrorCode(runtime.ClosePolicy))
	str.Close()
}

// errFrameTooLarge refuses a frame by its length prefix, before any of it
// is read.
func errFrameTooLarge(n, limit int64) *protocol.Error {
	return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeRequestTooLarge, "",
		"A frame of %d bytes exceeds this server's limit of %d bytes (Limits.MaxFrame): the stream is closed.", n, limit)
}

// readFrame reads one length-prefixed frame of at most limit bytes. The
// frame is read into a buffer that grows as its bytes arrive: a length
// prefix costs nothing until the bytes it promises come.
func (c *stream) readFrame(limit int64) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c.str, h[:]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(h[:]))
	if n > limit {
		return nil, errFrameTooLarge(n, limit)
	}
	if c.conn != nil && n > 64<<10 {
		// A large frame takes its bytes from the server's memory budget
		// before any of them is read (its length is known), all at once.
		release, perr := c.conn.HoldFrame(2 * n) // the buffer grows to twice what it holds at most
		defer release()
		if perr != nil {
			if _, err := io.CopyN(io.Discard, c.str, n); err != nil {
				return nil, err
			}
			return nil, &runtime.FrameRefused{Err: perr}
		}
	}
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<10)))
	if _, err := io.CopyN(&buf, c.str, n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the stream ended inside a frame
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *stream) Read(ctx context.Context) ([]byte, bool, error) {
	b, err := c.readFrame(c.max)
	return b, c.binary, err
}

func (c *stream) Write(b []byte, _ bool, _ time.Time) error {
	c.held = binary.BigEndian.AppendUint32(c.held, uint32(len(b)))
	c.held = append(c.held, b...)
	return nil
}

func (c *stream) Flush(deadline time.Time) error {
	if len(c.held) == 0 {
		return nil
	}
	c.str.SetWriteDeadline(deadline)
	if c.closed.Load() {
		// Close came first, or set its deadline before this one: it
		// must still unblock the write.
		c.str.SetWriteDeadline(time.Now())
	}
	_, err := c.str.Write(c.held)
	c.str.SetWriteDeadline(time.Time{})
	c.held = reuseHeld(c.held)
	return err
}

// Close stops the client's writes (the stream's error code says why) and
// unblocks a write in progress; Done then ends the server's side.
func (c *stream) Close(status runtime.CloseStatus, _ string) {
	c.closed.Store(true) // before the deadline: see Flush
	c.str.CancelRead(wtgo.StreamErrorCode(status))
	c.str.SetWriteDeadline(time.Now())
}

func (c *stream) Abort() {
	c.aborted.Store(true)
	c.str.CancelRead(0)
	c.str.CancelWrite(0)
}

// Done ends the server's side of the stream after the frames written: the
// client reads them, then the end of the stream.
func (c *stream) Done() {
	if c.release != nil {
		c.release() // before the stream ends: its client may open another at once
	}
	if !c.aborted.Load() {
		c.str.CancelRead(0)
		c.str.Close()
	}
}

func (c *stream) Ordinary(err error) bool {
	var se *wtgo.StreamError
	var sess *wtgo.SessionError
	return errors.Is(err, io.EOF) || errors.As(err, &se) || errors.As(err, &sess) || errors.Is(err, net.ErrClosed)
}

// maxHeldCap is the held buffer kept between batches; a larger one is let
// go, so that an idle stream (a parked rollout's) does not keep its last
// batch's: a streaming batch is a few hundred bytes.
const maxHeldCap = 1 << 10

// reuseHeld empties a written batch's buffer for the next batch, or lets
// it go past maxHeldCap.
func reuseHeld(b []byte) []byte {
	if cap(b) > maxHeldCap {
		return nil
	}
	return b[:0]
}
