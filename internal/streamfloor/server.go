package streamfloor

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"regexp"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/internal/flushhold"
	"github.com/tether-run/tether/sampler"
)

// Server serves a Recording on /v1/responses to every WebSocket client,
// each message it reads answered by the recording's next step, paced by
// the engine; and, as a tether does, its Go runtime's metrics on /metrics
// (goroutines, memory, the collector's CPU) and its heap profile on
// /debug/pprof/heap, which a load run reads off both servers alike,
// /debug/pprof/profile and /debug/pprof/trace.
type Server struct {
	rec    *Recording
	timing sampler.Timing
	engine *sampler.Engine
	holds  *flushhold.Policy
	writes *flushers.Flushers // the connections' writers, as tether's are
	cost   Cost
	mux    *http.ServeMux

	mu    sync.Mutex
	conns map[*conn]struct{} // guarded by mu
}

// NewServer serves rec with timing t, its tokens stepped by an engine
// whose least step is step (serve --engine-step; 0: none), as tether serve
// paces its local models.
func NewServer(rec *Recording, t sampler.Timing, step time.Duration) (*Server, error) {
	if err := rec.Validate(); err != nil {
		return nil, err
	}
	s := &Server{rec: rec, timing: t, engine: sampler.NewEngine(), mux: http.NewServeMux(), conns: map[*conn]struct{}{}}
	s.engine.SetStep(step)
	s.holds = flushhold.New(flushhold.Options{Late: s.engine.Late})
	s.writes = flushers.New(goruntime.GOMAXPROCS(0))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(gcCPU)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tether_flush_holds_total", Help: "Writes held for the next frames while the floor was saturated (internal/flushhold), as tether counts its own."},
			func() float64 { return float64(s.holds.Holds()) }))
	s.mux.HandleFunc("GET /v1/responses", s.serveWS)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /debug/pprof/heap", pprof.Handler("heap").ServeHTTP)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile) // where the floor's CPU goes, beside tether's (serve --pprof)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)     // where its goroutines wait for a core, beside tether's
	return s, nil
}

