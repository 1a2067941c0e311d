package clienttools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
)

// maxFrame bounds a frame or an SSE event the client reads.
const maxFrame = 64 << 20

// wsURL derives the WebSocket endpoint from a base URL as OpenAI clients take
// it (http://HOST:PORT/v1, or http://HOST:PORT, gives
// ws://HOST:PORT/v1/responses).
func wsURL(base string) (string, error) {
	base, err := protocol.APIBase(base, "http", "https", "ws", "wss")
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(base, "http"); ok {
		base = "ws" + rest // http: ws, https: wss
	}
	return base + "/responses", nil
}

// conn is a connection for the WebSocket designs (turns, suspend): a
// WebSocket, or a WebTransport stream. It is used by one goroutine at a
// time.
type conn interface {
	// send writes one client event, in the connection's encoding.
	send(ctx context.Context, ev any) (frameCost, error)
	// next reads one server event.
	next(ctx context.Context) (protocol.Event, frameCost, error)
	// close ends the connection in order; abort at once (it is broken).
	close()
	abort()
}

// dial connects to the server's /v1/responses over c.Transport; its events
// are decoded as keep says.
func (c *Client) dial(ctx context.Context, keep eventFilter) (conn, error) {
	if c.Transport == TransportWebTransport {
		return c.dialWebTransport(ctx, keep)
	}
	return c.dialWebSocket(ctx, keep)
}

// wsConn is one WebSocket connection to /v1/responses.
type wsConn struct {
	c  *websocket.Conn
	rd eventReader // its encoding agreed in the upgrade
	ctxWatch
}

func (c *Client) dialWebSocket(ctx context.Context, keep eventFilter) (*wsConn, error) {
	u, err := wsURL(c.BaseURL)
	if err != nil {
		return nil, err
	}
	opts := &websocket.DialOptions{HTTPClient: c.HTTPClient, HTTPHeader: c.header()}
	if c.Encoding == protocol.EncodingMsgpack {
		opts.Subprotocols = []string{c.Encoding.String()}
	}
	conn, res, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		return nil, dialError(u, res, err)
	}
	if c.Encoding == protocol.EncodingMsgpack && conn.Subprotocol() != c.Encoding.String() {
		conn.CloseNow()
		return nil, fmt.Errorf("dial %s: the server does not speak msgpack (no msgpack subprotocol in its upgrade)", u)
	}
	conn.SetReadLimit(maxFrame)
	return &wsConn{c: conn, rd: eventReader{enc: c.Encoding, keep: keep}}, nil
}

// dialError is the error of a WebSocket dial to u that failed, as a
// reader wants it: the server's refusal, or the status it answered
// instead of an upgrade, or why the request did not reach it, without the
// WebSocket library's own wording around it.
func dialError(u string, res *http.Response, err error) error {
	if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
		if pe := refusal(res); pe != nil {
			return fmt.Errorf("dial %s: %s: %w", u, res.Status, pe)
		}
		return fmt.Errorf("dial %s: %s, not a WebSocket upgrade", u, res.Status)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // the handshake request's error: dial tcp ..., a TLS failure, the context's
	}
	return fmt.Errorf("dial %s: %w", u, err)
}

