package protocol

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Text and argument deltas are most of the events a server writes, one per
// token: Marshal and AppendMarshal write them with appendDelta below,
// straight into the caller's buffer, instead of the codec's reflection over
// their structs. The bytes are the codec's own (TestDeltaEncoding,
// FuzzDeltaEncoding); a delta whose strings need an escape beyond the
// common ones takes the codec's path.

// appendDelta appends the delta events that have a fast path to b; ok is
// false (and what it appended is to be dropped) for any other value, or a
// delta whose strings take the codec.
func appendDelta(b []byte, v any) (_ []byte, ok bool) {
	switch e := v.(type) {
	case *TextDeltaEvent:
		if e.Logprobs != nil && len(*e.Logprobs) > 0 {
			return b, false
		}
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
		b, ok = appendHeader(b, &e.EventHeader)
		b = append(b, `,"item_id":`...)
		b, ok = appendPlain(b, e.ItemID, ok)
		b = append(b, `,"output_index":`...)
		b = strconv.AppendInt(b, int64(e.OutputIndex), 10)
		b = append(b, `,"delta":`...)
		b, ok = appendPlain(b, e.Delta, ok)
		return append(b, '}'), ok
	}
	return b, false
}

// deltaSize is room enough for v's encoding if it is a delta with a fast
// path, 0 otherwise.
func deltaSize(v any) int {
	switch e := v.(type) {
	case *TextDeltaEvent:
		return 192 + len(e.Delta) + len(e.ItemID) + len(e.StreamID) + agentSize(e.Agent)
	case *FunctionArgsDeltaEvent:
		return 160 + len(e.Delta) + len(e.ItemID) + len(e.StreamID) + agentSize(e.Agent)
	}
	return 0
}

// agentSize is room enough for an event's agent member.
func agentSize(a *AgentRef) int {
	if a == nil {
		return 0
	}
	return 32 + len(a.AgentName)
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
	if h.Agent != nil {
		b = append(b, `,"agent":{"agent_name":`...)
		b, ok = appendPlain(b, h.Agent.AgentName, ok)
		b = append(b, '}')
	}
	return b, ok
}

// appendPlain appends s quoted, as the codec quotes it, when s needs no
// escape but \" \\ \n \r \t and the codec's \u003c, \u003e and \u0026
// for <, > and &; ok is false (and b unusable) otherwise, or when ok was
// false already. The codec (encoding/json's rules) also escapes other
// control characters, U+2028 and U+2029, and replaces invalid UTF-8:
// those strings take its path.
func appendPlain(b []byte, s string, ok bool) ([]byte, bool) {
	if !ok {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if quotedByte[c] { // a byte a time: a tool's output has an escape every few bytes
			i++
			continue
		}
		if c < utf8.RuneSelf {
			esc := quoteEscapes[c]
			if esc == "" {
				return b, false
			}
			b = append(append(b, s[start:i]...), esc...)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return b, false
		}
		i += size
	}
	return append(append(b, s[start:]...), '"'), true
}

// quoteEscapes is how the codec escapes the ASCII bytes appendPlain
// escapes.
var quoteEscapes = [utf8.RuneSelf]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\r': `\r`, '\t': `\t`,
	'<': `\u003c`, '>': `\u003e`, '&': `\u0026`}

// decodeDelta reads a text or argument delta event the way the codec
// would, by a scanner of the flat object such an event is, without
// reflection; ok is false for anything else, and for any delta the scanner
// does not take whole (a key it does not know, a string with a \u escape or
// invalid UTF-8, a number that is not a small integer, logprobs that are
// not empty): those take the codec's path, which decides. A client reads a
// delta per token, most of what it reads (FuzzDeltaDecoding checks that
// whatever the scanner takes, the codec reads the same).
func decodeDelta(data []byte) (ev Event, ok bool) {
	t, ok := leadingType(data)
	if !ok {
		return nil, false
	}
	var text *TextDeltaEvent
	var args *FunctionArgsDeltaEvent
	var h *EventHeader
	switch EventType(t) {
	case EventOutputTextDelta:
		text = &TextDeltaEvent{}
		h, ev = &text.EventHeader, text
	case EventFunctionArgsDelta:
		args = &FunctionArgsDeltaEvent{}
		h, ev = &args.EventHeader, args
	default:
		return nil, false
	}
	s := deltaScanner{b: data, s: string(data)}
	ok = s.object(func(key []byte) bool {
		var ok bool
		switch string(key) { // compared without a copy
		case "type":
			var v string
			v, ok = s.str()
			h.Type = EventType(v)
		case "sequence_number":
			ok = s.int(&h.SequenceNumber)
		case "stream_id":
			h.StreamID, ok = s.str()
		case "item_id":
			if text != nil {
				text.ItemID, ok = s.str()
			} else {
				args.ItemID, ok = s.str()
			}
		case "output_index":
			if text != nil {
				ok = s.int(&text.OutputIndex)
			} else {
				ok = s.int(&args.OutputIndex)
			}
		case "content_index":
			ok = text != nil && s.int(&text.ContentIndex)
		case "delta":
			if text != nil {
				text.Delta, ok = s.str()
			} else {
				args.Delta, ok = s.str()
			}
		case "logprobs":
			ok = text != nil && s.byte('[') && s.byte(']')
			if ok {
				text.Logprobs = &[]LogProb{}
			}
		case "obfuscation": // OpenAI's padding of a delta's length
			_, ok = s.str()
		case "agent": // a sub-agent's delta
			h.Agent = new(AgentRef)
			ok = s.members(func(key []byte) bool {
				var ok bool
				if string(key) == "agent_name" {
					h.Agent.AgentName, ok = s.str()
				}
				return ok
			})
		}
		return ok
	})
	if !ok || string(h.Type) != t {
		return nil, false
	}
	return ev, true
}

