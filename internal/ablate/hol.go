package ablate

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/webtransport-go"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// Head-of-line blocking, measured: lanes stream at once over one
// connection, a WebSocket (TCP) or a WebTransport connection (QUIC), through
// a simulated link that delays every packet and loses a share of them. On
// TCP a lost segment holds back every lane's bytes behind it; on QUIC only
// its own stream's. What each lane's client sees is the token delivery lag
// (see lagRecorder), per transport and loss rate.

// HOLConfig is one head-of-line measurement.
type HOLConfig struct {
	Lanes    int           // responses streaming at once on the connection
	Loss     []float64     // shares of packets lost, each one a run per transport
	Delay    time.Duration // one-way delay of the simulated link
	RTX      time.Duration // how late a lost TCP segment arrives (0: 2 × the round trip)
	TPS      float64       // each lane's model speed, tokens per second
	Duration time.Duration // of each run
	Seed     uint64        // of the links' losses
}

// RTXOrDefault is how late a lost TCP segment arrives: RTX, or two round
// trips.
func (c HOLConfig) RTXOrDefault() time.Duration {
	if c.RTX > 0 {
		return c.RTX
	}
	return 4 * c.Delay
}

// HOLResult is one run: a transport at a loss rate. Lags in milliseconds.
type HOLResult struct {
	Transport string  `json:"transport"` // "websocket" or "webtransport"
	Loss      float64 `json:"loss"`
	Lanes     int     `json:"lanes"`
	Tokens    int64   `json:"tokens"`
	Responses int64   `json:"responses"`
	LagP50MS  float64 `json:"lag_p50_ms"`
	LagP99MS  float64 `json:"lag_p99_ms"`
	LagMaxMS  float64 `json:"lag_max_ms"`
	// LaneP99MS is each lane's p99 lag: how evenly the blocking fell.
	LaneP99MS []float64 `json:"lane_p99_ms"`
}

// RunHOL runs every loss rate over both transports against one in-process
// tether, each run on a fresh connection through a fresh link.
func RunHOL(ctx context.Context, cfg HOLConfig) ([]HOLResult, error) {
	if cfg.Lanes < 1 || cfg.TPS <= 0 || cfg.Duration <= 0 || len(cfg.Loss) == 0 {
		return nil, errors.New("ablate: a head-of-line run needs lanes, a speed, a duration and loss rates")
	}
	if cfg.Lanes > runtime.DefaultMaxInFlight {
		return nil, fmt.Errorf("ablate: at most %d lanes stream at once on one connection (the server's in-flight limit)", runtime.DefaultMaxInFlight)
	}
	cfg.RTX = cfg.RTXOrDefault()
	// A tether like ablate's, serving WebTransport too.
	tg, err := startTarget(Config{Modes: []Design{{Mode: clienttools.ModeTurns, Transport: clienttools.TransportWebTransport}}},
		sampler.Timing{TPS: cfg.TPS})
	if err != nil {
		return nil, err
	}
	defer tg.stop()
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	tcpAddr := strings.TrimSuffix(strings.TrimPrefix(tg.base, "http://"), "/v1")
	udpAddr := strings.TrimSuffix(strings.TrimPrefix(tg.wt.base, "https://"), "/v1")
	var out []HOLResult
	for i, loss := range cfg.Loss {
		link := linkConfig{Loss: loss, Delay: cfg.Delay, RTX: cfg.RTX, Seed: cfg.Seed + uint64(i)}
		for _, transport := range []string{"websocket", "webtransport"} {
			res, err := holRun(ctx, cfg, r, transport, link, tcpAddr, udpAddr, tg.wt.hash)
			if err != nil {
				return nil, fmt.Errorf("ablate: head-of-line over %s at %g%% loss: %w", transport, 100*loss, err)
			}
			out = append(out, *res)
		}
	}
	return out, nil
}

// holRequest is one lane's response: a text answer of a few dozen tokens,
// streamed at the model's speed; each lane asks again as soon as one ends.
func holRequest(lane int) []byte {
	return fmt.Appendf(nil, `{"type":"response.create","model":%q,"store":false,"input":"Lane %d says: the quick brown fox jumps over the lazy dog, and the dog sleeps on while the fox runs through the field and over the hill to the river, where it drinks and rests until the evening comes."}`,
		sampler.ScriptedModel, lane)
}

// holLane is one lane's client side: its lag recorder and what it counted.
type holLane struct {
	rec       *lagRecorder
	windows   *lagWindows
	responses int64
}

