package runtime

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
)

// WebTransport serves a Server over HTTP/3 on UDP: a WebTransport CONNECT to
// /v1/responses opens a connection whose bidirectional streams are its
// lanes, each a session of one lane that speaks the WebSocket protocol's
// client and server events; every other request is served as over HTTP.
//
// A stream carries frames: a 4-byte big-endian length, then that many bytes.
// The client's first frame is the stream's header, a JSON object that names
// the encoding of every later frame in both directions:
//
//	{"encoding":"json"}  or  {"encoding":"msgpack"}
//
// The stream is the lane, so events name no stream_id. Closing or resetting
// the stream ends the lane as closing a WebSocket ends a connection: a
// cached-state response running on it is cancelled, a suspended rollout
// detaches (response.resume on a new stream takes it back). The streams of
// one connection share its cache (previous_response_id) and its limits.
type WebTransport struct {
	srv  *Server
	wt   *webtransport.Server
	pc   net.PacketConn
	ln   *quic.EarlyListener
	hash [32]byte // of the certificate
	wg   sync.WaitGroup
}

// ListenWebTransport serves the server's WebTransport endpoint on the UDP
// address addr ("127.0.0.1:0" picks a port) with cert (see
// SelfSignedCertificate), until Close.
//
// It runs the QUIC listener itself and hands each connection to
// webtransport-go (ServeQUICConn): the library's own Serve adds to a
// WaitGroup that its Close waits on, a race when Close comes as Serve
// starts.
func (s *Server) ListenWebTransport(addr string, cert tls.Certificate) (*WebTransport, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	w := &WebTransport{srv: s, pc: pc, hash: CertificateHash(cert)}
	h3 := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{
			EnableDatagrams:                  true,
			EnableStreamResetPartialDelivery: true,
			// A lane past MaxLanes gets websocket_stream_limit_reached on
			// its stream; QUIC itself stops a client well past that.
			MaxIncomingStreams: int64(s.opts.MaxLanes) + 16,
			KeepAlivePeriod:    15 * time.Second,
		},
		Handler: http.HandlerFunc(w.serveHTTP),
	}
	webtransport.ConfigureHTTP3Server(h3)
	w.wt = &webtransport.Server{H3: h3, CheckOrigin: s.checkOrigin}
	if w.ln, err = quic.ListenEarly(pc, h3.TLSConfig, h3.QUICConfig); err != nil {
		pc.Close()
		return nil, err
	}
	w.wg.Go(w.accept)
	return w, nil
}

// accept hands every QUIC connection to webtransport-go, until Close.
func (w *WebTransport) accept() {
	for {
		conn, err := w.ln.Accept(context.Background())
		if err != nil {
			return
		}
		w.wg.Go(func() {
			if err := w.wt.ServeQUICConn(conn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				w.srv.log.Debug("webtransport connection ended", "err", err)
			}
		})
	}
}

// URL is the endpoint's base URL, as the client kit takes it:
// https://HOST:PORT/v1.
//
// An endpoint on every interface (0.0.0.0, ::) names the loopback address,
// which a client on this machine can dial.
func (w *WebTransport) URL() string { return "https://" + DialableAddr(w.pc.LocalAddr()) + "/v1" }

// DialableAddr is addr as a client on this machine dials it: a listener
// on every interface (0.0.0.0 or ::) is reached at 127.0.0.1.
func DialableAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// CertificateHash is the hex SHA-256 of the endpoint's certificate, which
// pins it.
func (w *WebTransport) CertificateHash() string { return hex.EncodeToString(w.hash[:]) }

// Close stops taking connections and closes every one at once; call the
// Server's Shutdown first, which ends the sessions in order.
func (w *WebTransport) Close() error {
	err := w.ln.Close()
	w.wt.Close()
	w.wg.Wait()
	w.pc.Close()
	return err
}

// checkOrigin allows a request without an Origin header (not a browser),
// one from the server's own host, and one whose origin's host matches
// Options.OriginPatterns (path.Match patterns, as for WebSocket).
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range s.opts.OriginPatterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

func (w *WebTransport) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		w.srv.ServeHTTP(rw, r) // HTTP/3: the same endpoints as over TCP
		return
	}
	r, ok := w.srv.authenticate(rw, r)
	if !ok {
		return
	}
	if r.URL.Path != "/v1/responses" {
		writeError(rw, protocol.Errorf(http.StatusNotFound, protocol.CodeInvalidValue, "",
			"WebTransport is served on /v1/responses, not %s.", r.URL.Path))
		return
	}
	s := w.srv
	tenant := Tenant(r.Context())
	if perr := s.admitConn(tenant); perr != nil {
		writeError(rw, perr)
		return
	}
	defer s.releaseConn(tenant)
	if !s.checkOrigin(r) {
		writeError(rw, protocol.Errorf(http.StatusForbidden, protocol.CodeInvalidValue, "",
			"Origin %q is not allowed to connect (serve with --origin to allow it).", r.Header.Get("Origin")))
		return
	}
	conn, err := w.wt.Upgrade(rw, r)
	if err != nil {
		s.log.Debug("webtransport upgrade failed", "err", err)
		rw.WriteHeader(http.StatusBadRequest)
		return
	}
	// The streams of the connection share its scope; each runs a session
	// of one lane. The connection ends when its client closes it, or at
	// shutdown, once its sessions have gone away.
	scope := newConnScope(&s.opts)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	context.AfterFunc(conn.Context(), cancel)
	var lanes atomic.Int64
	var wg sync.WaitGroup
	for {
		str, err := conn.AcceptStream(ctx)
		if err != nil {
			break
		}
		wg.Go(func() {
			if lanes.Add(1) > int64(s.opts.MaxLanes) {
				refuseStream(str, protocol.Invalid(protocol.CodeStreamLimitReached, "",
					"This WebTransport connection already has %d streams open, its limit. Close one, or open another connection.", s.opts.MaxLanes))
			} else {
				w.serveStream(r, str, scope)
			}
			lanes.Add(-1)
		})
	}
	wg.Wait()
	scope.end()
	conn.CloseWithError(0, "")
}

