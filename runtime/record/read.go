package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// Kind is what a line of a traffic log holds.
type Kind string

const (
	KindRequest Kind = "request"
	KindEvent   Kind = "event"
	KindAppend  Kind = "append"
)

// Line is one line of a traffic log after its header. Its value is kept
// as it was recorded; Request, Event and Append decode it.
type Line struct {
	File       string // the file it is in ("" for NewReader's stream)
	N          int    // the line's number in its file, from 1 (the header's)
	At         time.Time
	ResponseID string
	Kind       Kind
	Value      json.RawMessage    // the request, the event or the appended input
	Path       *runtime.ServePath // a request's, when the log says
}

// Where is the line's place: "FILE: line N", or "line N" in a stream.
func (l *Line) Where() string { return where(l.File, l.N) }

func where(file string, n int) string {
	if file == "" {
		return "line " + strconv.Itoa(n)
	}
	return file + ": line " + strconv.Itoa(n)
}

// Request decodes a request line's value.
func (l *Line) Request() (*protocol.CreateRequest, error) {
	req, perr := protocol.DecodeCreateRequest(l.Value)
	if perr != nil {
		return nil, l.errorf("request: %s", perr.Message)
	}
	return req, nil
}

// Event decodes an event line's value (a response's tools left out, as
// protocol.DecodeEventLean does). An event of a type protocol does not
// know is an error; EventType reads the type alone.
func (l *Line) Event() (protocol.Event, error) {
	ev, perr := protocol.DecodeEventLean(l.Value)
	if perr != nil {
		return nil, l.errorf("event: %s", perr.Message)
	}
	return ev, nil
}

// EventType is an event line's type, without decoding the rest.
func (l *Line) EventType() protocol.EventType {
	var head struct {
		Type protocol.EventType `json:"type"`
	}
	json.Unmarshal(l.Value, &head)
	return head.Type
}

// Append decodes an append line's input.
func (l *Line) Append() (protocol.Items, error) {
	items, perr := protocol.DecodeItems(l.Value, "append")
	if perr != nil {
		return nil, l.errorf("append: %s", perr.Message)
	}
	return items, nil
}

func (l *Line) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{l.Where()}, a...)...)
}

// Cut is where a file of a log ends inside a line, which its writer did
// not finish: it was stopped, or a write failed and the file could not be
// cut back to its last whole line.
type Cut struct {
	File string // "" for NewReader's stream
	Line int    // the line it ends inside
}

func (c Cut) String() string { return where(c.File, c.Line) }

// Reader reads a traffic log line by line: one stream (NewReader), or the
// files of a log (OpenFiles) as one. A file that ends inside a line is
// read up to its last whole line; the cut is noted (Cuts) and reading goes
// on with the next file. A Reader is for one goroutine.
type Reader struct {
	Header Header // the first file's

	files []string      // OpenFiles' files not yet opened
	f     *os.File      // the file being read, closed by Close or at its end
	file  string        // its name ("" for NewReader's stream)
	br    *bufio.Reader // reads it
	n     int           // the lines of it read
	lines int           // whole lines read, in all
	cuts  []Cut
}

// MaxLine bounds one line of a log: a request holds a whole stateless
// conversation.
const MaxLine = 64 << 20

// NewReader reads a log's header and returns the reader of its lines. A
// log of another version, or no log at all, is an error.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	h, err := rd.header()
	if err == io.EOF {
		return nil, errors.New("empty: no tether_record header")
	}
	if err != nil {
		return nil, err
	}
	rd.Header = h
	return rd, nil
}

// OpenFiles reads the files of a log, in the order Files lists them, as
// one log: each begins with its header; a file without one (empty, or
// its header cut) is passed over. The reader's Close closes them.
func OpenFiles(files ...string) (*Reader, error) {
	rd := &Reader{files: files}
	h, err := rd.nextFile()
	if err == io.EOF {
		err = fmt.Errorf("%s: empty: no tether_record header", strings.Join(files, ", "))
	}
	if err != nil {
		rd.Close()
		return nil, err
	}
	rd.Header = h
	return rd, nil
}

