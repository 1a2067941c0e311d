package sampler

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// An upstream's server-sent events, read a field at a time.

// maxSSEEvent bounds one server-sent event (a line, or an event's data).
const maxSSEEvent = 16 << 20

var errSSETooLong = errors.New("sampler: server-sent event too long")

// sseReader reads server-sent events. Only the event and data fields matter
// here; comments, id and retry are skipped. llama.cpp's server reports a
// failure with an "error:" field, which is read as an event named "error".
type sseReader struct {
	r    *bufio.Reader
	line []byte
	data []byte
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 32<<10)} }

// next returns the next event. data is valid until the following call. At
// the end of the stream, an event without its closing blank line is still
// returned; then err is io.EOF.
func (s *sseReader) next() (event string, data []byte, err error) {
	s.data = s.data[:0]
	has := false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && has {
				return event, s.data, nil
			}
			return "", nil, err
		}
		if len(line) == 0 {
			if has {
				return event, s.data, nil
			}
			event = ""
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "event":
			event = string(value)
		case "error":
			event = "error"
			fallthrough
		case "data":
			if has {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			has = true
			if len(s.data) > maxSSEEvent {
				return "", nil, errSSETooLong
			}
		}
	}
}

// readLine returns the next line without its line ending; the last line may
// lack one.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.line = append(s.line, chunk...)
		if len(s.line) > maxSSEEvent {
			return nil, errSSETooLong
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(s.line) > 0:
		case err != nil:
			return nil, err
		}
		line := bytes.TrimSuffix(s.line, []byte{'\n'})
		return bytes.TrimSuffix(line, []byte{'\r'}), nil
	}
}
