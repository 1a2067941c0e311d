package runtime

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestCorkedFrames: the frames writeFrame puts in a batch reach a real
// client whole, in order and of their type, at every length where the
// header's length field changes form; the library's close frame ends
// them, and a frame after it fails as the library's own write would.
func TestCorkedFrames(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 125, 126, 127, 1000, 65535, 65536, 70000}
	payload := func(i, n int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, n) }
	late := make(chan error, 1)
	c := dialCorked(t, func(c *websocket.Conn, cc *corkedConn) error {
		for i, n := range sizes {
			if err := cc.writeFrame(i%2 == 1, payload(i, n)); err != nil {
				return err
			}
		}
		if err := cc.uncork(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		c.Close(websocket.StatusNormalClosure, "done") // waits for the client's close
		late <- cc.writeFrame(false, []byte("after the close"))
		return nil
	})
	for i, n := range sizes {
		typ, got, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("frame %d (%d bytes): %v", i, n, err)
		}
		want := websocket.MessageText
		if i%2 == 1 {
			want = websocket.MessageBinary
		}
		if typ != want || !bytes.Equal(got, payload(i, n)) {
			t.Fatalf("frame %d: %v of %d bytes, want %v of %d", i, typ, len(got), want, n)
		}
	}
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the frames: %v, want the server's close", err)
	}
	if err := <-late; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a frame after the close frame: %v, want net.ErrClosed", err)
	}
}

// TestCorkedCloseInBatch: a close frame that joins a batch (the library's
// answer to a client's close, written while the writer holds one) goes out
// after the frames before it, and no frame follows it.
func TestCorkedCloseInBatch(t *testing.T) {
	t.Parallel()
	c := dialCorked(t, func(_ *websocket.Conn, cc *corkedConn) error {
		if err := cc.writeFrame(false, []byte("before the close")); err != nil {
			return err
		}
		cc.Write([]byte{opClose, 2, 0x03, 0xe8}) // a close frame as the library writes it, whole: 1000
		if err := cc.writeFrame(false, []byte("after the close")); !errors.Is(err, net.ErrClosed) {
			return errors.New("a frame after the close frame: not refused")
		}
		return cc.uncork(time.Now().Add(10 * time.Second))
	})
	if _, got, err := c.Read(context.Background()); err != nil || string(got) != "before the close" {
		t.Fatalf("first frame: %q, %v", got, err)
	}
	if _, _, err := c.Read(context.Background()); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after it: %v, want the close", err)
	}
}

// dialCorked serves one WebSocket hijacked through corkingWriter, on which
// serve writes, and returns the client's end. What serve returns fails the
// test.
func dialCorked(t *testing.T, serve func(*websocket.Conn, *corkedConn) error) *websocket.Conn {
	t.Helper()
	failed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkingWriter{ResponseWriter: w}
		c, err := websocket.Accept(cw, r, nil)
		if err == nil {
			defer c.CloseNow()
			err = serve(c, cw.conn)
		}
		failed <- err
	}))
	t.Cleanup(func() {
		srv.Close()
		if err := <-failed; err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	c.SetReadLimit(-1)
	return c
}

// TestCorkedClosed: once the library has closed the connection (CloseNow,
// a failed read: no close frame), a batch's frames fail at once.
func TestCorkedClosed(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	cc := &corkedConn{Conn: a}
	cc.Close()
	if err := cc.writeFrame(false, []byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a frame on a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestCorkedTryUncork: a flusher's write that the socket does not take
// whole (a client not reading yet) reports blocked and keeps the rest
// held, corked, so that a frame written after it follows it; uncork then
// writes everything, and the client reads every frame whole, in order.
func TestCorkedTryUncork(t *testing.T) {
	t.Parallel()
	const frames, size = 16, 1 << 20 // far more than a loopback socket's buffers
	payload := func(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, size) }
	tried := make(chan bool, 1)
	c := dialCorked(t, func(c *websocket.Conn, cc *corkedConn) error {
		if cc.raw == nil {
			tried <- false
			return errors.New("a plain TCP connection has no raw descriptor")
		}
		for i := range frames {
			if err := cc.writeFrame(false, payload(i)); err != nil {
				return err
			}
		}
		blocked := cc.tryUncork()
		tried <- blocked
		if !blocked {
			return nil
		}
		if err := cc.writeFrame(true, []byte("after")); err != nil { // joins the rest, after it
			return err
		}
		if err := cc.uncork(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		if cc.tryUncork() { // nothing held: nothing to write
			return errors.New("an empty batch's try blocked")
		}
		return nil
	})
	if !<-tried {
		t.Fatal("16 MiB to a client not reading went out whole, or was not tried")
	}
	for i := range frames {
		typ, got, err := c.Read(context.Background())
		if err != nil || typ != websocket.MessageText || !bytes.Equal(got, payload(i)) {
			t.Fatalf("frame %d: %v of %d bytes, %v", i, typ, len(got), err)
		}
	}
	if typ, got, err := c.Read(context.Background()); err != nil || typ != websocket.MessageBinary || string(got) != "after" {
		t.Fatalf("the frame written after the try: %v %q %v", typ, got, err)
	}
}