// gcCPU are the Go runtime's CPU classes a load run reads (the collector's
// share of the busy time), as tether's metrics export them.
var gcCPU = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|total|idle):cpu-seconds$`)}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetCost has the floor spend c besides its own work (see Cost). Set it
// before the floor serves.
func (s *Server) SetCost(c Cost) { s.cost = c }

// Close closes every connection.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.ws.CloseNow()
	}
}

// serveWS accepts a WebSocket and answers its messages, one step each, on
// this goroutine, which is the connection's only one while it waits: the
// engine's goroutines release its tokens, and a flusher writes its bytes
// only while it has some.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	hw := &hijackWriter{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	ws.SetReadLimit(64 << 20)
	c := &conn{ws: ws, raw: hw.conn, timing: s.timing, engine: s.engine, holds: s.holds, cost: s.cost, more: make(chan struct{}, 1)}
	if hw.conn.fd != nil {
		c.writes = s.writes
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		ws.CloseNow()
	}()
	ctx := r.Context()
	for i := 0; ; i++ {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			return
		}
		step := &s.rec.Steps[i%len(s.rec.Steps)]
		if step.Silent() {
			continue // a message tether answered with nothing (response.processed)
		}
		// What a server holds of what it was sent (a parked rollout's
		// context), in a buffer of its size: the library's grows as it
		// reads.
		c.held = bytes.Clone(msg)
		spend(c.cost.Step)
		if err := c.play(ctx, step); err != nil {
			return
		}
	}
}

// conn is one client's connection.
type conn struct {
	ws     *websocket.Conn
	raw    *lockedConn
	timing sampler.Timing
	engine *sampler.Engine
	holds  *flushhold.Policy
	writes *flushers.Flushers // nil: a writer goroutine of its own (no descriptor for a try)
	cost   Cost
	held   []byte // the client's last message

	more chan struct{}   // 1-buffered: frames were queued (a held write waits on it)
	hold flushhold.Timer // the writer's; only the running writer uses it

	mu      sync.Mutex
	pending []byte    // frames due and not yet written; guarded by mu
	filled  time.Time // when pending was last empty and filled; guarded by mu
	// open is pending's last frame when it is a delta the next may join:
	// where its header begins, the header's length, and its event's Post;
	// at < 0, none. Guarded by mu.
	open struct {
		at, hdr int
		post    []byte
	}
	spare   []byte // the writer's last buffer, reused; guarded by mu
	writing bool   // a flusher or a writer has the connection; guarded by mu
	err     error  // the first failed write; guarded by mu
}

// play writes step: its head at once, then each token's frames as the
// engine releases the token, those due in one engine step together.
func (c *conn) play(ctx context.Context, step *Step) error {
	start := time.Now()
	c.queue(step.Head, true)
	next := 0 // the next frame
	err := c.engine.Pace(ctx, c.timing, start, step.Uncached, step.Reasoning, step.Tokens, func(i int, more bool) {
		spend(c.cost.Token)
		for next < len(step.Frames) && step.Due[next] <= i {
			c.queueDelta(&step.Frames[next])
			next++
		}
		if !more {
			c.flush()
		}
	})
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.writing {
		// Between steps a connection holds no buffer: a parked client
		// costs its socket and its message, as a parked rollout's should.
		c.pending, c.spare = nil, nil
	}
	if err != nil {
		return err
	}
	return c.err
}

// queue adds whole frames to what is due; flush, at once.
func (c *conn) queue(frames []byte, flush bool) {
	c.mu.Lock()
	c.fillLocked()
	c.pending = append(c.pending, frames...)
	c.open.at = -1
	c.mu.Unlock()
	c.signal()
	if flush {
		c.flush()
	}
}

// queueDelta adds a delta to what is due: into the delta before it, when
// that one still waits for the writer and nothing came between (the same
// item's), as tether merges the deltas its client has not yet taken;
// else as a frame of its own.
func (c *conn) queueDelta(f *Frame) {
	c.mu.Lock()
	c.fillLocked()
	if o := &c.open; o.at >= 0 && len(c.pending) > 0 {
		b := append(c.pending[:len(c.pending)-len(o.post)], f.Text...)
		b = append(b, o.post...)
		c.pending, o.hdr = reheader(b, o.at, o.hdr)
	} else {
		o.at = len(c.pending)
		c.pending = appendHeader(c.pending, len(f.Pre)+len(f.Text)+len(f.Post))
		o.hdr, o.post = len(c.pending)-o.at, f.Post
		c.pending = append(append(append(c.pending, f.Pre...), f.Text...), f.Post...)
	}
	if len(f.Then) > 0 {
		c.pending = append(c.pending, f.Then...)
		c.open.at = -1
	}
	c.mu.Unlock()
	c.signal()
}

// reheader rewrites the header, hdr bytes at at, of b's last frame, whose
// payload has grown: its length grows, and so may the header, moving the
// payload after it. It returns b and the header's new length.
func reheader(b []byte, at, hdr int) ([]byte, int) {
	var h [10]byte
	head := appendHeader(h[:0], len(b)-at-hdr)
	if grow := len(head) - hdr; grow > 0 {
		b = append(b, h[:grow]...) // room; the copy below fills it
		copy(b[at+len(head):], b[at+hdr:len(b)-grow])
	}
	copy(b[at:], head)
	return b, len(head)
}

// fillLocked notes when pending is filled from empty: how long the writer
// then takes to run tells the policy the server is saturated.
func (c *conn) fillLocked() {
	if len(c.pending) == 0 {
		c.filled = time.Now()
		c.open.at = -1
	}
}

// signal tells a held write that frames were queued.
func (c *conn) signal() {
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// flush has a writer write what is due, queuing the connection for a
// flusher or starting a writer unless one runs: the engine's goroutine
// that calls it never waits on the socket.
func (c *conn) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing || len(c.pending) == 0 {
		return
	}
	c.writing = true
	if c.writes != nil {
		c.writes.Add(c)
		return
	}
	go c.write()
}

// FlushTurn writes what is due on a flusher (package flushers), as
// tether's outboxes are written: at most flushTurn batches, each in one
// write that does not wait, with no flush held. A batch the socket does
// not take whole is finished by a writer of the connection's own, which
// goes on as write.
func (c *conn) FlushTurn() (more bool) {
	c.mu.Lock()
	c.holds.Waited(c.filled, time.Now()) // its time waiting for the CPU
	for turn := 0; len(c.pending) > 0 && c.err == nil; turn++ {
		if turn == flushTurn {
			c.mu.Unlock()
			return true
		}
		batch := c.takeLocked()
		c.mu.Unlock()
		if n, blocked := c.raw.tryWrite(batch); blocked {
			go c.finish(batch, n)
			return false
		}
		c.mu.Lock()
		c.spare = batch[:0]
	}
	c.writing = false
	c.mu.Unlock()
	return false
}

// flushTurn is how many batches a flusher writes of one connection in a
// turn, as many as tether's (runtime/internal/outbox).
const flushTurn = 4

// finish writes the rest of a batch a flusher's try did not, then goes on
// as the connection's writer.
func (c *conn) finish(batch []byte, written int) {
	err := c.raw.finish(batch[written:])
	c.mu.Lock()
	c.spare = batch[:0]
	if err != nil {
		c.err = err
	}
	c.mu.Unlock()
	c.write()
}

// takeLocked takes what is due for a write. The caller holds mu.
func (c *conn) takeLocked() []byte {
	batch := c.pending
	c.pending, c.spare = c.spare[:0], nil
	c.open.at = -1 // taken: the next delta is a frame of its own
	return batch
}

// write writes what is due, one write a batch, until nothing is. While
// the server is saturated it holds a batch briefly for the next frames,
// by the policy tether's writers of their own follow (package flushhold).
func (c *conn) write() {
	c.mu.Lock()
	for len(c.pending) > 0 && c.err == nil {
		c.holds.Waited(c.filled, time.Now())
		batch := c.takeLocked()
		c.mu.Unlock()
		select {
		case <-c.more: // the signal of the frames just taken
		default:
		}
		if c.holds.Hold(&c.hold, c.more) {
			c.mu.Lock()
			batch = append(batch, c.pending...)
			c.pending, c.open.at = c.pending[:0], -1
			c.mu.Unlock()
		}
		_, err := c.raw.Write(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		if err != nil {
			c.err = err
		}
	}
	c.writing = false
	c.mu.Unlock()
}

// hijackWriter hands websocket.Accept a lockedConn when it hijacks the
// connection, so that the floor writes its frames on the socket itself,
// whole, and the library only its control frames, with small buffers, as
// tether's connections have (runtime's corkingWriter).
type hijackWriter struct {
	http.ResponseWriter
	conn *lockedConn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &lockedConn{Conn: conn, fd: flushers.NewSocket(conn)}
	br := brw.Reader
	if br.Buffered() == 0 {
		br = bufio.NewReaderSize(w.conn, 1<<10)
	}
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, 512)), nil
}

func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lockedConn keeps the floor's writes and the library's whole: one at a
// time.
type lockedConn struct {
	net.Conn
	fd *flushers.Socket // the socket, for a try; nil: none of its own
	mu sync.Mutex
}

func (c *lockedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

// tryWrite writes p in one write that does not wait (Socket.TryWrite).
// Blocked, the connection stays locked for finish to write the rest: a
// pong or close frame the library writes meanwhile follows it.
func (c *lockedConn) tryWrite(p []byte) (n int, blocked bool) {
	c.mu.Lock()
	n, blocked = c.fd.TryWrite(p)
	if !blocked {
		c.mu.Unlock()
	}
	return n, blocked
}

// finish writes the rest of a batch tryWrite did not, waiting, and unlocks
// the connection.
func (c *lockedConn) finish(rest []byte) error {
	defer c.mu.Unlock()
	if err := c.fd.Finish(); err != nil {
		return err
	}
	if len(rest) == 0 {
		return nil
	}
	_, err := c.Conn.Write(rest)
	return err
}
