package runtime

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/runtime/internal/outbox"
)

// corkedConn is a WebSocket's hijacked connection, whose writes the
// session's writer holds back for the length of a batch and lets go in one
// write: coder/websocket flushes every frame it writes, so a batch of N
// queued frames would otherwise be N writes to the socket (N syscalls, N
// packets with TCP_NODELAY). Writes outside a batch (the library's pongs
// and close frames) go straight through; inside one they join it, in order.
//
// Unless the connection compresses (permessage-deflate, which the library
// does), the session's own frames do not go through the library:
// writeFrame frames them straight into the held batch. The library then
// writes only control frames, each whole in one Write (its write buffer
// holds the largest), so a close frame is seen here, and no data frame
// follows it.
type corkedConn struct {
	net.Conn

	mu       lockrank.Mutex[lockrank.Cork]
	corked   bool          // guarded by mu
	closing  bool          // a close frame went out or joined the batch, or the connection is closed; guarded by mu
	held     *[]byte       // a frame buffer (frameBufs) while corked; guarded by mu
	deadline time.Time     // the socket's write deadline; guarded by mu
	span     time.Duration // how far ahead it was set; guarded by mu

	// raw is the socket, for tryUncork's write that does not wait; nil
	// where the connection has none (a TLS connection over a listener
	// other than TLSListener's).
	raw   *flushers.Socket
	tried bool // a try was blocked: uncork finishes it (raw.Finish) first; guarded by mu
}

// opClose is the first byte of a WebSocket close frame (FIN, opcode 8).
const opClose = 0x88

func (c *corkedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Only writeFrame reads closing: where the library frames messages
	// (deflate) a write may be a piece of one, and no close frame.
	if len(p) > 0 && p[0] == opClose {
		c.closing = true
	}
	if c.corked {
		*c.held = append(*c.held, p...)
		return len(p), nil
	}
	if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		// A batch's deadline, passed while the connection idled: a pong or
		// a close frame is not bound by it.
		c.Conn.SetWriteDeadline(time.Time{})
		c.deadline = time.Time{}
	}
	return c.Conn.Write(p)
}

// Close closes the connection; the library closes it so, with or without
// a close frame (CloseNow, a failed read). A batch's frames fail from then
// on, rather than at its write.
func (c *corkedConn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// cork holds writes back until uncork, in a buffer from the frame buffers'
// pool: a connection holds one only while it writes.
func (c *corkedConn) cork() {
	c.mu.Lock()
	c.corkLocked()
	c.mu.Unlock()
}

func (c *corkedConn) corkLocked() {
	c.corked = true
	if c.held == nil {
		c.held = outbox.Buf()
	}
}

// writeFrame adds one of the session's messages to the batch, as a single
// unmasked WebSocket frame, text or binary (RFC 6455, section 5.2): the
// library's Write would take two of its locks, copy the payload into its
// buffer and flush it into the batch, per frame. It fails once a close
// frame has gone out or joined the batch, as the library's Write does.
func (c *corkedConn) writeFrame(isBinary bool, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return net.ErrClosed
	}
	c.corkLocked()
	*c.held = appendFrameHeader(*c.held, isBinary, len(p))
	*c.held = append(*c.held, p...)
	return nil
}

// appendFrameHeader appends the header of a final, unmasked frame of n
// bytes: FIN and the opcode, then the length in 7 bits, or 126 and 16 bits,
// or 127 and 64 bits.
func appendFrameHeader(b []byte, isBinary bool, n int) []byte {
	op := byte(0x81) // FIN, text
	if isBinary {
		op = 0x82
	}
	switch {
	case n < 126:
		return append(b, op, byte(n))
	case n <= 0xffff:
		return append(b, op, 126, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, op, 127), uint64(n))
	}
}

