package clienttools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
)

// Transport is what carries the WebSocket designs (turns, suspend).
type Transport int

const (
	// TransportWebSocket is a WebSocket to /v1/responses, lanes named by
	// stream_id.
	TransportWebSocket Transport = iota
	// TransportWebTransport is a WebTransport connection (HTTP/3 over
	// UDP) to /v1/responses, each lane a stream of its own.
	TransportWebTransport
)

func (t Transport) String() string {
	if t == TransportWebTransport {
		return "webtransport"
	}
	return "websocket"
}

// wtURL derives the WebTransport endpoint from a base URL: https://HOST:PORT/v1
// (or wt://HOST:PORT/v1) gives https://HOST:PORT/v1/responses.
func wtURL(base string) (string, error) {
	base, err := protocol.APIBase(base, "https", "wt")
	if err != nil {
		return "", fmt.Errorf("WebTransport %w", err)
	}
	if rest, ok := strings.CutPrefix(base, "wt://"); ok {
		base = "https://" + rest
	}
	return base + "/responses", nil
}

// tlsConfig verifies the server: by CertHash when it is set (the
// certificate need not chain to a root), else by the system's roots.
func (c *Client) tlsConfig() (*tls.Config, error) {
	switch {
	case c.TLSConfig != nil:
		return c.TLSConfig.Clone(), nil
	case c.CertHash != "":
		return PinCertificate(c.CertHash)
	}
	return &tls.Config{}, nil
}

// PinCertificate is a TLS configuration that accepts only the certificate
// whose SHA-256 is hash (hex, as tether serve prints it, colons allowed),
// while it is valid, whoever signed it: a self-signed one. A certificate it
// refuses fails the handshake with a *tls.CertificateVerificationError, as
// one that does not chain to a root does without it.
func PinCertificate(hash string) (*tls.Config, error) {
	want, err := hex.DecodeString(strings.ReplaceAll(hash, ":", ""))
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("certificate hash %q: want a SHA-256 in hex (64 hex digits)", hash)
	}
	return &tls.Config{
		InsecureSkipVerify: true, // verified below, by the pinned hash
		VerifyConnection: func(cs tls.ConnectionState) error {
			refused := func(err error) error {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			if len(cs.PeerCertificates) == 0 {
				return refused(errors.New("the server sent no certificate"))
			}
			leaf := cs.PeerCertificates[0]
			if sum := sha256.Sum256(leaf.Raw); !bytes.Equal(sum[:], want) {
				return refused(fmt.Errorf("the server's certificate has SHA-256 %x, not the pinned %x", sum, want))
			}
			now := time.Now()
			if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
				return refused(x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired})
			}
			return nil
		},
	}, nil
}

// keepAlive is how often a WebTransport client pings an idle connection:
// well inside QUIC's idle timeout (30 s), which a rollout waiting on a
// long tool call, or an idle lane, would otherwise hit.
const keepAlive = 10 * time.Second

// NewWebTransport is a WebTransport client that verifies servers with
// tlsConf and keeps idle connections alive.
func NewWebTransport(tlsConf *tls.Config) *webtransport.Transport {
	return &webtransport.Transport{TLSClientConfig: tlsConf, QUICConfig: &quic.Config{
		EnableDatagrams: true, EnableStreamResetPartialDelivery: true, KeepAlivePeriod: keepAlive}}
}

// wtConn is one WebTransport connection to /v1/responses, with the one
// stream its rollout runs on.
type wtConn struct {
	tr   *webtransport.Transport
	sess *webtransport.Session
	str  *webtransport.Stream
	r    *bufio.Reader
	rd   eventReader
	buf  []byte // the frame being written
	ctxWatch
}

func (c *Client) dialWebTransport(ctx context.Context, keep eventFilter) (*wtConn, error) {
	u, err := wtURL(c.BaseURL)
	if err != nil {
		return nil, err
	}
	tlsConf, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	tr := NewWebTransport(tlsConf)
	_, sess, err := tr.Dial(ctx, u, c.header())
	if err != nil {
		tr.Close()
		if cve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			err = cve // without QUIC's wrapping: "CRYPTO_ERROR 0x12a (local): "
		}
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	w, err := openStream(ctx, sess, c.Encoding, keep)
	if err != nil {
		sess.CloseWithError(0, "")
		tr.Close()
		return nil, fmt.Errorf("open a stream on %s: %w", u, err)
	}
	w.tr = tr
	return w, nil
}

// openStream opens a lane on sess and sends its header, which names enc;
// its events are decoded as keep says.
func openStream(ctx context.Context, sess *webtransport.Session, enc protocol.Encoding, keep eventFilter) (*wtConn, error) {
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	w := &wtConn{sess: sess, str: str, r: bufio.NewReaderSize(str, 16<<10), rd: eventReader{enc: enc, keep: keep}}
	if err := w.writeFrame(fmt.Appendf(nil, `{"encoding":%q}`, enc.String())); err != nil {
		str.CancelWrite(0)
		return nil, err
	}
	return w, nil
}

// writeFrame writes b with its length prefix, in one write.
func (w *wtConn) writeFrame(b []byte) error {
	w.buf = binary.BigEndian.AppendUint32(w.buf[:0], uint32(len(b)))
	w.buf = append(w.buf, b...)
	_, err := w.str.Write(w.buf)
	return err
}

func (w *wtConn) send(ctx context.Context, ev any) (frameCost, error) {
	b, cost, err := encodeAs(w.rd.enc, ev)
	if err != nil {
		return cost, err
	}
	stop := context.AfterFunc(ctx, func() { w.str.SetWriteDeadline(time.Now()) })
	defer stop()
	return cost, w.writeFrame(b)
}

func (w *wtConn) next(ctx context.Context) (protocol.Event, frameCost, error) {
	w.watch(ctx, func() { w.str.SetReadDeadline(time.Now()) })
	var h [4]byte
	if _, err := io.ReadFull(w.r, h[:]); err != nil {
		return nil, frameCost{}, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return nil, frameCost{}, fmt.Errorf("the server sent a frame of %d bytes, over the %d MiB limit", n, maxFrame>>20)
	}
	b := w.rd.frame(int(n))
	if _, err := io.ReadFull(w.r, b); err != nil {
		return nil, frameCost{}, err
	}
	return w.rd.decodeFrame(b)
}

func (w *wtConn) close() {
	w.str.Close()
	w.end()
}

func (w *wtConn) abort() {
	w.str.CancelRead(0)
	w.str.CancelWrite(0)
	w.end()
}

func (w *wtConn) end() {
	w.sess.CloseWithError(0, "")
	if w.tr != nil {
		w.tr.Close()
	}
}
