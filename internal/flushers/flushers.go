// Package flushers writes the queued bytes of many connections from a few
// goroutines, rather than a goroutine a connection each time bytes come.
//
// A writer goroutine started a batch kept every P's run queue full on a
// busy server, and a Go P polls the network only once its queue runs dry:
// a connection's reader then heard of its client's message late, from the
// runtime's monitor, and waited behind the writers (docs/measuring.md,
// "Where a step's time goes under load"). Flushers bound the writers to
// one a P, started as connections wait and gone when none does, so that
// an idle server holds none and nothing needs stopping.
//
// A flusher must never wait on a client: a Conn writes what its socket
// takes at once (Socket.TryWrite; over TLS, the records sealed in memory
// first, under a Listener's connections), and hands what the socket did
// not take to a writer of its own. tether's outboxes (runtime/internal/outbox) and the
// load runs' streaming floor (internal/streamfloor) are written by them
// alike, so that the floor schedules its writes as tether does.
package flushers

import (
	"crypto/tls"
	"sync"
	"syscall"
)

// A Conn is a connection with bytes to write.
type Conn interface {
	// FlushTurn writes a turn of the connection's batches, without
	// waiting on its client, and reports whether it has more to write:
	// then it goes to the back of the queue, so that a stream that never
	// stops (an unpaced model's) keeps no flusher from the others.
	FlushTurn() (more bool)
}

// Flushers run Conns' turns on at most a bound of goroutines at once.
type Flushers struct {
	max int

	mu      sync.Mutex
	q       []Conn // waiting for a flusher, oldest first from head; guarded by mu
	head    int    // guarded by mu
	running int    // guarded by mu
}

// New returns flushers that run at most n goroutines at once (at least
// one); a server gives them GOMAXPROCS.
func New(n int) *Flushers { return &Flushers{max: max(n, 1)} }

// Add queues c for a flusher, and starts one if fewer than the bound run.
// The caller queues a Conn once until its turn reports no more.
func (f *Flushers) Add(c Conn) {
	f.mu.Lock()
	f.pushLocked(c)
	start := f.running < f.max
	if start {
		f.running++
	}
	f.mu.Unlock()
	if start {
		go f.run()
	}
}

// run is a flusher: it runs the turns queued, one after another, and ends
// when none is.
func (f *Flushers) run() {
	for {
		f.mu.Lock()
		if f.head == len(f.q) {
			f.running--
			f.mu.Unlock()
			return
		}
		c := f.q[f.head]
		f.q[f.head] = nil
		f.head++
		f.mu.Unlock()
		if c.FlushTurn() {
			f.mu.Lock()
			f.pushLocked(c)
			f.mu.Unlock()
		}
	}
}

// pushLocked appends c to the queue, first moving the Conns waiting to its
// front once those taken are half of it: on a server that never drains
// it, the queue stays the size of what waits. The caller holds mu.
func (f *Flushers) pushLocked(c Conn) {
	if f.head > 0 && f.head >= len(f.q)/2 {
		n := copy(f.q, f.q[f.head:])
		clear(f.q[n:])
		f.q, f.head = f.q[:n], 0
	}
	f.q = append(f.q, c)
}

// Running reports how many flushers run and how many Conns wait for one.
func (f *Flushers) Running() (running, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running, len(f.q) - f.head
}

// A Socket writes to a connection's socket without waiting, for a
// flusher: straight to a connection's own socket, or, over TLS, through
// records sealed into memory first (Listener). A connection keeps one, so
// that a try allocates nothing; its owner calls TryWrite and Finish one at
// a time (under the lock that keeps the connection's writes whole).
type Socket struct {
	rc syscall.RawConn
	fn func(fd uintptr) bool // s.write, bound once

	p   []byte // the try's, while it runs
	n   int
	err error

	// Over TLS: the connection, and the connection under it whose
	// records a try seals (rc is then unused; the sealConn has its own).
	tls    *tls.Conn
	sealed *sealConn
}

// NewSocket returns a Socket on c's descriptor, or on the records of a
// *tls.Conn over a connection Listener accepted; nil when c has neither
// (a pipe, a TLS connection over another listener's): its writes then
// wait, on a writer of the connection's own.
func NewSocket(c any) *Socket {
	if tc, ok := c.(*tls.Conn); ok {
		return tlsSocket(tc)
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &Socket{rc: rc}
	s.fn = s.write
	return s
}

// TryWrite writes p in one write that does not wait. It returns how much
// of p it wrote, or over TLS sealed into records (all of it), and whether
// the socket is blocked: it took less than p, or not all the records. It
// takes nothing when the connection is closed, its deadline has passed or
// the write failed. Once blocked, the owner calls Finish, waiting, and then
// writes p[n:] with the connection's own Write, which fails with the
// connection's error if it has one.
func (s *Socket) TryWrite(p []byte) (n int, blocked bool) {
	if s.sealed != nil {
		return s.trySealed(p)
	}
	n = s.tryRaw(p)
	return n, n < len(p)
}

// Finish writes, waiting, what a blocked try left to write of its own:
// records sealed that the socket did not take, over TLS; nothing
// otherwise. It writes under the connection's write deadline.
func (s *Socket) Finish() error {
	if s.sealed != nil {
		return s.finishSealed()
	}
	return nil
}

// tryRaw writes p to the descriptor in one write that does not wait, and
// returns how much of it the socket took.
func (s *Socket) tryRaw(p []byte) int {
	s.p, s.n, s.err = p, 0, nil
	err := s.rc.Write(s.fn)
	s.p = nil
	if err != nil || s.err != nil {
		return 0
	}
	return s.n
}

// write is the try's, on the descriptor: once, the socket takes p now or
// not (RawConn.Write would wait for room when it reported false).
func (s *Socket) write(fd uintptr) bool {
	for {
		s.n, s.err = syscall.Write(int(fd), s.p)
		if s.err != syscall.EINTR {
			return true
		}
	}
}