// object reads one object, the whole input, whose every member's value
// member reads, given the member's name (without escapes); it reports
// false for a name it does not take.
func (s *deltaScanner) object(member func(key []byte) bool) bool {
	if !s.members(member) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// members reads an object, which may be a member's value, as object does.
func (s *deltaScanner) members(member func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	for more := !s.byte('}'); more; {
		key, escaped, ok := s.raw()
		if !ok || escaped || !s.byte(':') || !member(key) {
			return false
		}
		if more = s.byte(','); !more && !s.byte('}') {
			return false
		}
	}
	return true
}

// deltaScanner reads the tokens of a flat JSON object. The strings it
// returns are s's where they need no unescaping: one copy of the frame, not
// one a field.
type deltaScanner struct {
	b []byte
	s string // b
	i int
}

func (s *deltaScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

// byte reads c, after any space.
func (s *deltaScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string whose escapes are only \" \\ \/ \b \f \n \r \t and
// whose bytes are valid UTF-8.
func (s *deltaScanner) str() (string, bool) {
	raw, escaped, ok := s.raw()
	switch {
	case !ok || !utf8.Valid(raw):
		return "", false
	case escaped:
		return unescapeSimple(raw)
	}
	end := s.i - 1 // the closing quote
	return s.s[end-len(raw) : end], true
}

// raw reads a string's bytes between its quotes, as they are, and whether
// they hold an escape.
func (s *deltaScanner) raw() (raw []byte, escaped, ok bool) {
	if !s.byte('"') {
		return nil, false, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, true
		case c == '\\':
			escaped = true
			s.i++
		case c < 0x20:
			return nil, false, false
		}
	}
	return nil, false, false
}

// plain reads a string without escapes, valid UTF-8, as a copy.
func (s *deltaScanner) plain() (string, bool) {
	raw, escaped, ok := s.raw()
	if !ok || escaped || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw), true
}

// skip reads past one value: a string to its closing quote, an object or
// array to the bracket that closes it, a number or literal to the byte
// that ends it. Only strings are checked (for their quote and control
// bytes); brackets are counted, not matched by kind.
func (s *deltaScanner) skip() bool {
	s.space()
	start, depth := s.i, 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if !s.skipString() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.i > start // the end of a scalar
			}
			if depth--; depth == 0 {
				s.i++
				return true
			}
		case ',', ' ', '\n', '\t', '\r':
			if depth == 0 {
				return s.i > start
			}
		}
		s.i++
	}
	return depth == 0 && s.i > start
}

// skipString reads past a string, from its opening quote: to the first
// quote not escaped, found a chunk at a time (bytes.IndexByte), the bytes
// between unchecked.
func (s *deltaScanner) skipString() bool {
	start := s.i + 1
	for from := start; ; {
		j := bytes.IndexByte(s.b[from:], '"')
		if j < 0 {
			return false
		}
		end := from + j
		slashes := 0
		for k := end - 1; k >= start && s.b[k] == '\\'; k-- {
			slashes++
		}
		if slashes%2 == 0 {
			s.i = end + 1
			return true
		}
		from = end + 1
	}
}

// unescapeSimple undoes the escapes str takes; \u and any other are not.
func unescapeSimple(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", false
		}
	}
	return string(out), true
}

// maxIntDigits is the most digits int reads: none of them overflows an int.
var maxIntDigits = map[int]int{32: 9, 64: 18}[strconv.IntSize]

// int reads an integer of at most maxIntDigits digits into v.
func (s *deltaScanner) int(v *int) bool {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	n := 0
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		n = n*10 + int(s.b[s.i]-'0')
	}
	switch d := s.i - digits; {
	case d == 0, d > maxIntDigits, d > 1 && s.b[digits] == '0':
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return false
	}
	if s.b[start] == '-' {
		n = -n
	}
	*v = n
	return true
}
