package runtime

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is the frame transport seam: what a session needs of a
// connection (FrameConn), and how a transport package whose connections
// carry many lanes, each a connection of its own (runtime/webtransport: a
// WebTransport connection's streams), opens a client connection and serves
// its lanes (Connection). The core's WebSocket (ws.go) is a FrameConn too:
// one connection, whose lanes stream_id names.

// FrameConn is one lane's connection as a session sees it: whole client
// frames in, batches of frames out. A WebSocket is one; a WebTransport
// stream is another (runtime/webtransport). Everything above it (lanes,
// limits, the cache, suspended rollouts) is the same code on both.
//
// A session calls Read and Ordinary from its read loop only, Write and
// Flush from its writer goroutine only, Close from one closer goroutine
// (possibly while Write or Flush runs), Abort from the writer goroutine
// (possibly while Read runs), and Done once, after all of them have
// returned.
type FrameConn interface {
	// Read returns the next client frame, and whether it came as binary
	// (a msgpack frame; JSON comes as text). An error ends the session;
	// a *protocol.Error is a frame the connection cannot skip (a length
	// prefix past Limits.MaxFrame): the client is told with it, then the
	// connection closes with CloseTooBig. A *FrameRefused is a frame read
	// past and dropped (Connection.HoldFrame found no room): the client is
	// told, and the session reads on.
	Read(ctx context.Context) (b []byte, binary bool, err error)
	// Write adds a frame to the batch being written; Flush sends the
	// batch. Both end by deadline, the batch's: a client that does not
	// read is cut there.
	Write(b []byte, binary bool, deadline time.Time) error
	Flush(deadline time.Time) error
	// Close ends the connection in order, telling the client why when the
	// transport can (a WebSocket close frame; status 1001 at shutdown,
	// 1008 for a client too slow). It must unblock a Write or Flush in
	// progress, and make Read return.
	Close(status CloseStatus, reason string)
	// Abort ends the connection at once: the writer failed. It must make
	// Read return. Done ends it once the writer has returned: frames
	// written are delivered.
	Abort()
	Done()
	// Ordinary reports whether a read error is an ordinary end of the
	// connection (a close by the client), not worth a log line.
	Ordinary(err error) bool
}

// CloseStatus is why the server closes a connection, as WebSocket close
// codes say it; a WebTransport stream reports it as its stream error code.
type CloseStatus int

// The statuses a session closes its connection with.
const (
	CloseGoingAway CloseStatus = 1001 // the server is shutting down
	ClosePolicy    CloseStatus = 1008 // the client was too slow, or a lane was refused
	CloseTooBig    CloseStatus = 1009 // a frame past Limits.MaxFrame
	// CloseServiceRestart: the server is shutting down, and its suspended
	// rollouts are in a shared store (Options.Checkpoints): a client
	// resumes them on another server.
	CloseServiceRestart CloseStatus = 1012
)

// Connection is one client connection of a transport whose lanes are
// connections of their own (FrameConns), as a WebTransport connection's
// streams are. Its lanes share one scope, as the lanes of a WebSocket do:
// the connection-local cache (previous_response_id), the in-flight, queue
// and byte limits, the hosted MCP sessions; and the connection holds one
// of the server's connection slots (Limits.MaxConnections, Tenant.Conns).
//
// The transport's handler goroutine opens it (OpenConnection) and closes
// it (Close) once every ServeLane has returned; ServeLane may run on many
// goroutines at once, one per lane.
type Connection struct {
	srv       *Server
	r         *http.Request // the upgrade request, authenticated
	transport string        // the sessions' ServePath.Transport
	scope     *connScope
	ctx       context.Context    // cancelled by Close and by the server's Shutdown
	cancel    context.CancelFunc //
}