// nextFile opens the next file that has a header and reads it; io.EOF
// when none is left.
func (rd *Reader) nextFile() (Header, error) {
	for len(rd.files) > 0 {
		rd.Close()
		f, err := os.Open(rd.files[0])
		if err != nil {
			return Header{}, err
		}
		rd.f, rd.file, rd.files, rd.n = f, rd.files[0], rd.files[1:], 0
		if rd.br == nil {
			rd.br = bufio.NewReaderSize(f, 64<<10)
		} else {
			rd.br.Reset(f)
		}
		h, err := rd.header()
		if err == io.EOF {
			continue
		}
		return h, err
	}
	return Header{}, io.EOF
}

// header reads a file's header line.
func (rd *Reader) header() (Header, error) {
	for {
		b, err := rd.line()
		if err != nil {
			return Header{}, err
		}
		if len(b) == 0 {
			continue
		}
		var h struct {
			Record  *int      `json:"tether_record"`
			Started time.Time `json:"started"`
			Part    int       `json:"part"`
		}
		if err := json.Unmarshal(b, &h); err != nil || h.Record == nil {
			return Header{}, rd.errorf("not a tether traffic log: the first line is not a tether_record header")
		}
		if *h.Record != Version {
			return Header{}, rd.errorf("a traffic log of version %d: this tether reads version %d", *h.Record, Version)
		}
		return Header{Record: *h.Record, Started: h.Started, Part: h.Part}, nil
	}
}

// Cuts are the places where the files read so far end inside a line.
func (rd *Reader) Cuts() []Cut { return rd.cuts }

// Lines is how many whole lines have been read, headers included, in all
// files.
func (rd *Reader) Lines() int { return rd.lines }

// Close closes the file being read, if OpenFiles opened it.
func (rd *Reader) Close() error {
	if rd.f == nil {
		return nil
	}
	err := rd.f.Close()
	rd.f = nil
	return err
}

func (rd *Reader) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{where(rd.file, rd.n)}, a...)...)
}

// wireLine is a line as it is written.
type wireLine struct {
	At         time.Time          `json:"at"`
	ResponseID string             `json:"response_id"`
	Request    json.RawMessage    `json:"request"`
	Event      json.RawMessage    `json:"event"`
	Append     json.RawMessage    `json:"append"`
	Path       *runtime.ServePath `json:"path"`
}

// Next returns the next line, or io.EOF after the last of the last file.
// A line that is not one of the format's is an error naming it.
func (rd *Reader) Next() (*Line, error) {
	for {
		b, err := rd.line()
		if err == io.EOF && len(rd.files) > 0 {
			if _, err = rd.nextFile(); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			continue
		}
		var w wireLine
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, rd.errorf("not JSON: %v", err)
		}
		l := &Line{File: rd.file, N: rd.n, At: w.At, ResponseID: w.ResponseID, Path: w.Path}
		set := 0
		for _, v := range []struct {
			kind Kind
			raw  json.RawMessage
		}{{KindRequest, w.Request}, {KindEvent, w.Event}, {KindAppend, w.Append}} {
			if len(v.raw) > 0 {
				l.Kind, l.Value = v.kind, v.raw
				set++
			}
		}
		switch {
		case set != 1:
			return nil, rd.errorf("holds %d of request, event and append: want one", set)
		case w.ResponseID == "":
			return nil, rd.errorf("no response_id")
		case w.At.IsZero():
			return nil, rd.errorf("no at")
		}
		return l, nil
	}
}

// line reads the next line of the file, trimmed; io.EOF at its end. The
// last line may end without a newline: one that is not JSON there was cut
// short, and is noted and passed over.
func (rd *Reader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLine {
			rd.n++
			return nil, rd.errorf("longer than %d MiB", MaxLine>>20)
		}
		switch err {
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) == 0 {
				return nil, io.EOF
			}
			rd.n++
			line = bytes.TrimSpace(line)
			if len(line) > 0 && !json.Valid(line) {
				rd.cuts = append(rd.cuts, Cut{File: rd.file, Line: rd.n})
				return nil, io.EOF
			}
			rd.lines++
			return line, nil
		case nil:
			rd.n++
			rd.lines++
			return bytes.TrimSpace(line), nil
		default:
			return nil, err
		}
	}
}
