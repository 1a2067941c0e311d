package flushers

import (
	"crypto/tls"
	"net"
	"sync"
)

// Listener returns l with each connection it accepts made ready for a TLS
// server's flushers. Put under tls.Server (http.Server.ServeTLS wraps the
// listener it is given so), a connection seals its records into memory
// while a flusher tries a write, and the flusher writes them to the socket
// without waiting: NewSocket on the *tls.Conn returns a Socket that does.
// Otherwise its writes go straight to the socket, as they would unwrapped.
func Listener(l net.Listener) net.Listener { return sealingListener{l} }

type sealingListener struct{ net.Listener }

func (l sealingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sock := NewSocket(c)
	if sock == nil {
		return c, nil // no descriptor of its own: its TLS writes wait
	}
	return &sealConn{Conn: c, sock: sock}, nil
}

// sealConn is a connection under a tls.Conn. While a try seals (sealing),
// the records tls.Conn writes are kept in out, for the try to write what
// the socket takes at once; what it does not take waits there, and goes
// out first with the next write that waits (Write, or Socket.Finish), so
// the records leave in the order they were sealed.
type sealConn struct {
	net.Conn
	sock *Socket // the socket's own, for tries

	mu      sync.Mutex
	sealing bool    // guarded by mu
	out     *[]byte // records sealed and not yet written, from sealed; nil when none; guarded by mu
}

// sealed are the buffers of sealConns' records, held only while records
// wait: a connection that is not writing holds none. One grown past
// maxPooledSeal (a large batch to a client not reading) is not pooled
// again.
var sealed = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledSeal = 256 << 10

func (c *sealConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sealing {
		if c.out == nil {
			c.out = sealed.Get().(*[]byte)
		}
		*c.out = append(*c.out, p...)
		return len(p), nil
	}
	if err := c.finishLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// finishLocked writes the records waiting, waiting for the socket to take
// them (under the connection's write deadline). The caller holds mu.
func (c *sealConn) finishLocked() error {
	if c.out == nil {
		return nil
	}
	n, err := c.Conn.Write(*c.out)
	if err != nil {
		*c.out = (*c.out)[:copy(*c.out, (*c.out)[n:])]
		return err
	}
	c.releaseLocked()
	return nil
}

func (c *sealConn) releaseLocked() {
	if cap(*c.out) <= maxPooledSeal {
		*c.out = (*c.out)[:0]
		sealed.Put(c.out)
	}
	c.out = nil
}

// trySealed is TryWrite over TLS: it seals all of p into records in
// memory (tls.Conn.Write, which then waits on nothing but its own lock),
// and writes the records waiting in one write that does not wait. The
// only waits left are for tls.Conn's lock and the sealConn's, which a
// write that waits holds only when tls.Conn writes of itself (answering a
// client's key update, or its close_notify as it closes): every other
// write goes through the connection's owner, one at a time with its tries.
func (s *Socket) trySealed(p []byte) (n int, blocked bool) {
	c := s.sealed
	c.mu.Lock()
	c.sealing = true
	c.mu.Unlock()
	_, err := s.tls.Write(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sealing = false
	if err != nil {
		// The connection has failed, and tls.Conn keeps its error: the
		// connection's own Write of p fails with it.
		return 0, true
	}
	if c.out == nil {
		return len(p), false
	}
	w := c.sock.tryRaw(*c.out)
	if w == len(*c.out) {
		c.releaseLocked()
		return len(p), false
	}
	*c.out = (*c.out)[:copy(*c.out, (*c.out)[w:])]
	return len(p), true
}

// finishSealed is Finish over TLS.
func (s *Socket) finishSealed() error {
	s.sealed.mu.Lock()
	defer s.sealed.mu.Unlock()
	return s.sealed.finishLocked()
}

// tlsSocket returns a Socket that writes through c's records, or nil when
// c is not over a connection Listener accepted.
func tlsSocket(c *tls.Conn) *Socket {
	sc, ok := c.NetConn().(*sealConn)
	if !ok {
		return nil
	}
	return &Socket{tls: c, sealed: sc}
}