// OpenConnection admits a client connection whose upgrade request r has
// been through Authenticate: it takes a connection slot for r's tenant and
// checks r's Origin (none, the server's own host, or one that matches
// Options.OriginPatterns); last, it spends the client secret r was
// authenticated with, if any (Authenticate checks a secret, and leaves it
// unspent: a connection refused before this point can try again with it;
// an upgrade that fails after it has spent it). It returns the error to
// answer r with, as an HTTP error (WriteError), when the server is
// shutting down, at a connection limit, the origin is not allowed, or the
// secret cannot be spent (used already; too_many_client_secrets).
//
// transport labels the responses served on the connection's lanes in
// metrics ("wt" for WebTransport). OpenConnection blocks only to spend a
// secret in a shared store (OnceStore); any goroutine may call it.
func (s *Server) OpenConnection(r *http.Request, transport string) (*Connection, *protocol.Error) {
	tenant := Tenant(r.Context())
	if perr := s.admitConn(tenant); perr != nil {
		return nil, perr
	}
	if !s.checkOrigin(r) {
		s.releaseConn(tenant)
		return nil, protocol.Errorf(http.StatusForbidden, protocol.CodeInvalidValue, "",
			"Origin %q is not allowed to connect: it is not among this server's OriginPatterns.", r.Header.Get("Origin"))
	}
	if perr := s.spendSecret(r); perr != nil {
		s.releaseConn(tenant)
		return nil, perr
	}
	ctx, cancel := context.WithCancel(s.ctx)
	return &Connection{srv: s, r: r, transport: transport, scope: newConnScope(&s.opts, s.mem), ctx: ctx, cancel: cancel}, nil
}

// Context is cancelled when the server shuts down and when c is closed:
// the transport stops accepting lanes then. Those it serves end in order
// (Shutdown closes them with CloseGoingAway).
func (c *Connection) Context() context.Context { return c.ctx }

// ServeLane serves fc, one lane of c, in enc: a session of one lane whose
// events name no stream_id (the lane is fc; a frame that names another
// stream_id is refused). It blocks until the lane ends (the client closes
// it, the session fails, or the server shuts down) and every goroutine the
// session started has returned; fc.Done has been called by then. The
// caller must not use fc meanwhile.
//
// When the server is shutting down it serves nothing and returns the error
// to answer the lane with: the transport writes it (ErrorFrame) and closes
// fc itself. It may be called from many goroutines at once, never after
// Close.
func (c *Connection) ServeLane(fc FrameConn, enc protocol.Encoding) *protocol.Error {
	s := c.srv
	sess := newSession(s, fc, c.r, enc, c.scope)
	sess.transport, sess.oneLane = c.transport, true
	if !s.track(sess) {
		sess.scope.leave(sess)
		sess.cancel()
		return errShutdown()
	}
	defer s.untrack(sess)
	sess.run(context.Background())
	return nil
}

// Close ends the connection: the scope's MCP sessions end, its connection
// slot is given back and its Context is cancelled. Call it once, from the
// goroutine that opened c, after every ServeLane has returned.
func (c *Connection) Close() {
	c.cancel()
	c.scope.end()
	c.srv.releaseConn(Tenant(c.r.Context()))
}

// Authenticate admits r, returning it with its tenant on its context, or
// answers it on w (401 without a valid key, 429 past the tenant's rate)
// and returns false. A transport calls it on an upgrade request before
// OpenConnection, which spends the client secret it admitted r with, if
// any; requests ServeHTTP serves are authenticated there.
func (s *Server) Authenticate(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	return s.authenticate(w, r)
}

// WriteError answers an HTTP request with perr: its status, and the
// OpenAI-shaped error body.
func WriteError(w http.ResponseWriter, perr *protocol.Error) { writeError(w, perr) }

// ErrorFrame is the error event for perr as a lane that names no stream_id
// reads it, in JSON: what a transport writes on a lane it refuses.
func ErrorFrame(perr *protocol.Error) []byte { return errorFrame(perr, "") }

// Options is the server's options with their defaults filled in
// (Limits.MaxLanes, Limits.MaxFrame, Timeouts.Body…), a copy: a transport
// sizes its listener and its reads by them.
func (s *Server) Options() Options { return s.opts }

// Logger is the server's logger, for a transport's own lines.
func (s *Server) Logger() *slog.Logger { return s.log }

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
