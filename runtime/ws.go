package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/budget"
)

// serveWebSocket upgrades GET /v1/responses and runs the session until the
// client goes away or the server shuts down. A plain GET (no Upgrade) is a
// 400 that says what the endpoint expects.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if !isWebSocketUpgrade(r) {
		writeError(w, protocol.Invalid(protocol.CodeInvalidValue, "", "GET /v1/responses is the WebSocket endpoint: connect with a WebSocket client, or POST to create a response over HTTP."))
		return
	}
	if perr := s.admitConn(Tenant(r.Context())); perr != nil {
		writeError(w, perr)
		return
	}
	// The client secret r was admitted with, if any, is spent as the
	// library accepts the handshake: one it refuses (the origin, a bad
	// handshake) leaves the secret for another try.
	cw := &corkingWriter{ResponseWriter: w, onAccept: func() *protocol.Error { return s.spendSecret(r) }}
	conn, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		// Codex offers permessage-deflate (with context takeover); openai-go does not.
		CompressionMode: websocket.CompressionContextTakeover,
		// A client that offers the msgpack subprotocol gets every frame
		// as msgpack binary (see session.encoding); JSON text otherwise.
		// "json" is there to be selected by a browser that offers a
		// client secret as a subprotocol (secrets.go): it fails a
		// handshake whose offered subprotocols got no answer.
		Subprotocols:   []string{protocol.EncodingMsgpack.String(), protocol.EncodingJSON.String()},
		OriginPatterns: s.opts.OriginPatterns,
	})
	if err != nil {
		s.releaseConn(Tenant(r.Context()))
		return // Accept has written the HTTP error
	}
	conn.SetReadLimit(s.opts.Limits.MaxFrame)
	ws := &wsConn{Conn: conn, cork: cw.conn, mem: s.mem, frameCost: 2 * s.opts.Limits.MaxFrame,
		deflate: strings.Contains(cw.Header().Get("Sec-WebSocket-Extensions"), "permessage-deflate")}
	sess := newSession(s, ws, r, encodingOf(conn), nil)
	if ws.CanTry() {
		sess.out.FlushBy(s.flushers)
	}
	if !s.track(sess) {
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		s.releaseConn(sess.tenant)
		return
	}
	// The session runs on a goroutine of its own and the handler returns,
	// so that net/http lets go of what it kept for the connection (its
	// write buffer, the handler's deep stack): thousands of idle
	// connections, each holding a parked rollout, feel every KB. Shutdown
	// waits for tracked sessions.
	ctx := context.WithoutCancel(r.Context()) // the request's ends with the handler
	go func() {
		defer s.releaseConn(sess.tenant)
		defer s.untrack(sess)
		sess.run(ctx)
		sess.scope.end()
		if s.opts.AccessLog {
			s.logAccess(r, sess.tenant, http.StatusSwitchingProtocols, sess.written.Load(), s.now().Sub(sess.started), sess.served.Load())
		}
	}()
}

// encodingOf is the encoding conn's client chose with its subprotocol.
func encodingOf(conn *websocket.Conn) protocol.Encoding {
	if conn.Subprotocol() == protocol.EncodingMsgpack.String() {
		return protocol.EncodingMsgpack
	}
	return protocol.EncodingJSON
}

// wsConn is a WebSocket as a session's FrameConn. Its writes go to the
// corked socket (cork, when the connection was hijacked through
// corkingWriter): a batch of frames leaves in one write.
type wsConn struct {
	*websocket.Conn
	cork      *corkedConn
	deflate   bool           // the connection compresses its messages (permessage-deflate): the library frames them
	mem       *budget.Budget // the server's: a large frame takes frameCost from it while it is read
	frameCost int64          // what reading the longest frame (Limits.MaxFrame) holds: its buffer, grown by doubling
}

