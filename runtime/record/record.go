// Package record keeps a tether server's traffic log: every response's
// request, its events and the appends that resumed it, one JSON object a
// line, as `tether serve --record DIR` writes it and `tether trace import`
// reads it back into replay traces. It is an optional layer: a
// runtime.Recorder (Writer) and the reader of what it wrote (Reader).
//
// # Format (version 1)
//
// A traffic log is JSON Lines (UTF-8, one object a line). Its first line is
// the header:
//
//	{"tether_record": 1, "started": "2026-12-03T10:00:00.123456789Z"}
//
// tether_record is the format's version. Every following line is one of
// three, each with the time it was taken ("at", RFC 3339 with nanoseconds,
// UTC) and the id of the response it belongs to:
//
//	{"at": "…", "response_id": "resp_…", "request": {…}, "path": {"transport": "ws", "design": "suspend", "state": "none"}}
//	{"at": "…", "response_id": "resp_…", "event": {…}}
//	{"at": "…", "response_id": "resp_…", "append": [{…}, …]}
//
// A request line is the body of the response.create or POST /v1/responses
// that began the response (its input always an array of items), with at
// the time it arrived; path, which a proxy may leave out, is how tether
// served it (runtime.ServePath). An event line is one server event as the
// client gets it in JSON (whatever the connection's encoding), sequence
// number included, with at the time it was queued; the events of a
// response that was not streamed (HTTP without stream) are there too. An
// append line is the input of a response.append that resumed a suspended
// rollout (tool outputs, steering messages), with at the time the server
// took it. A response's lines are in the order they happened; lines of
// different responses interleave. Every item is as the Responses API
// writes it, so that a proxy in front of any Responses API server can
// write the same log from what it forwards.
//
// What a log holds is what the clients sent and got: prompts, code, tool
// outputs. `tether trace import --redact` makes traces of it without
// them.
package record

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// Version is the format version this package writes and reads.
const Version = 1

// Header is the first line of a traffic log.
type Header struct {
	Record  int       `json:"tether_record"`
	Started time.Time `json:"started"`
}

// Writer writes a traffic log: it is the runtime.Recorder of a server
// whose traffic is recorded. Each line is encoded as it is given and
// written whole; the log is flushed at every pause and end of a response,
// so that what a client has seen end is on disk. A Writer that fails to
// write drops what follows and reports the error from Err and Close:
// recording never stops the server.
type Writer struct {
	mu    lockrank.Mutex[lockrank.Recorder]
	w     *bufio.Writer
	f     *os.File // the file Create opened, closed by Close
	line  []byte
	err   error
	lines int
}

// Create starts a traffic log in dir (made if missing), in a new file named
// by the time and the process: tether-record-20261203T100000Z-1234.jsonl.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	name := filepath.Join(dir, fmt.Sprintf("tether-record-%s-%d.jsonl", now.Format("20060102T150405Z"), os.Getpid()))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	w := newWriter(f, now)
	w.f = f
	if err := w.Flush(); err != nil {
		f.Close()
		os.Remove(name)
		return nil, err
	}
	return w, nil
}

// New writes a traffic log to w, from its header on.
func New(w io.Writer) *Writer { return newWriter(w, time.Now().UTC()) }

func newWriter(w io.Writer, started time.Time) *Writer {
	rw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	b := append([]byte(`{"tether_record":`), fmt.Sprint(Version)...)
	b = append(b, `,"started":`...)
	b = appendTime(b, started)
	rw.w.Write(append(b, "}\n"...))
	return rw
}

// Name is the file Create opened ("" for New's).
func (w *Writer) Name() string {
	if w.f == nil {
		return ""
	}
	return w.f.Name()
}

// Created records the request that began response id.
func (w *Writer) Created(at time.Time, id string, path runtime.ServePath, req *protocol.CreateRequest) {
	w.write(at, id, "request", req, func(b []byte) []byte {
		b = append(b, `,"path":{"transport":`...)
		b = appendString(b, path.Transport)
		b = append(b, `,"design":`...)
		b = appendString(b, path.Design)
		b = append(b, `,"state":`...)
		b = appendString(b, path.State)
		return append(b, '}')
	}, false)
}

// Event records one event of response id.
func (w *Writer) Event(at time.Time, id string, ev protocol.Event) {
	switch protocol.Header(ev).Type {
	case protocol.EventDone, protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete,
		protocol.EventCancelled, protocol.EventError:
		w.write(at, id, "event", ev, nil, true) // a pause or an end: on disk with it
	default:
		w.write(at, id, "event", ev, nil, false)
	}
}

// Appended records the input of an append that resumed response id.
func (w *Writer) Appended(at time.Time, id string, input protocol.Items) {
	w.write(at, id, "append", input, nil, false)
}

// write encodes one line: at, id, the member named key holding v, what
// more adds, then flushes when flush is set.
func (w *Writer) write(at time.Time, id, key string, v any, more func([]byte) []byte, flush bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	b := append(w.line[:0], `{"at":`...)
	b = appendTime(b, at)
	b = append(b, `,"response_id":`...)
	b = appendString(b, id)
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b, err := protocol.AppendMarshal(b, v)
	if err != nil {
		// Not the log's fault: the line is left out, the log goes on.
		return
	}
	if more != nil {
		b = more(b)
	}
	b = append(b, '}', '\n')
	if _, err := w.w.Write(b); err != nil {
		w.err = err
	}
	w.lines++
	if cap(b) <= 1<<20 { // one huge line's buffer is not kept
		w.line = b
	}
	if flush && w.err == nil {
		w.err = w.w.Flush()
	}
}

// Flush writes what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Lines is how many lines have been recorded after the header.
func (w *Writer) Lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

// Err is the first error writing met; what was recorded after it is lost.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close flushes the log and closes the file Create opened. Call it after
// the server has shut down: what is recorded afterwards is dropped.
func (w *Writer) Close() error {
	err := w.Flush()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = errClosed
	}
	if w.f != nil {
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

var errClosed = errors.New("record: closed")

// appendString appends s as a JSON string (invalid UTF-8 replaced).
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// appendTime appends t as a JSON string, RFC 3339 in UTC with nanoseconds.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