// maxStreamHeader bounds a stream's header frame.
const maxStreamHeader = 1 << 10

// streamHeader is a stream's first frame.
type streamHeader struct {
	Encoding string `json:"encoding"`
}

// serveStream reads the stream's header, then runs its session.
func (w *WebTransport) serveStream(r *http.Request, str *webtransport.Stream, scope *connScope) {
	s := w.srv
	ws := &wtStream{str: str, max: s.opts.MaxFrame}
	str.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	enc, perr := ws.header()
	str.SetReadDeadline(time.Time{})
	if perr != nil {
		refuseStream(str, perr)
		return
	}
	ws.binary = enc == protocol.EncodingMsgpack
	sess := newSession(s, ws, r, enc, scope)
	sess.transport = transportWT
	if !s.track(sess) {
		sess.scope.leave(sess)
		sess.cancel()
		refuseStream(str, errShutdown())
		return
	}
	defer s.untrack(sess)
	sess.run(context.Background())
}

// header reads the stream's header frame and returns its encoding.
func (c *wtStream) header() (protocol.Encoding, *protocol.Error) {
	b, err := c.readFrame(maxStreamHeader)
	var perr *protocol.Error
	switch {
	case errors.As(err, &perr):
		return 0, perr
	case err != nil:
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"Every WebTransport stream begins with a header frame, {\"encoding\":\"json\"} or {\"encoding\":\"msgpack\"}: %v.", err)
	}
	var h streamHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"A WebTransport stream's first frame is its header, a JSON object such as {\"encoding\":\"json\"} or {\"encoding\":\"msgpack\"} (%v).", err)
	}
	enc, err := protocol.ParseEncoding(h.Encoding)
	if err != nil || h.Encoding == "" {
		return 0, protocol.Invalid(protocol.CodeUnsupportedEncoding, "encoding",
			"Unsupported encoding %q in the stream header: want \"json\" or \"msgpack\".", h.Encoding)
	}
	return enc, nil
}

// refuseStream answers a stream that gets no session with one error event,
// in JSON (its encoding may be what was wrong), and closes it.
func refuseStream(str *webtransport.Stream, perr *protocol.Error) {
	c := &wtStream{str: str}
	c.write(context.Background(), errorFrame(perr, ""), false)
	c.flush(time.Now().Add(time.Second))
	str.CancelRead(webtransport.StreamErrorCode(closePolicy))
	str.Close()
}

// wtStream is a WebTransport stream as a session's frameConn.
type wtStream struct {
	str    *webtransport.Stream
	max    int64 // the largest frame read (MaxFrame)
	binary bool  // the stream's frames are msgpack

	held    []byte // the batch being written
	aborted atomic.Bool
}

// errFrameTooLarge refuses a frame by its length prefix, before any of it
// is read.
func errFrameTooLarge(n, limit int64) *protocol.Error {
	return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeRequestTooLarge, "",
		"A frame of %d bytes exceeds this server's limit of %d bytes (--max-frame): the stream is closed.", n, limit)
}

// readFrame reads one length-prefixed frame of at most limit bytes. The
// frame is read into a buffer that grows as its bytes arrive: a length
// prefix costs nothing until the bytes it promises come.
func (c *wtStream) readFrame(limit int64) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c.str, h[:]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(h[:]))
	if n > limit {
		return nil, errFrameTooLarge(n, limit)
	}
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<10)))
	if _, err := io.CopyN(&buf, c.str, n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the stream ended inside a frame
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *wtStream) read(ctx context.Context) ([]byte, bool, error) {
	b, err := c.readFrame(c.max)
	return b, c.binary, err
}

func (c *wtStream) write(_ context.Context, b []byte, _ bool) error {
	c.held = binary.BigEndian.AppendUint32(c.held, uint32(len(b)))
	c.held = append(c.held, b...)
	return nil
}

func (c *wtStream) flush(deadline time.Time) error {
	if len(c.held) == 0 {
		return nil
	}
	c.str.SetWriteDeadline(deadline)
	_, err := c.str.Write(c.held)
	c.str.SetWriteDeadline(time.Time{})
	c.held = reuseHeld(c.held)
	return err
}

// close stops the client's writes (the stream's error code says why) and
// unblocks a write in progress; done then ends the server's side.
func (c *wtStream) close(status closeStatus, _ string) {
	c.str.CancelRead(webtransport.StreamErrorCode(status))
	c.str.SetWriteDeadline(time.Now())
}

func (c *wtStream) abort() {
	c.aborted.Store(true)
	c.str.CancelRead(0)
	c.str.CancelWrite(0)
}

// done ends the server's side of the stream after the frames written: the
// client reads them, then the end of the stream.
func (c *wtStream) done() {
	if !c.aborted.Load() {
		c.str.CancelRead(0)
		c.str.Close()
	}
}

func (c *wtStream) ordinary(err error) bool {
	var se *webtransport.StreamError
	var sess *webtransport.SessionError
	return errors.Is(err, io.EOF) || errors.As(err, &se) || errors.As(err, &sess) || errors.Is(err, net.ErrClosed)
}
