package protocol

import (
	"encoding/binary"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A tool's output is most of an agent's context, and it is text full of
// escapes: every line ends in \n, code has \t, quotes, and <, > and &,
// which the codec writes as \u003c, \u003e and \u0026. text reads such a
// string in one pass, checking and unescaping it as it copies it, eight
// bytes at a time between escapes; the codec's reader goes over a string
// three times (its value checked, its token read, its text unquoted).

// text reads a string, any escape JSON has, into a copy. It refuses what
// the codec would read otherwise or not at all: a control byte, invalid
// UTF-8, a lone surrogate.
func (s *deltaScanner) text() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	var out strings.Builder
	start := s.i
	for {
		s.i += plainRun(s.b[s.i:])
		if s.i >= len(s.b) {
			return "", false
		}
		switch c := s.b[s.i]; {
		case c == '"':
			run := s.b[start:s.i]
			s.i++
			if out.Cap() == 0 {
				return string(run), true
			}
			out.Write(run)
			return out.String(), true
		case c == '\\':
			if out.Cap() == 0 {
				out.Grow(len(s.b) - start) // the string is at most the rest
			}
			out.Write(s.b[start:s.i])
			n, ok := unescape(s.b[s.i:], &out)
			if !ok {
				return "", false
			}
			s.i += n
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

// unescape writes the character of the escape b begins with and reports
// the escape's length.
func unescape(b []byte, out *strings.Builder) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	if c := escapes[b[1]]; c != 0 {
		out.WriteByte(c)
		return 2, true
	}
	if b[1] != 'u' {
		return 0, false
	}
	r, ok := hex4(b[2:])
	switch {
	case !ok:
		return 0, false
	case !utf16.IsSurrogate(r):
		out.WriteRune(r)
		return 6, true
	}
	// A surrogate pair, high then low, or the codec's to replace.
	if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
		return 0, false
	}
	low, ok := hex4(b[8:])
	if r = utf16.DecodeRune(r, low); !ok || r == utf8.RuneError {
		return 0, false
	}
	out.WriteRune(r)
	return 12, true
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

// plainRun is the length of b's prefix that a string holds as it is:
// ASCII, no control byte, no quote, no backslash. Eight bytes at a time,
// each word tested for any such byte at once (a byte below 0x20, one
// equal to '"' or '\\', a high bit: the "has a zero byte" test of
// Hacker's Delight, per kind), then byte by byte from the word that has
// one.
func plainRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, bs := w^(ones*'"'), w^(ones*'\\')
		if ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs|w)&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			break
		}
	}
	return i
}
