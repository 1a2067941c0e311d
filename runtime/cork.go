package runtime

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkedConn is a WebSocket's hijacked connection, whose writes the
// session's writer holds back for the length of a batch and lets go in one
// write: coder/websocket flushes every frame it writes, so a batch of N
// queued frames would otherwise be N writes to the socket (N syscalls, N
// packets with TCP_NODELAY). Writes outside a batch (the library's pongs
// and close frames) go straight through; inside one they join it, in order.
type corkedConn struct {
	net.Conn

	mu     sync.Mutex
	corked bool   // guarded by mu
	held   []byte // guarded by mu
}

func (c *corkedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// cork holds writes back until uncork.
func (c *corkedConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// maxHeldCap is the held buffer kept between batches; a larger one, left
// by an unusually large batch, is let go.
const maxHeldCap = 256 << 10

// uncork writes what was held back in one write, which must end by
// deadline (a client that does not read is cut there), and lets writes
// through again.
func (c *corkedConn) uncork(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.held) == 0 {
		return nil
	}
	c.Conn.SetWriteDeadline(deadline)
	_, err := c.Conn.Write(c.held)
	c.Conn.SetWriteDeadline(time.Time{})
	if cap(c.held) > maxHeldCap {
		c.held = nil
	} else {
		c.held = c.held[:0]
	}
	return err
}

// corkingWriter hands websocket.Accept a corkedConn when it hijacks the
// connection.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkedConn // set by Hijack
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// net/http has flushed the response headers; what is buffered to read
	// stays in brw.Reader.
	w.conn = &corkedConn{Conn: conn}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, brw.Writer.Available())), nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
