package ablate

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/clienttools"
	tetherwt "github.com/tether-run/tether/runtime/webtransport"
)

// The WebTransport floor: the same echo over one WebTransport stream, in
// tether's framing (a 4-byte length, then the frame), on loopback UDP.

// wtEcho is the echo's WebTransport endpoint.
type wtEcho struct {
	srv  *webtransport.Server
	url  string
	hash string
	pc   net.PacketConn
	ln   *quic.EarlyListener
	wg   sync.WaitGroup
}

func startWTEcho() (*wtEcho, error) {
	cert, err := tetherwt.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h3 := &http3.Server{
		TLSConfig:  http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{EnableDatagrams: true, EnableStreamResetPartialDelivery: true, KeepAlivePeriod: 10 * time.Second},
	}
	webtransport.ConfigureHTTP3Server(h3)
	e := &wtEcho{srv: &webtransport.Server{H3: h3}, url: "https://" + pc.LocalAddr().String() + "/echo", pc: pc}
	sum := tetherwt.CertificateHash(cert)
	e.hash = hex.EncodeToString(sum[:])
	h3.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := e.srv.Upgrade(w, r)
		if err != nil {
			return
		}
		for {
			str, err := sess.AcceptStream(context.Background())
			if err != nil {
				return
			}
			go echoStream(str)
		}
	})
	// The accept loop is ours, as runtime/webtransport's Listen's is: the
	// library's Serve races its Close.
	if e.ln, err = quic.ListenEarly(pc, h3.TLSConfig, h3.QUICConfig); err != nil {
		pc.Close()
		return nil, err
	}
	e.wg.Go(func() {
		for {
			conn, err := e.ln.Accept(context.Background())
			if err != nil {
				return
			}
			e.wg.Go(func() { e.srv.ServeQUICConn(conn) })
		}
	})
	return e, nil
}

func (e *wtEcho) close() {
	e.ln.Close()
	e.srv.Close()
	e.wg.Wait()
	e.pc.Close()
}

// echoStream answers each request frame with the frames its shape asks for.
func echoStream(str *webtransport.Stream) {
	defer str.Close()
	r := bufio.NewReaderSize(str, 64<<10)
	var out []byte
	for {
		req, err := readWTFrame(r)
		if err != nil {
			return
		}
		events, received, err := parseShape(req)
		if err != nil {
			str.CancelWrite(1)
			return
		}
		// A write per frame, as the WebSocket echo does.
		for _, n := range frameSizes(events, received) {
			out = binary.BigEndian.AppendUint32(out[:0], uint32(n))
			for range n {
				out = append(out, 'x')
			}
			if _, err := str.Write(out); err != nil {
				return
			}
		}
	}
}

func readWTFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(h[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

// wtEchoClient is one WebTransport connection to the echo, with its stream.
type wtEchoClient struct {
	tr   *webtransport.Transport
	sess *webtransport.Session
	str  *webtransport.Stream
	r    *bufio.Reader
}

func (e *wtEcho) dial(ctx context.Context) (*wtEchoClient, error) {
	tlsConf, err := clienttools.PinCertificate(e.hash)
	if err != nil {
		return nil, err
	}
	tr := clienttools.NewWebTransport(tlsConf)
	_, sess, err := tr.Dial(ctx, e.url, nil)
	if err != nil {
		tr.Close()
		return nil, err
	}
	str, err := sess.OpenStreamSync(ctx)
	if err != nil {
		sess.CloseWithError(0, "")
		tr.Close()
		return nil, err
	}
	return &wtEchoClient{tr: tr, sess: sess, str: str, r: bufio.NewReaderSize(str, 64<<10)}, nil
}

func (c *wtEchoClient) close() {
	c.str.Close()
	c.sess.CloseWithError(0, "")
	c.tr.Close()
}

// roundTrip is one WebTransport echo of s: from sending to the last frame.
func (c *wtEchoClient) roundTrip(ctx context.Context, s shape) (time.Duration, error) {
	req := request(s)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(req)))
	frame = append(frame, req...)
	start := time.Now()
	if _, err := c.str.Write(frame); err != nil {
		return 0, err
	}
	for range max(s.events, 1) {
		if _, err := readWTFrame(c.r); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
