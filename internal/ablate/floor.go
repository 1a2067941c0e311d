package ablate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// The physical floor: what the same bytes cost on the same loopback with no
// API behind them. An echo round trip sends one request of the turn's size
// and gets back as many frames (WebSocket) or SSE events (HTTP) as the turn
// received, of the same total size; the server does nothing else. A turn's
// overhead is compared with the floor of its own shape, measured in the same
// run.

// shape is what one turn put on the wire.
type shape struct {
	sent, received, events int
}

// echoServer serves the WebSocket and HTTP floors on one loopback listener,
// and the WebTransport floor on a UDP one when asked.
type echoServer struct {
	hs   *http.Server
	ln   net.Listener
	base string
	wt   *wtEcho // nil: no WebTransport design runs
}

func startEcho(wt bool) (*echoServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &echoServer{ln: ln, base: "http://" + ln.Addr().String()}
	if wt {
		if e.wt, err = startWTEcho(); err != nil {
			ln.Close()
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", e.serveWS)
	mux.HandleFunc("POST /sse", e.serveSSE)
	e.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go e.hs.Serve(ln)
	return e, nil
}

func (e *echoServer) close() {
	e.hs.Close()
	if e.wt != nil {
		e.wt.close()
	}
}

// parseShape reads "events received" from the start of a request.
func parseShape(b []byte) (events, received int, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("bad echo header %q", line)
	}
	if events, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	received, err = strconv.Atoi(f[1])
	return events, received, err
}

// frameSizes splits total bytes into n frames, as even as they come.
func frameSizes(n, total int) []int {
	n = max(n, 1)
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = total / n
		if i < total%n {
			sizes[i]++
		}
	}
	return sizes
}

func (e *echoServer) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	ctx := r.Context()
	buf := make([]byte, 0, 1<<16)
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		events, received, err := parseShape(b)
		if err != nil {
			c.Close(websocket.StatusPolicyViolation, err.Error())
			return
		}
		for _, n := range frameSizes(events, received) {
			buf = fill(buf, n)
			if err := c.Write(ctx, websocket.MessageText, buf); err != nil {
				return
			}
		}
	}
}

func (e *echoServer) serveSSE(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	events, received, err := parseShape(b)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	const framing = len("data: \n\n")
	var buf []byte
	for _, n := range frameSizes(events, received) {
		buf = fill(buf, max(n-framing, 0))
		io.WriteString(w, "data: ")
		w.Write(buf)
		io.WriteString(w, "\n\n")
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// fill is n bytes of 'x', in buf when it is big enough.
func fill(buf []byte, n int) []byte {
	if cap(buf) < n {
		buf = bytes.Repeat([]byte{'x'}, n)
	}
	return buf[:n]
}

// echoClient measures round trips against an echoServer: one WebSocket kept
// open, as the WebSocket designs keep theirs, and HTTP with keep-alive.
type echoClient struct {
	ws   *websocket.Conn
	wt   *wtEchoClient // nil without a WebTransport echo
	http *http.Client
	base string
}

func (e *echoServer) dial(ctx context.Context) (*echoClient, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.base, "http")+"/ws", nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	c := &echoClient{ws: ws, http: &http.Client{}, base: e.base}
	if e.wt != nil {
		if c.wt, err = e.wt.dial(ctx); err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("ablate: the WebTransport echo: %w", err)
		}
	}
	return c, nil
}

func (c *echoClient) close() {
	c.ws.Close(websocket.StatusNormalClosure, "")
	if c.wt != nil {
		c.wt.close()
	}
	c.http.CloseIdleConnections()
}

// request is a request body of n bytes that asks for s's answer.
func request(s shape) []byte {
	b := fmt.Appendf(nil, "%d %d\n", s.events, s.received)
	if len(b) < s.sent {
		b = append(b, bytes.Repeat([]byte{' '}, s.sent-len(b))...)
	}
	return b
}

// roundTripWS is one WebSocket echo of s: from sending to the last frame.
func (c *echoClient) roundTripWS(ctx context.Context, s shape) (time.Duration, error) {
	req := request(s)
	start := time.Now()
	if err := c.ws.Write(ctx, websocket.MessageText, req); err != nil {
		return 0, err
	}
	for range max(s.events, 1) {
		if _, _, err := c.ws.Read(ctx); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// roundTripHTTP is one HTTP echo of s: from sending the POST to the end of
// its SSE body.
func (c *echoClient) roundTripHTTP(ctx context.Context, s shape) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/sse", bytes.NewReader(request(s)))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	r := bufio.NewReaderSize(res.Body, 64<<10)
	if _, err := io.Copy(io.Discard, r); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
