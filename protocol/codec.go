package protocol

import (
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// The package's one JSON codec. Every type with a wire shape of its own (an
// item, a content part, a tool, a client event) has one encoder, its
// MarshalJSONTo; its MarshalJSON, for encoding/json, calls Marshal. Both
// directions keep encoding/json's rules (names matched without case,
// duplicate names allowed, invalid UTF-8 replaced, <, > and & escaped,
// omitempty as it was), run by the json v2 engine (go-json-experiment/json,
// the code of Go's encoding/json/v2 experiment): it checks its input once,
// where encoding/json checks and compacts the output of every nested
// MarshalJSON again and validates the input of every nested UnmarshalJSON
// again, which makes a large response.append many times slower to write.

// v1Options are encoding/json's rules, for the v2 engine.
var v1Options = jsonv1.DefaultOptionsV1()

// Marshal is v as JSON: the encoding of every event, item and request a
// server or client of this package writes.
func Marshal(v any) ([]byte, error) {
	if n := deltaSize(v); n > 0 {
		if b, ok := appendDelta(make([]byte, 0, n), v); ok {
			return b, nil
		}
	}
	if n := itemSize(v); n > 0 {
		if b, ok := appendItem(make([]byte, 0, n), v); ok {
			return b, nil
		}
	}
	if b, ok, err := appendKept(nil, v); ok {
		return b, err
	}
	return jsonv2.Marshal(v, v1Options)
}

// AppendMarshal appends v as JSON (as Marshal encodes it) to dst: a writer
// that encodes every event into a buffer it reuses allocates nothing for
// the deltas, most of what it writes. On error dst is returned as it was.
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	if b, ok := appendDelta(dst, v); ok {
		return b, nil
	}
	if b, ok := appendItem(dst, v); ok {
		return b, nil
	}
	if b, ok := appendStepEvent(dst, v); ok {
		return b, nil
	}
	if b, ok := appendTextEvent(dst, v); ok {
		return b, nil
	}
	if b, ok, err := appendKept(dst, v); ok {
		if err != nil {
			return dst, err
		}
		return b, nil
	}
	// Written into dst, not into a copy of the encoder's buffer appended
	// to it: a response object a step is a few KB a time.
	w := appenders.Get().(*appender)
	w.b = dst
	err := jsonv2.MarshalWrite(w, v, v1Options)
	b := w.b
	w.b = nil
	appenders.Put(w)
	if err != nil {
		return dst, err
	}
	return b, nil
}

// appender is an io.Writer that appends to b.
type appender struct{ b []byte }

func (w *appender) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var appenders = sync.Pool{New: func() any { return new(appender) }}

// marshalTo writes v to enc, for a MarshalJSONTo.
func marshalTo(enc *jsontext.Encoder, v any) error { return jsonv2.MarshalEncode(enc, v, v1Options) }

// unmarshal decodes data into v; every decoder of the package goes through
// it.
func unmarshal(data []byte, v any) error { return jsonv1.Unmarshal(data, v) }

// Unmarshal decodes JSON into v by the package's codec: what a program
// that keeps the package's objects (a store) reads them back with.
func Unmarshal(data []byte, v any) error { return unmarshal(data, v) }
