package runtime

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The access log (Options.AccessLog): one line per HTTP request when it
// ends, and one per WebSocket session when it ends (its upgrade request's
// line is the session's). A line says what was asked and how it went
// (method, path, status, bytes written, duration, responses served, the
// tenant), never a key or a body.

// accessWriter counts what a handler wrote; a hijacked connection (a
// WebSocket upgrade) is the session's to log.
type accessWriter struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
}

func (w *accessWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// FlushError flushes and says whether it could: http.ResponseController
// prefers it to Flush, so that a stream's handler still learns its client
// is gone.
func (w *accessWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *accessWriter) Flush() { w.FlushError() }

func (w *accessWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.hijacked = err == nil
	return conn, brw, err
}

func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessCount is what a request's access line says that its handlers
// learn: the tenant its key authenticated, the responses it served (the
// request's context carries it).
type accessCount struct {
	n      atomic.Int64
	tenant string // set before the handler runs
}

type accessKey struct{}

// served counts one response served for r's access line.
func served(r *http.Request) {
	if c, ok := r.Context().Value(accessKey{}).(*accessCount); ok {
		c.n.Add(1)
	}
}

// authenticated notes r's tenant for its access line.
func authenticated(r *http.Request) {
	if c, ok := r.Context().Value(accessKey{}).(*accessCount); ok {
		c.tenant = Tenant(r.Context())
	}
}

// serveLogged serves r and logs its access line, unless it became a
// WebSocket session, which logs its own when it ends.
func (s *Server) serveLogged(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	start := s.now()
	aw := &accessWriter{ResponseWriter: w}
	count := new(accessCount)
	serve(aw, r.WithContext(context.WithValue(r.Context(), accessKey{}, count)))
	if aw.hijacked {
		return
	}
	status := aw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.logAccess(r, count.tenant, status, aw.bytes, s.now().Sub(start), count.n.Load())
}

// logAccess writes one access line.
func (s *Server) logAccess(r *http.Request, tenant string, status int, bytes int64, took time.Duration, responses int64) {
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Int64("bytes", bytes), slog.Duration("duration", took), slog.Int64("responses", responses),
		slog.String("remote", r.RemoteAddr),
	}
	if tenant != "" {
		attrs = append(attrs, slog.String("tenant", tenant))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "access", attrs...)
}
