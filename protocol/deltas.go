package protocol

import (
	"strconv"
	"unicode/utf8"
)

// Text and argument deltas are most of the events a server writes, one per
// token: Marshal writes them with appendDelta below, straight into their
// bytes, instead of the codec's reflection over their structs. The bytes are
// the codec's own (TestDeltaEncoding, FuzzDeltaEncoding); a delta whose
// strings need an escape beyond the common ones takes the codec's path.

// marshalDelta encodes the delta events that have a fast path; ok is false
// for any other value, or a delta whose strings take the codec.
func marshalDelta(v any) (b []byte, ok bool) {
	switch e := v.(type) {
	case *TextDeltaEvent:
		if e.Logprobs != nil && len(*e.Logprobs) > 0 {
			return nil, false
		}
		b = make([]byte, 0, 192+len(e.Delta)+len(e.ItemID)+len(e.StreamID))
		b, ok = appendHeader(b, &e.EventHeader)
		b = append(b, `,"item_id":`...)
		b, ok = appendPlain(b, e.ItemID, ok)
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(e.OutputIndex), 10)
		b = append(b, `,"content_index":`...)
		b = strconv.AppendInt(b, int64(e.ContentIndex), 10)
		b = append(b, `,"delta":`...)
		b, ok = appendPlain(b, e.Delta, ok)
		if e.Logprobs != nil {
			b = append(b, `,"logprobs":[]`...)
		}
		return append(b, '}'), ok
	case *FunctionArgsDeltaEvent:
		b = make([]byte, 0, 160+len(e.Delta)+len(e.ItemID)+len(e.StreamID))
		b, ok = appendHeader(b, &e.EventHeader)
		b = append(b, `,"item_id":`...)
		b, ok = appendPlain(b, e.ItemID, ok)
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(e.OutputIndex), 10)
		b = append(b, `,"delta":`...)
		b, ok = appendPlain(b, e.Delta, ok)
		return append(b, '}'), ok
	}
	return nil, false
}

// appendHeader opens an event's object with its header's fields.
func appendHeader(b []byte, h *EventHeader) ([]byte, bool) {
	b = append(b, `{"type":`...)
	b, ok := appendPlain(b, string(h.Type), true)
	b = append(b, `,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(h.SequenceNumber), 10)
	if h.StreamID != "" {
		b = append(b, `,"stream_id":`...)
		b, ok = appendPlain(b, h.StreamID, ok)
	}
	return b, ok
}

// appendPlain appends s quoted, as the codec quotes it, when s needs no
// escape but \" \\ \n \r \t; ok is false (and b unusable) otherwise, or
// when ok was false already. The codec (encoding/json's rules) escapes <, >
// and &, other control characters, U+2028 and U+2029, and replaces invalid
// UTF-8: those strings take its path.
func appendPlain(b []byte, s string, ok bool) ([]byte, bool) {
	if !ok {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return b, false
			}
			i += size
			continue
		}
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c < 0x20, c == '<', c == '>', c == '&':
			return b, false
		default:
			i++
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, esc...)
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
