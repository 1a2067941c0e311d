package protocol

import (
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// A tool's output is most of an agent's context, and it is text full of
// escapes: every line ends in \n, code has \t, quotes, and <, > and &,
// which the codec writes as \u003c, \u003e and \u0026. text reads such a
// string in one pass, checking and unescaping it as it copies it, a byte
// at a time by table (an escape comes every few bytes: runs are too short
// for wider reads to pay); the codec's reader goes over a string three
// times (its value checked, its token read, its text unquoted).

// text reads a string, any escape JSON has, into a copy. It refuses what
// the codec would read otherwise or not at all: a control byte, invalid
// UTF-8, a lone surrogate.
func (s *deltaScanner) text() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	var out []byte // nil until the first escape
	start := s.i
	for {
		for s.i < len(s.b) && plainByte[s.b[s.i]] { // a byte a time: a tool's output has an escape every few bytes
			s.i++
		}
		if s.i >= len(s.b) {
			return "", false
		}
		switch c := s.b[s.i]; {
		case c == '"':
			run := s.b[start:s.i]
			s.i++
			if out == nil {
				return string(run), true
			}
			out = append(out, run...)
			text := string(out)
			putUnescaped(out)
			return text, true
		case c == '\\':
			if out == nil {
				out = getUnescaped(len(s.b) - start) // the string is at most the rest
			}
			out = append(out, s.b[start:s.i]...)
			if s.i+1 < len(s.b) && escapes[s.b[s.i+1]] != 0 {
				out = append(out, escapes[s.b[s.i+1]])
				s.i += 2
			} else {
				var n int
				var ok bool
				if out, n, ok = unescapeU(out, s.b[s.i:]); !ok {
					return "", false
				}
				s.i += n
			}
			start = s.i
		case c < 0x20:
			return "", false
		default: // not ASCII
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			s.i += size
		}
	}
}

// unescapedBufs are the buffers text unescapes into before its string is
// copied out: a tool's output was two allocations of its size (the buffer,
// then the string), and is one. One larger than maxUnescaped is not kept.
var unescapedBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxUnescaped = 64 << 10

func getUnescaped(n int) []byte {
	b := *unescapedBufs.Get().(*[]byte)
	if cap(b) < n {
		return make([]byte, 0, n)
	}
	return b[:0]
}

func putUnescaped(b []byte) {
	if cap(b) <= maxUnescaped {
		unescapedBufs.Put(&b)
	}
}

// unescapeU appends the character of the \u escape b begins with (a
// surrogate pair's two) and reports the escape's length.
func unescapeU(out, b []byte) (_ []byte, n int, ok bool) {
	if len(b) < 6 || b[1] != 'u' {
		return out, 0, false
	}
	r, ok := hex4(b[2:])
	switch {
	case !ok:
		return out, 0, false
	case !utf16.IsSurrogate(r):
		return utf8.AppendRune(out, r), 6, true
	}
	// A surrogate pair, high then low, or the codec's to replace.
	if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
		return out, 0, false
	}
	low, ok := hex4(b[8:])
	if r = utf16.DecodeRune(r, low); !ok || r == utf8.RuneError {
		return out, 0, false
	}
	return utf8.AppendRune(out, r), 12, true
}

// escapes is the character of each one-letter escape, 0 for none.
var escapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// plainByte reports the bytes a JSON string holds as they are: ASCII, no
// control byte, no quote, no backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// quotedByte reports the bytes the codec writes as they are, quoted:
// plainByte's but for <, > and &, which it escapes (appendPlain).
var quotedByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