// uncork writes what was held back in one write, which must end by
// deadline, or at the earliest half way there (a client that does not read
// is cut then), and lets writes through again. The socket keeps a deadline
// set by an earlier batch while at least half of this one's time is left
// before it: setting one re-arms a runtime timer, and setting and clearing
// one each batch was 3.5% of the server's CPU at 500 streams.
func (c *corkedConn) uncork(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.held == nil {
		return nil // not corked
	}
	defer outbox.ReleaseBuf(&c.held)
	if len(*c.held) == 0 && !c.tried {
		return nil
	}
	// Set again once less than half of it is left (each flush's deadline
	// is as far ahead as the last was set): the clock is read then only.
	if c.deadline.IsZero() || deadline.Sub(c.deadline) > c.span/2 {
		c.Conn.SetWriteDeadline(deadline)
		c.deadline, c.span = deadline, deadline.Sub(monoNow())
	}
	if c.tried {
		c.tried = false
		if err := c.raw.Finish(); err != nil {
			return err
		}
	}
	if len(*c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.held)
	return err
}

// tryUncork is uncork for a flusher (package flushers), which must not wait
// on a client: one write of what is held, as much of it as the socket
// takes now. It reports blocked when the socket did not take it all: what
// is left stays held, or over TLS waits in records (tried), and the
// connection corked (a frame the library writes meanwhile joins it, after
// it), for uncork to write with its deadline. A connection with no socket
// to try is blocked at once, having written nothing.
func (c *corkedConn) tryUncork() (blocked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.corked = false
		return false // not corked
	}
	if len(*c.held) == 0 {
		c.corked = false
		outbox.ReleaseBuf(&c.held)
		return false
	}
	if c.raw == nil {
		return true
	}
	n, blocked := c.raw.TryWrite(*c.held) // what it did not take, uncork writes, or fails as the connection does
	if !blocked {
		c.corked = false
		outbox.ReleaseBuf(&c.held)
		return false
	}
	c.tried = true
	*c.held = (*c.held)[:copy(*c.held, (*c.held)[n:])]
	return true
}

// corkingWriter hands websocket.Accept a corkedConn when it hijacks the
// connection.
//
// onAccept, when set, is called as the library accepts the handshake: as it
// writes the 101, once every check that could refuse the handshake has
// passed. An error it returns is written instead of the 101, and the
// library, whose hijack then fails, gives up; what it writes after is
// dropped. A client secret is spent there (spendSecret). All of it runs on
// the handler's goroutine, inside Accept.
type corkingWriter struct {
	http.ResponseWriter
	conn     *corkedConn            // set by Hijack
	onAccept func() *protocol.Error // nil: nothing to do as the handshake is accepted
	refused  bool                   // onAccept refused the handshake
}

// errHandshakeRefused fails the library's hijack of a handshake that
// corkingWriter.onAccept refused.
var errHandshakeRefused = errors.New("runtime: the handshake was refused as it was accepted")

// upgradeHeaders are those the library sets for its 101: a refusal's
// answer goes without them. Read only.
var upgradeHeaders = []string{"Upgrade", "Connection", "Sec-WebSocket-Accept", "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions"}

func (w *corkingWriter) WriteHeader(status int) {
	if w.refused {
		return // the library's own error, after the refusal's
	}
	if status == http.StatusSwitchingProtocols && w.onAccept != nil {
		if perr := w.onAccept(); perr != nil {
			w.refused = true
			for _, h := range upgradeHeaders {
				w.Header().Del(h)
			}
			writeError(w.ResponseWriter, perr)
			return
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *corkingWriter) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.refused {
		return nil, nil, errHandshakeRefused
	}
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// net/http has flushed the response headers; what is buffered to read
	// stays in brw.Reader. Every frame the library writes goes to the held
	// buffer of a batch anyway, so its own write buffer need only take a
	// frame's header: a small one saves 4 KB a connection, which a server
	// holding thousands of idle ones (parked rollouts) feels.
	// Likewise net/http's 4 KB read buffer gives way to a small one unless
	// it holds bytes already (a frame sent right behind the upgrade): a
	// frame's payload larger than the buffer is read straight into place.
	w.conn = &corkedConn{Conn: conn, raw: flushers.NewSocket(conn)}
	br := brw.Reader
	if br.Buffered() == 0 {
		br = bufio.NewReaderSize(w.conn, wsReadBuffer)
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, wsWriteBuffer)), nil
}

// wsWriteBuffer and wsReadBuffer are the sizes of the library's buffers on
// a corked connection: a frame larger goes straight to the held batch, or
// is read straight into the message.
const (
	wsWriteBuffer = 512
	wsReadBuffer  = 1 << 10
)

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
