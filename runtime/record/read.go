package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	N          int // the line's number in the log, from 1 (the header's)
	At         time.Time
	ResponseID string
	Kind       Kind
	Value      json.RawMessage    // the request, the event or the appended input
	Path       *runtime.ServePath // a request's, when the log says
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
	return fmt.Errorf("line %d: "+format, append([]any{l.N}, a...)...)
}

// Reader reads a traffic log line by line.
type Reader struct {
	Header Header
	br     *bufio.Reader
	n      int
}

// MaxLine bounds one line of a log: a request holds a whole stateless
// conversation.
const MaxLine = 64 << 20

// NewReader reads a log's header and returns the reader of its lines. A
// log of another version, or no log at all, is an error.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	for {
		b, err := rd.line()
		if err != nil {
			if err == io.EOF {
				return nil, errors.New("empty: no tether_record header")
			}
			return nil, err
		}
		if len(b) == 0 {
			continue
		}
		var h struct {
			Record  *int      `json:"tether_record"`
			Started time.Time `json:"started"`
		}
		if err := json.Unmarshal(b, &h); err != nil || h.Record == nil {
			return nil, fmt.Errorf("line %d: not a tether traffic log: the first line is not a tether_record header", rd.n)
		}
		if *h.Record != Version {
			return nil, fmt.Errorf("line %d: a traffic log of version %d: this tether reads version %d", rd.n, *h.Record, Version)
		}
		rd.Header = Header{Record: *h.Record, Started: h.Started}
		return rd, nil
	}
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

// Next returns the next line, or io.EOF after the last. A line that is not
// one of the format's is an error naming it.
func (rd *Reader) Next() (*Line, error) {
	for {
		b, err := rd.line()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			continue
		}
		var w wireLine
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("line %d: not JSON: %v", rd.n, err)
		}
		l := &Line{N: rd.n, At: w.At, ResponseID: w.ResponseID, Path: w.Path}
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
			return nil, fmt.Errorf("line %d: holds %d of request, event and append: want one", rd.n, set)
		case w.ResponseID == "":
			return nil, fmt.Errorf("line %d: no response_id", rd.n)
		case w.At.IsZero():
			return nil, fmt.Errorf("line %d: no at", rd.n)
		}
		return l, nil
	}
}

// line reads the next line, trimmed. The last line may end without a
// newline; one that is not JSON there was cut short.
func (rd *Reader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLine {
			rd.n++
			return nil, fmt.Errorf("line %d: longer than %d MiB", rd.n, MaxLine>>20)
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
				return nil, fmt.Errorf("line %d: truncated: the log ends inside it", rd.n)
			}
			return line, nil
		case nil:
			rd.n++
			return bytes.TrimSpace(line), nil
		default:
			return nil, err
		}
	}
}
