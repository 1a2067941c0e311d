package record

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
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
	// Part is the file's place in a log Create wrote, from 1; 0 in a log
	// written as one stream.
	Part int `json:"part,omitempty"`
}

// Bounds of a log Create writes, by default: 512 MiB of disk at most, in
// files small enough to open in an editor, copy or import one by one.
const (
	DefaultFileBytes = 64 << 20
	DefaultFiles     = 8
	DefaultBytes     = 512 << 20
)

// Options bound the log Create writes and say where its failures are
// told. The zero value works: the defaults above, nothing logged.
type Options struct {
	// FileBytes is the size at which the file being written is rotated:
	// before a line that would take it past FileBytes, it is renamed
	// NAME.N.jsonl (N its part) and a new NAME.jsonl is begun. A line
	// longer than FileBytes gets a file of its own. 0: DefaultFileBytes.
	FileBytes int64
	// Files is the most files the log keeps, the one being written
	// included: a rotation past it removes the oldest. 0: DefaultFiles.
	Files int
	// Bytes is the most the log's files hold together: the oldest are
	// removed to keep a new line under it, and a line that would not fit
	// under it alone is left out. At least FileBytes. 0: DefaultBytes.
	Bytes int64
	// Logger is told when a write fails (Error, once for a run of failed
	// writes, with the error and the records it lost), when writing works
	// again (Warn, with every record the run lost), when recording stops
	// for good (Error), and when a record is left out for its size (Warn).
	// nil: nothing is logged; Err, Lost and Close say it all the same.
	Logger *slog.Logger
}

// withDefaults is o with its zero bounds set to the defaults, or the error
// that makes it unusable.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.FileBytes < 0 || c.Files < 0 || c.Bytes < 0 {
		return c, fmt.Errorf("record: negative bounds (FileBytes %d, Files %d, Bytes %d)", c.FileBytes, c.Files, c.Bytes)
	}
	if c.FileBytes == 0 {
		c.FileBytes = DefaultFileBytes
	}
	if c.Files == 0 {
		c.Files = DefaultFiles
	}
	if c.Bytes == 0 {
		c.Bytes = DefaultBytes
	}
	if c.FileBytes > c.Bytes {
		return c, fmt.Errorf("record: a file of %d bytes would not fit in a log of %d: raise Bytes or lower FileBytes", c.FileBytes, c.Bytes)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Writer writes a traffic log: it is the runtime.Recorder of a server
// whose traffic is recorded. Each record is encoded as it is given and
// buffered as a whole line; the buffer is written when it fills and at
// every pause and end of a response, so that what a client has seen end
// is on disk.
//
// Its methods may be called from any goroutine. A record is taken under
// one mutex, with whatever writing, rotating and removing of files it
// sets off: recording costs the serving goroutine those system calls and
// never waits on anything else. Recording never stops the server: a
// record that cannot be written is dropped and counted (Lost), and the
// next write tries again. A write that fails inside a line leaves the
// file cut; a file of Create's is cut back to its last whole line, or,
// failing that, rotated out as it is (a Reader reads it up to the cut); a
// stream of New's, whose next line would join the cut one, ends there:
// recording stops.
type Writer struct {
	mu lockrank.Mutex[lockrank.Recorder]

	// Set when made, read-only after.
	log     *slog.Logger
	opts    Options   // Create's bounds
	started time.Time // the header's
	base    string    // Create's current file ("" for New's stream)
	open    openFunc  // opens a file of Create's; nil for New's stream

	// Guarded by mu.
	out      io.Writer     // the stream, or the current file; nil when Create's has none open (just rotated, or its open failed)
	closer   io.Closer     // out, when it is Create's file
	part     int           // the current file's part, from 1
	header   []byte        // the current file's first line
	written  int64         // the current file's bytes on disk, up to a line's end; its header's before it is opened
	size     int64         // written, and the bytes buffered for it
	buf      []byte        // whole lines to write to out
	bufAt    []time.Time   // when each record in buf was taken: what a failed write lost
	line     []byte        // the line being encoded, kept for the next
	rotated  []rotatedFile // the files rotated out and kept, oldest first
	rotBytes int64         // the bytes of rotated
	lines    int           // Lines'
	lost     int           // records dropped, in all
	failing  error         // the first error of the run of failed writes going on; nil while writes work
	runLost  int           // records the run of failures has dropped
	err      error         // the first error, Err's
	stopped  bool          // recording has ended: nothing more is written
	closed   bool
}

// rotatedFile is a file rotated out of a log, still kept.
type rotatedFile struct {
	name string
	size int64
}

// openFunc opens a file of a log with os.OpenFile's flags; a test's fails
// where it chooses.
type openFunc func(name string, flag int) (io.WriteCloser, error)

func openFile(name string, flag int) (io.WriteCloser, error) { return os.OpenFile(name, flag, 0o644) }

// Create starts a traffic log in dir (made if missing), in a new file named
// by the time and the process, tether-record-20261203T100000Z-1234.jsonl,
// rotated and bounded as opts says (nil: the defaults).
func Create(dir string, opts *Options) (*Writer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return create(dir, o, openFile)
}

func create(dir string, o Options, open openFunc) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	w := &Writer{log: o.Logger, opts: o, started: now, open: open, part: 1,
		base: filepath.Join(dir, fmt.Sprintf("tether-record-%s-%d.jsonl", now.Format("20060102T150405Z"), os.Getpid()))}
	w.header = appendHeader(nil, now, w.part)
	w.written, w.size = int64(len(w.header)), int64(len(w.header))
	// O_EXCL: another log's file is never taken over. O_APPEND: a file cut
	// back to its last whole line (failed) goes on from there.
	if err := w.openLocked(os.O_WRONLY | os.O_CREATE | os.O_EXCL | os.O_APPEND); err != nil {
		return nil, err
	}
	return w, nil
}

