package runtime_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/protocol"
	tetherwt "github.com/tether-run/tether/runtime/webtransport"
)

// wire is a transport and an encoding the connection tests run over.
type wire struct {
	webTransport bool
	enc          protocol.Encoding
	tls          bool // HTTP and WebSocket over TLS (https://, wss://), under TLSListener as tether serves them
	tlsWriters   bool // with tls: under a plain listener instead, where each connection has a writer of its own
}

func (w wire) String() string {
	t := "ws"
	if w.webTransport {
		t = "wt"
	}
	return t + "+" + w.enc.String()
}

// wires are the four: WebSocket and WebTransport, JSON and msgpack.
var wires = []wire{
	{enc: protocol.EncodingJSON}, {enc: protocol.EncodingMsgpack},
	{webTransport: true, enc: protocol.EncodingJSON}, {webTransport: true, enc: protocol.EncodingMsgpack},
}

// forWires runs f once per wire, as parallel subtests named by it.
func forWires(t *testing.T, f func(t *testing.T, w wire)) {
	for _, w := range wires {
		t.Run(w.String(), func(t *testing.T) {
			t.Parallel()
			f(t, w)
		})
	}
}

// wtClient is a raw WebTransport client that looks like a WebSocket one to
// the tests: a frame naming a stream_id goes on that lane's stream (opened
// on first use, with its header), the stream_id taken out; frames read from
// every stream come out of one queue, a named lane's with its stream_id put
// back. Order holds within a lane, as on a WebSocket; across lanes it is
// whatever the streams deliver.
type wtClient struct {
	tr   *webtransport.Transport
	sess *webtransport.Session
	enc  protocol.Encoding
	in   chan wtFrame

	mu       sync.Mutex
	lanes    map[string]*webtransport.Stream
	wg       sync.WaitGroup
	dropOnce sync.Once
}

type wtFrame struct {
	b   []byte
	err error
}

func dialWT(ctx context.Context, h *harness, header http.Header, enc protocol.Encoding) (*wtClient, error) {
	// The harness's own certificate on loopback: the client kit's tests
	// check pinning.
	tr := &webtransport.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	_, sess, err := tr.Dial(ctx, h.wt.URL()+"/responses", header)
	if err != nil {
		tr.Close()
		return nil, err
	}
	return &wtClient{tr: tr, sess: sess, enc: enc, in: make(chan wtFrame, 1024), lanes: map[string]*webtransport.Stream{}}, nil
}

// lane returns the stream of lane, opening it with its header.
func (c *wtClient) lane(ctx context.Context, lane string) (*webtransport.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if str, ok := c.lanes[lane]; ok {
		return str, nil
	}
	str, err := c.sess.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := str.Write(wtFrameOf(fmt.Appendf(nil, `{"encoding":%q}`, c.enc.String()))); err != nil {
		return nil, err
	}
	c.lanes[lane] = str
	c.wg.Go(func() { c.readLane(str, lane) })
	return str, nil
}

func wtFrameOf(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// readLane queues the frames of one lane's stream, as JSON.
func (c *wtClient) readLane(str *webtransport.Stream, lane string) {
	r := bufio.NewReader(str)
	for {
		var h [4]byte
		_, err := io.ReadFull(r, h[:])
		var b []byte
		if err == nil {
			b = make([]byte, binary.BigEndian.Uint32(h[:]))
			_, err = io.ReadFull(r, b)
		}
		if err == nil && c.enc == protocol.EncodingMsgpack {
			b, err = protocol.MsgpackToJSON(b)
		}
		if err == nil && lane != "" {
			var m map[string]json.RawMessage
			if err = json.Unmarshal(b, &m); err == nil {
				m["stream_id"], _ = json.Marshal(lane)
				b, err = json.Marshal(m)
			}
		}
		c.in <- wtFrame{b, err}
		if err != nil {
			return
		}
	}
}

// write sends a client event given as JSON on its lane's stream; a frame
// that is not JSON (a bad-input test's) goes as it is on the default lane.
func (c *wtClient) write(ctx context.Context, b []byte) error {
	lane := ""
	if json.Valid(b) {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			if raw, ok := m["stream_id"]; ok {
				if json.Unmarshal(raw, &lane) != nil {
					lane = string(raw) // not a string: a lane of its own, for the server to refuse
				}
				delete(m, "stream_id")
				b, _ = json.Marshal(m)
			}
		}
		if c.enc == protocol.EncodingMsgpack {
			var err error
			if b, err = protocol.JSONToMsgpack(b); err != nil {
				return err
			}
		}
	}
	str, err := c.lane(ctx, lane)
	if err != nil {
		return err
	}
	_, err = str.Write(wtFrameOf(b))
	return err
}

// read returns the next frame of any lane, as JSON.
func (c *wtClient) read(ctx context.Context) ([]byte, error) {
	select {
	case f := <-c.in:
		return f.b, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drop ends the connection at once, as a network failure would.
func (c *wtClient) drop() {
	c.dropOnce.Do(func() {
		c.sess.CloseWithError(0, "dropped")
		c.tr.Close()
		go func() { // the readers stop on the closed session; nobody reads in
			for range c.in {
			}
		}()
		c.wg.Wait()
		close(c.in)
	})
}

// startWT serves h over WebTransport on a loopback UDP port.
func (h *harness) startWT(t testing.TB) {
	t.Helper()
	cert, err := tetherwt.SelfSignedCertificate(time.Hour, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if h.wt, err = tetherwt.Listen(h.srv, "127.0.0.1:0", cert); err != nil {
		t.Fatal(err)
	}
}
