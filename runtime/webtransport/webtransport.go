package webtransport

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wtgo "github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/internal/netaddr"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// transportLabel labels the responses served over WebTransport in the
// server's metrics.
const transportLabel = "wt"

// Endpoint is a runtime.Server's WebTransport endpoint, listening on a UDP
// address until Close. Its methods may be called from any goroutine.
type Endpoint struct {
	srv  *runtime.Server
	opts runtime.Options // srv's, with defaults
	wt   *wtgo.Server
	pc   net.PacketConn
	ln   *quic.EarlyListener
	hash [32]byte // of the certificate
	wg   sync.WaitGroup
}

// Listen serves srv's WebTransport endpoint on the UDP address addr
// ("127.0.0.1:0" picks a port) with cert (see SelfSignedCertificate),
// until Close. It returns once the endpoint listens; connections are served
// on goroutines of its own.
//
// It runs the QUIC listener itself and hands each connection to
// webtransport-go (ServeQUICConn): the library's own Serve adds to a
// WaitGroup that its Close waits on, a race when Close comes as Serve
// starts.
func Listen(srv *runtime.Server, addr string, cert tls.Certificate) (*Endpoint, error) {
	e, err := ListenTLS(srv, addr, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err == nil {
		e.hash = CertificateHash(cert)
	}
	return e, err
}

// ListenTLS is Listen with a TLS configuration of the caller's: one whose
// GetCertificate serves a certificate renewed while it runs, say. Its
// CertificateHash is zero: a certificate that changes is not pinned.
func ListenTLS(srv *runtime.Server, addr string, cfg *tls.Config) (*Endpoint, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	e := &Endpoint{srv: srv, opts: srv.Options(), pc: pc}
	h3 := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(cfg),
		QUICConfig: &quic.Config{
			EnableDatagrams:                  true,
			EnableStreamResetPartialDelivery: true,
			// A lane past Limits.MaxLanes gets websocket_stream_limit_reached on
			// its stream; QUIC itself stops a client well past that.
			MaxIncomingStreams: int64(e.opts.Limits.MaxLanes) + 16,
			KeepAlivePeriod:    15 * time.Second,
		},
		Handler: http.HandlerFunc(e.serveHTTP),
	}
	wtgo.ConfigureHTTP3Server(h3)
	// OpenConnection has checked the origin by the server's rules before
	// Upgrade asks.
	e.wt = &wtgo.Server{H3: h3, CheckOrigin: func(*http.Request) bool { return true }}
	if e.ln, err = quic.ListenEarly(pc, h3.TLSConfig, h3.QUICConfig); err != nil {
		pc.Close()
		return nil, err
	}
	e.wg.Go(e.accept)
	return e, nil
}

// accept hands every QUIC connection to webtransport-go, until Close.
func (e *Endpoint) accept() {
	for {
		conn, err := e.ln.Accept(context.Background())
		if err != nil {
			return
		}
		e.wg.Go(func() {
			if err := e.wt.ServeQUICConn(conn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				e.srv.Logger().Debug("webtransport connection ended", "err", err)
			}
		})
	}
}

// URL is the endpoint's base URL, as the client kit takes it:
// https://HOST:PORT/v1.
//
// An endpoint on every interface (0.0.0.0, ::) names the loopback address,
// which a client on this machine can dial.
func (e *Endpoint) URL() string { return "https://" + netaddr.Dialable(e.pc.LocalAddr()) + "/v1" }

// CertificateHash is the hex SHA-256 of the endpoint's certificate, which
// pins it.
func (e *Endpoint) CertificateHash() string { return hex.EncodeToString(e.hash[:]) }

// Close stops taking connections and closes every one at once; call the
// Server's Shutdown first, which ends the sessions in order. It returns
// once every goroutine of the endpoint has.
func (e *Endpoint) Close() error {
	err := e.ln.Close()
	e.wt.Close()
	e.wg.Wait()
	e.pc.Close()
	return err
}

// serveHTTP serves one HTTP/3 request: a WebTransport CONNECT to
// /v1/responses is a connection, served until it ends; any other request
// is the server's.
func (e *Endpoint) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		e.srv.ServeHTTP(rw, r) // HTTP/3: the same endpoints as over TCP
		return
	}
	r, ok := e.srv.Authenticate(rw, r)
	if !ok {
		return
	}
	if r.URL.Path != "/v1/responses" {
		runtime.WriteError(rw, protocol.Errorf(http.StatusNotFound, protocol.CodeInvalidValue, "",
			"WebTransport is served on /v1/responses, not %s.", r.URL.Path))
		return
	}
	c, perr := e.srv.OpenConnection(r, transportLabel)
	if perr != nil {
		runtime.WriteError(rw, perr)
		return
	}
	defer c.Close()
	conn, err := e.wt.Upgrade(rw, r)
	if err != nil {
		e.srv.Logger().Debug("webtransport upgrade failed", "err", err)
		rw.WriteHeader(http.StatusBadRequest)
		return
	}
	// The streams of the connection share its scope; each runs a session
	// of one lane. The connection ends when its client closes it, or at
	// shutdown, once its sessions have gone away.
	ctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	context.AfterFunc(conn.Context(), cancel)
	maxLanes := e.opts.Limits.MaxLanes
	var lanes atomic.Int64
	var wg sync.WaitGroup
	for {
		str, err := conn.AcceptStream(ctx)
		if err != nil {
			break
		}
		wg.Go(func() {
			// A lane is let go before its stream ends, so that a client
			// that sees one end may open another at once.
			release := sync.OnceFunc(func() { lanes.Add(-1) })
			defer release()
			if lanes.Add(1) > int64(maxLanes) {
				refuseStream(str, protocol.Invalid(protocol.CodeStreamLimitReached, "",
					"This WebTransport connection already has %d streams open, its limit. Close one, or open another connection.", maxLanes))
				return
			}
			e.serveStream(c, str, release)
		})
	}
	wg.Wait()
	conn.CloseWithError(0, "")
}

// serveStream reads the stream's header, then serves it as a lane of c;
// release gives back its place among the connection's lanes as the
// session ends.
func (e *Endpoint) serveStream(c *runtime.Connection, str *wtgo.Stream, release func()) {
	s := &stream{str: str, max: e.opts.Limits.MaxFrame, conn: c, release: release}
	str.SetReadDeadline(time.Now().Add(e.opts.Timeouts.Body))
	enc, perr := s.header()
	str.SetReadDeadline(time.Time{})
	if perr != nil {
		refuseStream(str, perr)
		return
	}
	s.binary = enc == protocol.EncodingMsgpack
	if perr := c.ServeLane(s, enc); perr != nil {
		refuseStream(str, perr)
	}
}
