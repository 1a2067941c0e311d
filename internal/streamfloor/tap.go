package streamfloor

import (
	"context"
	"net"
	"sync"
)

// A Tape is what a client's connection carried: every byte it read, and
// the offsets in them at which it sent a message after the upgrade.
// Parse cuts it into a Recording.
type Tape struct {
	mu    sync.Mutex
	in    []byte
	marks []int
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

// Write marks where in what the client has read it sends: a message the
// library writes in several pieces is marked once, as the server answers
// only once it has the whole. The upgrade request, sent before anything
// was read, is not a message.
func (c *tapConn) Write(p []byte) (int, error) {
	c.t.mu.Lock()
	if at := len(c.t.in); at > 0 && (len(c.t.marks) == 0 || c.t.marks[len(c.t.marks)-1] != at) {
		c.t.marks = append(c.t.marks, at)
	}
	c.t.mu.Unlock()
	return c.Conn.Write(p)
}