// New writes a traffic log to w, from its header on, as one stream: no
// rotation, no bounds, nothing logged (Err, Lost and Close say what
// failed).
func New(w io.Writer) *Writer {
	rw := &Writer{log: slog.New(slog.DiscardHandler), started: time.Now().UTC(), out: w}
	rw.header = appendHeader(nil, rw.started, 0)
	rw.buf = append(rw.buf, rw.header...)
	rw.size = int64(len(rw.header))
	return rw
}

// appendHeader appends a log's first line; part 0 is left out.
func appendHeader(b []byte, started time.Time, part int) []byte {
	b = append(b, `{"tether_record":`...)
	b = strconv.AppendInt(b, Version, 10)
	b = append(b, `,"started":`...)
	b = appendTime(b, started)
	if part > 0 {
		b = append(b, `,"part":`...)
		b = strconv.AppendInt(b, int64(part), 10)
	}
	return append(b, "}\n"...)
}

// Name is the file being written: Create's NAME.jsonl, whatever has been
// rotated out of it ("" for New's).
func (w *Writer) Name() string { return w.base }

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

// flushAt is how much is buffered before it is written without a pause
// or an end to wait for.
const flushAt = 64 << 10

// write encodes one line: at, id, the member named key holding v, what
// more adds; then takes it, flushing when flush is set.
func (w *Writer) write(at time.Time, id, key string, v any, more func([]byte) []byte, flush bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.stopped {
		w.lost++
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
	if cap(b) <= 1<<20 { // one huge line's buffer is not kept
		w.line = b
	}
	if w.fitLocked(at, id, int64(len(b))) {
		w.buf = append(w.buf, b...)
		w.bufAt = append(w.bufAt, at)
		w.size += int64(len(b))
		w.lines++
		if flush || len(w.buf) >= flushAt {
			w.flushLocked()
		}
	}
}

// resetBufLocked empties the buffer, keeping it unless a huge line grew it.
func (w *Writer) resetBufLocked() {
	if cap(w.buf) > 4*flushAt {
		w.buf = nil
	}
	w.buf, w.bufAt = w.buf[:0], w.bufAt[:0]
}

// Flush writes what is buffered, and returns the write's error.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	return w.flushLocked()
}

// Lines is how many records the log holds: written, or buffered to be;
// those removed with an old file are counted all the same.
func (w *Writer) Lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

// Lost is how many records were dropped: writes that failed, a line too
// large for the log's bound, or recording stopped.
func (w *Writer) Lost() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// Err is the first error writing met.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close flushes the log and closes the file Create opened. Call it after
// the server has shut down: what is recorded afterwards is dropped. Its
// error says how many records were lost and why, if any were.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errClosed
	}
	w.flushLocked()
	w.closed = true
	var err error
	if w.closer != nil {
		err = w.closer.Close()
		w.out, w.closer = nil, nil
	}
	if w.lost > 0 {
		why := w.err
		if why == nil {
			why = errors.New("records larger than the log's bound")
		}
		return fmt.Errorf("record: %d records lost: %w", w.lost, why)
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
