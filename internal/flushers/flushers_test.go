package flushers

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter is a Conn with turns to run: each FlushTurn runs one, and counts
// the flushers running a turn at once.
type counter struct {
	turns   atomic.Int32 // left to run
	ran     atomic.Int32
	running *atomic.Int32
	most    *atomic.Int32
}

func (c *counter) FlushTurn() bool {
	n := c.running.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(50 * time.Microsecond) // a write: long enough for turns to overlap, if more ran
	c.running.Add(-1)
	c.ran.Add(1)
	return c.turns.Add(-1) > 0
}

// TestFlushers: every turn of every Conn runs, on at most the bound of
// goroutines at once, a Conn with more going to the back; and the
// flushers are gone once none waits.
func TestFlushers(t *testing.T) {
	const conns, turns, most = 20, 7, 3
	f := New(most)
	var running, highest atomic.Int32
	cs := make([]*counter, conns)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = &counter{running: &running, most: &highest}
		cs[i].turns.Store(turns)
		wg.Go(func() { f.Add(cs[i]) })
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if r, w := f.Running(); r == 0 && w == 0 {
			break
		}
		if time.Now().After(deadline) {
			r, w := f.Running()
			t.Fatalf("%d flushers running, %d waiting, after every turn", r, w)
		}
	}
	for i, c := range cs {
		if n := c.ran.Load(); n != turns {
			t.Errorf("conn %d: %d turns ran, want %d", i, n, turns)
		}
	}
	if n := highest.Load(); n > most || n < 1 {
		t.Errorf("%d turns at once, want 1 to %d", n, most)
	}
}

// TestQueueBounded: a queue that never drains (a Conn taken as another
// comes, ten waiting throughout) stays the size of what waits, not of what
// came.
func TestQueueBounded(t *testing.T) {
	f := New(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	for range 10 {
		f.pushLocked(&counter{})
	}
	for range 1_000_000 {
		f.pushLocked(&counter{})
		f.head++ // one taken
	}
	if waiting := len(f.q) - f.head; waiting != 10 || cap(f.q) > 64 {
		t.Fatalf("%d waiting in a queue of capacity %d, after a million came", waiting, cap(f.q))
	}
}

// TestTryWrite: over a real loopback socket whose peer does not read yet,
// a try takes what the socket's buffers hold and no more, without
// waiting; the connection's own Write finishes the rest, and the peer
// reads every byte in order. A closed connection takes nothing.
func TestTryWrite(t *testing.T) {
	server, client := loopback(t)
	sock := NewSocket(server)
	if sock == nil {
		t.Fatal("a TCP connection has no descriptor")
	}
	if NewSocket(struct{ io.Writer }{}) != nil {
		t.Fatal("a value with no descriptor gave one")
	}
	p := make([]byte, 64<<20) // far more than a loopback socket's buffers
	for i := range p {
		p[i] = byte(i * 7)
	}
	start := time.Now()
	n, blocked := sock.TryWrite(p)
	if n <= 0 || n >= len(p) || !blocked {
		t.Fatalf("a try of %d bytes to a peer not reading took %d (blocked %v)", len(p), n, blocked)
	}
	if again, blocked := sock.TryWrite(p[n:]); again != 0 || !blocked {
		t.Fatalf("a full socket took %d bytes more at once (blocked %v)", again, blocked)
	}
	if err := sock.Finish(); err != nil {
		t.Fatalf("a socket of its own had something to finish: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the tries waited %v", d) // bounds a wait for the peer (which never reads until below), not a timing
	}
	read := readAll(client)
	if _, err := server.Write(p[n:]); err != nil {
		t.Fatal(err)
	}
	server.Close()
	if got := <-read; !bytes.Equal(got, p) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(got), len(p))
	}
	if n, blocked := sock.TryWrite(p); n != 0 || !blocked {
		t.Fatalf("a closed connection took %d bytes (blocked %v)", n, blocked)
	}
}

// TestTryWriteAllocatesNothing: a try allocates nothing, over a socket of
// its own or over TLS, so that neither tether nor the floor allocates a
// write.
func TestTryWriteAllocatesNothing(t *testing.T) {
	plain, plainPeer := loopback(t)
	sealed, sealedPeer := tlsLoopback(t)
	for _, c := range []struct {
		name       string
		conn, peer net.Conn
	}{{"tcp", plain, plainPeer}, {"tls", sealed, sealedPeer}} {
		read := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, c.peer)
			read <- err
		}()
		sock := NewSocket(c.conn)
		p := []byte("a frame of a few bytes")
		allocs := testing.AllocsPerRun(1000, func() { sock.TryWrite(p) })
		if allocs != 0 && !(raceEnabled && c.name == "tls") { // TLS's records are in a pooled buffer
			t.Errorf("%s: a try allocates %v times", c.name, allocs)
		}
		c.conn.Close()
		if err := <-read; err != nil {
			t.Fatal(c.name, err)
		}
	}
}

// readAll reads c to its end on a goroutine of its own, and gives what it
// read.
func readAll(c net.Conn) <-chan []byte {
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		read <- b
	}()
	return read
}

// loopback returns the two ends of a TCP connection on loopback, closed
// when the test ends.
func loopback(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept() // nil when it fails
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server = <-accepted; server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return server, client
}