// refusal is the error a server answered a WebSocket upgrade with instead
// of switching protocols, with its status; nil when there is no response
// or its body is not an OpenAI error.
func refusal(res *http.Response) *protocol.Error {
	if res == nil || res.StatusCode == http.StatusSwitchingProtocols || res.Body == nil {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e struct{ Error *protocol.ErrorPayload }
	if json.Unmarshal(msg, &e) != nil || e.Error == nil {
		return nil
	}
	return payloadError(*e.Error, res.StatusCode)
}

// frameCost is what one frame cost the client: its size on the wire and
// the time spent encoding or decoding it.
type frameCost struct {
	bytes int
	codec time.Duration
}

// encode is ev as JSON, and what encoding it cost.
func encode(ev any) ([]byte, frameCost, error) {
	t0 := time.Now()
	b, err := protocol.Marshal(ev)
	return b, frameCost{bytes: len(b), codec: time.Since(t0)}, err
}

// eventFilter says which server events a run decodes whole: nil, every
// one; otherwise those it reports true for, the others no further than
// their header (protocol.SkippedEvent), but a pause, decoded without its
// output.
type eventFilter func(protocol.EventType) bool

// eventReader decodes a connection's frames into events.
type eventReader struct {
	enc  protocol.Encoding // the frames'
	keep eventFilter
	buf  []byte // the frame being read; its space serves the next
}

// maxKeptBuf bounds the frame buffer a connection keeps between frames.
const maxKeptBuf = 256 << 10

// frame returns a buffer of n bytes for the next frame, reusing the last's.
func (rd *eventReader) frame(n int) []byte {
	if cap(rd.buf) < n || cap(rd.buf) > maxKeptBuf {
		rd.buf = make([]byte, n, max(n, 4<<10))
	}
	return rd.buf[:n]
}

// readFrame reads r to its end into the frame buffer.
func (rd *eventReader) readFrame(r io.Reader) ([]byte, error) {
	b := rd.frame(0)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, max(cap(b), 4<<10))
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			rd.buf = b
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decode is the server event in b, a frame of wire bytes on the wire, and
// what decoding it cost. A response is decoded without the tools it
// echoes: half of a pause's bytes, and of the time it takes to read on the
// way back to the tools. Decoding copies what it keeps: b may be reused.
func (rd *eventReader) decode(b []byte, wire int) (protocol.Event, frameCost, error) {
	t0 := time.Now()
	var ev protocol.Event
	var perr *protocol.Error
	if rd.keep == nil {
		ev, perr = protocol.DecodeEventLean(b)
	} else {
		ev, perr = protocol.DecodeEventSkipping(b, rd.keep)
	}
	cost := frameCost{bytes: wire, codec: time.Since(t0)}
	if perr != nil {
		return nil, cost, fmt.Errorf("decode a server event: %w", perr)
	}
	return ev, cost, nil
}

// decodeFrame is the server event in b, a frame in the reader's encoding,
// and what decoding it cost.
func (rd *eventReader) decodeFrame(b []byte) (protocol.Event, frameCost, error) {
	if rd.enc == protocol.EncodingJSON {
		return rd.decode(b, len(b))
	}
	t0 := time.Now()
	js, err := protocol.ToJSON(rd.enc, b)
	if err != nil {
		return nil, frameCost{bytes: len(b)}, fmt.Errorf("decode a server event: %w", err)
	}
	ev, cost, err := rd.decode(js, len(b))
	cost.codec = time.Since(t0)
	return ev, cost, err
}

// encodeAs is the client event ev in enc, and what encoding it cost.
func encodeAs(enc protocol.Encoding, ev any) ([]byte, frameCost, error) {
	t0 := time.Now()
	b, err := protocol.MarshalAs(enc, ev)
	return b, frameCost{bytes: len(b), codec: time.Since(t0)}, err
}

// ctxWatch ends a connection when the context it reads under ends, with one
// context.AfterFunc for as long as the context lasts rather than one a
// read (which a read given the context arms: a sixth of a client's CPU
// under load). Only the goroutine that reads uses it. A connection closed
// stays watched until its context ends (Run's, at the latest), when ending
// it again does nothing.
type ctxWatch struct {
	watched context.Context
	stop    func() bool
}

// watch makes ctx's end call end, once, unless ctx is already watched.
func (cw *ctxWatch) watch(ctx context.Context, end func()) {
	if ctx == cw.watched {
		return
	}
	if cw.stop != nil {
		cw.stop()
	}
	cw.watched, cw.stop = ctx, context.AfterFunc(ctx, end)
}

func (w *wsConn) send(ctx context.Context, ev any) (frameCost, error) {
	b, cost, err := encodeAs(w.rd.enc, ev)
	if err != nil {
		return cost, err
	}
	typ := websocket.MessageText
	if w.rd.enc == protocol.EncodingMsgpack {
		typ = websocket.MessageBinary
	}
	return cost, w.c.Write(ctx, typ, b)
}

func (w *wsConn) next(ctx context.Context) (protocol.Event, frameCost, error) {
	w.watch(ctx, func() { w.c.CloseNow() })
	typ, r, err := w.c.Reader(context.Background()) // ctx ends it through watch
	var b []byte
	if err == nil {
		b, err = w.rd.readFrame(r)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, frameCost{}, ctx.Err()
		}
		return nil, frameCost{}, err
	}
	if binary := typ == websocket.MessageBinary; binary != (w.rd.enc == protocol.EncodingMsgpack) {
		kind := "text"
		if binary {
			kind = "binary"
		}
		return nil, frameCost{bytes: len(b)}, fmt.Errorf("the server sent a %s frame on a %v connection", kind, w.rd.enc)
	}
	return w.rd.decodeFrame(b)
}

