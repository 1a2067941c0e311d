package runtime

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// brokenFlusher is a response whose client has gone: flushing fails.
type brokenFlusher struct{ http.ResponseWriter }

func (brokenFlusher) FlushError() error { return errors.New("broken pipe") }

// TestAccessWriterFlushError: through the access log's writer, a stream's
// handler still learns that its flush failed (and so that its client is
// gone).
func TestAccessWriterFlushError(t *testing.T) {
	t.Parallel()
	w := &accessWriter{ResponseWriter: brokenFlusher{httptest.NewRecorder()}}
	if err := http.NewResponseController(w).Flush(); err == nil {
		t.Error("a failed flush reads as a success through the access log")
	}
}