func holRun(ctx context.Context, cfg HOLConfig, r *sampler.Renderer, transport string, link linkConfig, tcpAddr, udpAddr, hash string) (*HOLResult, error) {
	all := &lagWindows{}
	start := time.Now()
	lanes := make([]*holLane, cfg.Lanes)
	for i := range lanes {
		w := &lagWindows{}
		lanes[i] = &holLane{windows: w, rec: &lagRecorder{tps: cfg.TPS, r: r, out: w, start: start, now: time.Now}}
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var err error
	switch transport {
	case "websocket":
		var l *tcpLink
		if l, err = startTCPLink(tcpAddr, link); err != nil {
			return nil, err
		}
		err = holWebSocket(runCtx, l.addr(), lanes)
		l.close()
	default:
		var l *udpLink
		if l, err = startUDPLink(udpAddr, link); err != nil {
			return nil, err
		}
		err = holWebTransport(runCtx, l.addr(), hash, lanes)
		l.close()
	}
	if err != nil && runCtx.Err() == nil { // a run ends by its deadline; anything else is a failure
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &HOLResult{Transport: transport, Loss: link.Loss, Lanes: cfg.Lanes}
	for _, ln := range lanes {
		h := ln.windows.all()
		all.add(0, h, 0)
		res.LaneP99MS = append(res.LaneP99MS, h.quantile(0.99)/1e3)
		res.Tokens += ln.rec.tokens
		res.Responses += ln.responses
	}
	h := all.all()
	res.LagP50MS, res.LagP99MS, res.LagMaxMS = h.quantile(0.5)/1e3, h.quantile(0.99)/1e3, h.quantile(1)/1e3
	return res, nil
}

// event records one lane's event; it reports whether the lane's response
// ended (the lane asks again).
func (l *holLane) event(b []byte) (ended bool, err error) {
	ev, perr := protocol.DecodeEvent(b)
	if perr != nil {
		return false, perr
	}
	l.rec.event(ev)
	switch protocol.Type(ev) {
	case protocol.EventCompleted:
		l.responses++
		return true, nil
	case protocol.EventError, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
		return false, fmt.Errorf("the lane's response ended with %s", b)
	}
	return false, nil
}

// holWebSocket runs the lanes on one WebSocket, named by stream_id.
func holWebSocket(ctx context.Context, addr string, lanes []*holLane) error {
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/responses", nil)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	send := func(i int) error {
		req := holRequest(i)
		req = append(req[:len(req)-1], fmt.Appendf(nil, `,"stream_id":"lane-%d"}`, i)...)
		return c.Write(ctx, websocket.MessageText, req)
	}
	for i := range lanes {
		if err := send(i); err != nil {
			return err
		}
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return err
		}
		var i int
		ev, perr := protocol.DecodeEvent(b)
		if perr != nil {
			return perr
		}
		if _, err := fmt.Sscanf(protocol.Header(ev).StreamID, "lane-%d", &i); err != nil || i >= len(lanes) {
			return fmt.Errorf("an event of no lane: %s", b)
		}
		ended, err := lanes[i].event(b)
		if err != nil {
			return err
		}
		if ended {
			if err := send(i); err != nil {
				return err
			}
		}
	}
}

// holWebTransport runs the lanes on one WebTransport connection, a stream
// each.
func holWebTransport(ctx context.Context, addr, hash string, lanes []*holLane) error {
	tlsConf, err := clienttools.PinCertificate(hash)
	if err != nil {
		return err
	}
	tr := clienttools.NewWebTransport(tlsConf)
	defer tr.Close()
	_, sess, err := tr.Dial(ctx, "https://"+addr+"/v1/responses", nil)
	if err != nil {
		return err
	}
	defer sess.CloseWithError(0, "")
	var wg sync.WaitGroup
	errs := make(chan error, len(lanes))
	for i, ln := range lanes {
		str, err := sess.OpenStreamSync(ctx)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { str.CancelRead(0); str.CancelWrite(0) })
		defer stop()
		wg.Go(func() { errs <- holStream(str, i, ln) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// holStream runs one lane on its stream until the stream fails.
func holStream(str *webtransport.Stream, i int, ln *holLane) error {
	w := bufio.NewWriter(str)
	frame := func(b []byte) error {
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], uint32(len(b)))
		w.Write(h[:])
		w.Write(b)
		return w.Flush()
	}
	if err := frame([]byte(`{"encoding":"json"}`)); err != nil {
		return err
	}
	if err := frame(holRequest(i)); err != nil {
		return err
	}
	r := bufio.NewReaderSize(str, 64<<10)
	for {
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		b := make([]byte, binary.BigEndian.Uint32(h[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		ended, err := ln.event(b)
		if err != nil {
			return err
		}
		if ended {
			if err := frame(holRequest(i)); err != nil {
				return err
			}
		}
	}
}

// HOLSchemaVersion names hol.json's shape.
const HOLSchemaVersion = "tether.hol/1"

// WriteHOL writes hol.json into dir: the configuration and every run.
func WriteHOL(dir string, cfg HOLConfig, res []HOLResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		Schema   string      `json:"schema"`
		Machine  Machine     `json:"machine"`
		Lanes    int         `json:"lanes"`
		TPS      float64     `json:"tps"`
		DelayUS  float64     `json:"delay_us"`
		RTXUS    float64     `json:"rtx_us"`
		Duration float64     `json:"duration_s"`
		Runs     []HOLResult `json:"runs"`
	}{HOLSchemaVersion, machine(), cfg.Lanes, cfg.TPS, us(cfg.Delay), us(cfg.RTXOrDefault()), cfg.Duration.Seconds(), res}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "hol.json"), append(b, '\n'), 0o644)
}