// Read reads the next frame. A frame longer than peekFrame takes, as it
// grows past it, what the longest frame's buffer holds (frameCost) from the
// server's memory budget, all at once, so that many large frames arriving
// together cannot hold more than the budget before any is admitted, and
// those that find room are read whole (a frame that took its bytes a
// piece at a time could wait on the others, all of them read in part and
// none whole). One that finds no room is read to its end and dropped, and
// the client told (frameRefused). What it took is given back once it is
// read: its create then takes its own cost (connScope.reserve).
func (c *wsConn) Read(ctx context.Context) ([]byte, bool, error) {
	typ, r, err := c.Conn.Reader(ctx)
	if err != nil {
		return nil, false, err
	}
	var held int64
	defer func() { c.mem.Refund(held) }()
	b := *readBufs.Get().(*[]byte)
	if b == nil {
		b = make([]byte, 0, 512) // as io.ReadAll begins, which the unbounded path reads with
	}
	for {
		if len(b) == cap(b) {
			if !c.mem.Bounded() && cap(b) >= peekFrame {
				// With no budget to take from, a large frame is read as
				// the library's Read reads one, into a buffer of its own
				// grown by a quarter at a time: doubled, its peak would
				// be higher (TestHostileFramesMemory).
				whole, err := io.ReadAll(io.MultiReader(bytes.NewReader(b), r))
				c.Recycle(b)
				if err != nil {
					return nil, false, err
				}
				return whole, typ == websocket.MessageBinary, nil
			}
			if held == 0 && 2*cap(b) > peekFrame {
				if perr := c.mem.Charge(c.frameCost); perr != nil {
					if _, err := io.Copy(io.Discard, r); err != nil {
						return nil, false, err
					}
					return nil, false, &FrameRefused{perr}
				}
				held = c.frameCost
			}
			b = slices.Grow(b, cap(b))
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, typ == websocket.MessageBinary, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// readBufs are the buffers frames are read into, given back once decoded
// (Recycle), with a memory budget or without: read each into a new buffer,
// as the library's Read does, tools' outputs would be 11–14% of the bytes
// the server allocates at 500 streams. One grown past peekFrame is not
// kept: such a frame is rare, and it took its bytes from the budget while
// it was read (or, with none, was read into a buffer of its own).
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

// Recycle gives b, a frame Read returned and its reader is done with, back
// for another frame to be read into.
func (c *wsConn) Recycle(b []byte) {
	if cap(b) <= peekFrame {
		b = b[:0]
		readBufs.Put(&b)
	}
}

func (c *wsConn) Write(b []byte, binary bool, deadline time.Time) error {
	// Corked, a frame's write only fills memory: the deadline is the
	// flush's, and no timer is armed per frame (a context with a deadline
	// per batch cost 5% of the server's CPU at 500 streams).
	if c.cork != nil && !c.deflate {
		return c.cork.writeFrame(binary, b)
	}
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	if c.cork != nil {
		c.cork.cork()
		return c.Conn.Write(context.Background(), typ, b)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return c.Conn.Write(ctx, typ, b)
}

// TryFlush writes the batch as far as the socket takes it now (a
// flusher's; see corkedConn.tryUncork); blocked, Flush writes the rest.
func (c *wsConn) TryFlush() (blocked bool) {
	if c.cork == nil {
		return false
	}
	return c.cork.tryUncork()
}

// CanTry reports whether TryFlush can write without waiting: over the
// connection's own socket, or over TLS through records sealed in memory
// (flushers.Listener).
func (c *wsConn) CanTry() bool { return c.cork != nil && c.cork.raw != nil }

// flush writes the batch, on every path: a close frame the library wrote
// meanwhile is held with it.
func (c *wsConn) Flush(deadline time.Time) error {
	if c.cork == nil {
		return nil
	}
	return c.cork.uncork(deadline)
}

func (c *wsConn) Close(status CloseStatus, reason string) {
	// Close sends the close frame and waits for the client's; the read
	// loop then returns.
	c.Conn.Close(websocket.StatusCode(status), reason)
}

func (c *wsConn) Abort() { c.Conn.CloseNow() }
func (c *wsConn) Done()  { c.Conn.CloseNow() }

func (c *wsConn) Ordinary(err error) bool {
	return isNormalClose(err) || websocket.CloseStatus(err) != -1
}

// isNormalClose reports whether err is an ordinary end of a connection.
func isNormalClose(err error) bool {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusNoStatusRcvd:
		return true
	}
	return errors.Is(err, context.Canceled)
}

// isWebSocketUpgrade reports whether r asks for a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerContains(r.Header, "Connection", "upgrade") && headerContains(r.Header, "Upgrade", "websocket")
}

func headerContains(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}
