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

// dial connects to the server's /v1/responses over c.Transport.
func (c *Client) dial(ctx context.Context) (conn, error) {
	if c.Transport == TransportWebTransport {
		return c.dialWebTransport(ctx)
	}
	return c.dialWebSocket(ctx)
}

// wsConn is one WebSocket connection to /v1/responses.
type wsConn struct {
	c   *websocket.Conn
	enc protocol.Encoding // the frames' encoding, agreed in the upgrade
}

func (c *Client) dialWebSocket(ctx context.Context) (*wsConn, error) {
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
	return &wsConn{c: conn, enc: c.Encoding}, nil
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

// decode is the server event in b, and what decoding it cost. A response
// is decoded without the tools it echoes: half of a pause's bytes, and of
// the time it takes to read on the way back to the tools.
func decode(b []byte, wire int) (protocol.Event, frameCost, error) {
	t0 := time.Now()
	ev, perr := protocol.DecodeEventLean(b)
	cost := frameCost{bytes: wire, codec: time.Since(t0)}
	if perr != nil {
		return nil, cost, fmt.Errorf("decode a server event: %w", perr)
	}
	return ev, cost, nil
}

// encodeAs is the client event ev in enc, and what encoding it cost.
func encodeAs(enc protocol.Encoding, ev any) ([]byte, frameCost, error) {
	t0 := time.Now()
	b, err := protocol.MarshalAs(enc, ev)
	return b, frameCost{bytes: len(b), codec: time.Since(t0)}, err
}

// decodeAs is the server event in b, a frame in enc, and what decoding it
// cost.
func decodeAs(enc protocol.Encoding, b []byte) (protocol.Event, frameCost, error) {
	if enc == protocol.EncodingJSON {
		return decode(b, len(b))
	}
	t0 := time.Now()
	js, err := protocol.ToJSON(enc, b)
	if err != nil {
		return nil, frameCost{bytes: len(b)}, fmt.Errorf("decode a server event: %w", err)
	}
	ev, cost, err := decode(js, len(b))
	cost.codec = time.Since(t0)
	return ev, cost, err
}

func (w *wsConn) send(ctx context.Context, ev any) (frameCost, error) {
	b, cost, err := encodeAs(w.enc, ev)
	if err != nil {
		return cost, err
	}
	typ := websocket.MessageText
	if w.enc == protocol.EncodingMsgpack {
		typ = websocket.MessageBinary
	}
	return cost, w.c.Write(ctx, typ, b)
}

func (w *wsConn) next(ctx context.Context) (protocol.Event, frameCost, error) {
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		return nil, frameCost{}, err
	}
	if binary := typ == websocket.MessageBinary; binary != (w.enc == protocol.EncodingMsgpack) {
		kind := "text"
		if binary {
			kind = "binary"
		}
		return nil, frameCost{bytes: len(b)}, fmt.Errorf("the server sent a %s frame on a %v connection", kind, w.enc)
	}
	return decodeAs(w.enc, b)
}

func (w *wsConn) close() { w.c.Close(websocket.StatusNormalClosure, "") }
func (w *wsConn) abort() { w.c.CloseNow() }

// sseStream is the body of one streaming POST /v1/responses.
type sseStream struct {
	body io.ReadCloser
	r    *bufio.Reader
}

// post sends req as a streaming create and returns its event stream and
// what the body cost.
func (c *Client) post(ctx context.Context, req *protocol.CreateRequest) (*sseStream, frameCost, error) {
	body, cost, err := encode(req)
	if err != nil {
		return nil, cost, err
	}
	base, err := protocol.APIBase(c.BaseURL)
	if err != nil {
		return nil, cost, err
	}
	u := base + "/responses"
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, cost, err
	}
	for k, v := range c.header() {
		hr.Header[k] = v
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	res, err := c.httpClient().Do(hr)
	if err != nil {
		return nil, cost, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		var e struct{ Error *protocol.ErrorPayload }
		if json.Unmarshal(msg, &e) != nil || e.Error == nil {
			return nil, cost, fmt.Errorf("POST %s: %s: %s", u, res.Status, bytes.TrimSpace(msg))
		}
		return nil, cost, fmt.Errorf("POST %s: %s: %w", u, res.Status, payloadError(*e.Error, res.StatusCode))
	}
	return &sseStream{body: res.Body, r: bufio.NewReaderSize(res.Body, 64<<10)}, cost, nil
}

// next reads one event ("event: T\ndata: JSON\n\n"). io.EOF means the
// stream ended.
func (s *sseStream) next() (protocol.Event, frameCost, error) {
	n := 0
	var data []byte
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
			if data == nil {
				continue
			}
			return decode(data, n)
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			if len(data) > maxFrame {
				return nil, frameCost{bytes: n}, fmt.Errorf("the server sent an event over the %d MiB limit", maxFrame>>20)
			}
		}
	}
}

func (s *sseStream) close() { s.body.Close() }
