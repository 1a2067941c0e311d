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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkingWriter{ResponseWriter: w}
		c, err := websocket.Accept(cw, r, nil)
		if err != nil {
			late <- err
			return
		}
		defer c.CloseNow()
		for i, n := range sizes {
			if err := cw.conn.writeFrame(i%2 == 1, payload(i, n)); err != nil {
				late <- err
				return
			}
		}
		if err := cw.conn.uncork(time.Now().Add(10 * time.Second)); err != nil {
			late <- err
			return
		}
		c.Close(websocket.StatusNormalClosure, "done") // waits for the client's close
		late <- cw.conn.writeFrame(false, []byte("after the close"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	for i, n := range sizes {
		typ, got, err := c.Read(ctx)
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
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the frames: %v, want the server's close", err)
	}
	if err := <-late; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a frame after the close frame: %v, want net.ErrClosed", err)
	}
}