func (w *wsConn) close() { w.c.Close(websocket.StatusNormalClosure, "") }
func (w *wsConn) abort() { w.c.CloseNow() }

// sseStream is the body of one stream of a response's events: a streaming
// POST /v1/responses, or a background response's resume.
type sseStream struct {
	body io.ReadCloser
	r    *bufio.Reader
	rd   eventReader
}

// post sends req as a streaming create and returns its event stream, whose
// events are decoded as keep says, and what the body cost.
func (c *Client) post(ctx context.Context, req *protocol.CreateRequest, keep eventFilter) (*sseStream, frameCost, error) {
	body, cost, err := encode(req)
	if err != nil {
		return nil, cost, err
	}
	base, err := protocol.APIBase(c.BaseURL)
	if err != nil {
		return nil, cost, err
	}
	st, err := c.openStream(ctx, http.MethodPost, base+"/responses", body, keep)
	return st, cost, err
}

// openStream sends a request for an event stream, with body as its JSON
// body when there is one, and returns the stream, whose events are decoded
// as keep says. A status other than 200 is an error that wraps the
// server's *protocol.Error when it sent one.
func (c *Client) openStream(ctx context.Context, method, u string, body []byte, keep eventFilter) (*sseStream, error) {
	var rb io.Reader
	if body != nil {
		rb = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u, rb)
	if err != nil {
		return nil, err
	}
	for k, v := range c.header() {
		hr.Header[k] = v
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "text/event-stream")
	res, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		var e struct{ Error *protocol.ErrorPayload }
		if json.Unmarshal(msg, &e) != nil || e.Error == nil {
			return nil, fmt.Errorf("%s %s: %s: %s", method, u, res.Status, bytes.TrimSpace(msg))
		}
		return nil, fmt.Errorf("%s %s: %s: %w", method, u, res.Status, payloadError(*e.Error, res.StatusCode))
	}
	return &sseStream{body: res.Body, r: bufio.NewReaderSize(res.Body, 64<<10), rd: eventReader{keep: keep}}, nil
}

// next reads one event ("event: T\ndata: JSON\n\n"). io.EOF means the
// stream ended.
func (s *sseStream) next() (protocol.Event, frameCost, error) {
	n, got := 0, false
	data := s.rd.frame(0)
	for {
		line, err := s.r.ReadSlice('\n')
		n += len(line)
		if err != nil {
			if err == bufio.ErrBufferFull {
				// A data line longer than the buffer: read the rest whole.
				rest, err := s.r.ReadBytes('\n')
				if err != nil {
					return nil, frameCost{bytes: n}, err
				}
				line = append(append([]byte(nil), line...), rest...)
				n += len(rest)
			} else {
				return nil, frameCost{bytes: n}, err
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if !got {
				continue
			}
			s.rd.buf = data
			return s.rd.decode(data, n)
		case bytes.HasPrefix(line, []byte("data:")):
			got = true
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			if len(data) > maxFrame {
				return nil, frameCost{bytes: n}, fmt.Errorf("the server sent an event over the %d MiB limit", maxFrame>>20)
			}
		}
	}
}

func (s *sseStream) close() { s.body.Close() }
