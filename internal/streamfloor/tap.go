package streamfloor

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
)

// A Tape is what a client's connection carried: every byte it read, and
// the offsets in them at which it began each message it sent after the
// upgrade (a text or binary frame's: not a continuation, a ping or its
// close). Two messages sent with nothing read between have the same
// offset. Parse cuts it into a Recording.
type Tape struct {
	mu    sync.Mutex
	in    []byte
	marks []int
	out   frameScanner // the client's frames, as it writes them
}

// Read returns a copy of the bytes read and the marks.
func (t *Tape) Read() (in []byte, marks []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.in...), append([]int(nil), t.marks...)
}

// Tap wraps dial (an http.Transport's DialContext) so that each connection
// it makes records a Tape, which tapped is given as the connection opens.
func Tap(dial func(ctx context.Context, network, addr string) (net.Conn, error), tapped func(*Tape)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t := &Tape{}
		tapped(t)
		return &tapConn{Conn: c, t: t}, nil
	}
}

// tapConn records a connection's reads and marks its writes.
type tapConn struct {
	net.Conn
	t *Tape
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.mu.Lock()
	c.t.in = append(c.t.in, p[:n]...)
	c.t.mu.Unlock()
	return n, err
}

// Write marks where in what the client has read each message it sends
// begins, however the library cuts its frames into writes. The upgrade
// request, sent before anything was read, is not a message.
func (c *tapConn) Write(p []byte) (int, error) {
	c.t.mu.Lock()
	if at := len(c.t.in); at > 0 {
		c.t.out.scan(p, func() { c.t.marks = append(c.t.marks, at) })
	}
	c.t.mu.Unlock()
	return c.Conn.Write(p)
}

// frameScanner follows a stream of client WebSocket frames (RFC 6455,
// section 5.2), written in pieces of any size, and tells where each
// message begins.
type frameScanner struct {
	hdr  []byte // the header read so far of the frame that begins next
	left uint64 // payload bytes of the current frame still to come
}

// scan reads the next bytes of the stream, calling begin for each text or
// binary frame: a message's first.
func (f *frameScanner) scan(p []byte, begin func()) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(f.left, uint64(len(p)))
			f.left -= n
			p = p[n:]
			continue
		}
		f.hdr = append(f.hdr, p[0])
		p = p[1:]
		size, ok := headerSize(f.hdr)
		if !ok {
			continue
		}
		if op := f.hdr[0] & 0xf; op == 0x1 || op == 0x2 {
			begin()
		}
		f.left, f.hdr = size, f.hdr[:0]
	}
}

// headerSize is the payload length of the frame whose header is hdr, once
// hdr is the whole header.
func headerSize(hdr []byte) (uint64, bool) {
	if len(hdr) < 2 {
		return 0, false
	}
	n, at := uint64(hdr[1]&0x7f), 2
	switch n {
	case 126:
		at += 2
	case 127:
		at += 8
	}
	if hdr[1]&0x80 != 0 {
		at += 4 // the masking key
	}
	if len(hdr) < at {
		return 0, false
	}
	switch n {
	case 126:
		n = uint64(binary.BigEndian.Uint16(hdr[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(hdr[2:10])
	}
	return n, true
}
