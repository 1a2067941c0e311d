package protocol

import (
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file reads a msgpack frame's head where it lies (msgpack.go
// transcodes whole frames).

// PeekClientEventAs is PeekClientEvent for a frame of encoding e: a msgpack
// frame's head is read where it lies, without transcoding (or copying) the
// rest, so that a server may refuse a large frame before it pays for it.
func PeekClientEventAs(e Encoding, data []byte) (typ ClientEventType, lane string, ok bool) {
	if e == EncodingJSON {
		return PeekClientEvent(data)
	}
	n, i, ok := mpHeader(data, 0)
	if !ok || n.kind != 'm' {
		return "", "", false
	}
	var found bool
	for range n.n {
		key, j, ok := mpString(data, i)
		if !ok {
			return "", "", false
		}
		switch key {
		case "type", "stream_id":
			v, k, ok := mpString(data, j)
			if !ok {
				return "", "", false
			}
			if key == "type" {
				typ, found = ClientEventType(v), true
			} else {
				lane = v
			}
			i = k
		default:
			if i, ok = mpSkip(data, j, 0); !ok {
				return "", "", false
			}
		}
	}
	return typ, lane, found
}

// mpHead is a msgpack value's header: its kind ('m' map, 'a' array, 's'
// str or bin, 'x' anything else) and, for the first three, its count or
// length.
type mpHead struct {
	kind byte
	n    int
}

// mpHeader reads the header of the value at i; next is where its body
// starts (for 'x', where the value ends).
func mpHeader(b []byte, i int) (h mpHead, next int, ok bool) {
	if i >= len(b) {
		return h, 0, false
	}
	c := b[i]
	be := func(size int) (int, bool) {
		if i+1+size > len(b) {
			return 0, false
		}
		v := 0
		for _, x := range b[i+1 : i+1+size] {
			v = v<<8 | int(x)
		}
		return v, true
	}
	fixed := func(size int) (mpHead, int, bool) { return mpHead{kind: 'x'}, i + 1 + size, i+1+size <= len(b) }
	counted := func(kind byte, size int) (mpHead, int, bool) {
		n, ok := be(size)
		return mpHead{kind: kind, n: n}, i + 1 + size, ok
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == msgpcode.Nil || c == msgpcode.False || c == msgpcode.True:
		return fixed(0)
	case c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh:
		return mpHead{kind: 'm', n: int(c & 0x0f)}, i + 1, true
	case c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh:
		return mpHead{kind: 'a', n: int(c & 0x0f)}, i + 1, true
	case c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh:
		return mpHead{kind: 's', n: int(c & 0x1f)}, i + 1, true
	case c == msgpcode.Str8 || c == msgpcode.Bin8:
		return counted('s', 1)
	case c == msgpcode.Str16 || c == msgpcode.Bin16:
		return counted('s', 2)
	case c == msgpcode.Str32 || c == msgpcode.Bin32:
		return counted('s', 4)
	case c == msgpcode.Array16:
		return counted('a', 2)
	case c == msgpcode.Array32:
		return counted('a', 4)
	case c == msgpcode.Map16:
		return counted('m', 2)
	case c == msgpcode.Map32:
		return counted('m', 4)
	case c == msgpcode.Uint8 || c == msgpcode.Int8:
		return fixed(1)
	case c == msgpcode.Uint16 || c == msgpcode.Int16:
		return fixed(2)
	case c == msgpcode.Uint32 || c == msgpcode.Int32 || c == msgpcode.Float:
		return fixed(4)
	case c == msgpcode.Uint64 || c == msgpcode.Int64 || c == msgpcode.Double:
		return fixed(8)
	case c == msgpcode.FixExt1, c == msgpcode.FixExt2, c == msgpcode.FixExt4, c == msgpcode.FixExt8, c == msgpcode.FixExt16:
		return fixed(1 + 1<<(c-msgpcode.FixExt1))
	case c == msgpcode.Ext8 || c == msgpcode.Ext16 || c == msgpcode.Ext32:
		size := 1 << (c - msgpcode.Ext8)
		n, ok := be(size)
		return mpHead{kind: 'x'}, i + 1 + size + 1 + n, ok && i+1+size+1+n <= len(b)
	}
	return h, 0, false
}

// mpString reads the str or bin at i.
func mpString(b []byte, i int) (s string, next int, ok bool) {
	h, j, ok := mpHeader(b, i)
	if !ok || h.kind != 's' || j+h.n > len(b) {
		return "", 0, false
	}
	return string(b[j : j+h.n]), j + h.n, true
}

// mpSkip returns where the value at i ends.
func mpSkip(b []byte, i, depth int) (int, bool) {
	if depth > maxDepth {
		return 0, false
	}
	h, j, ok := mpHeader(b, i)
	if !ok {
		return 0, false
	}
	switch h.kind {
	case 's':
		return j + h.n, j+h.n <= len(b)
	case 'm', 'a':
		items := h.n
		if h.kind == 'm' {
			items *= 2
		}
		if items > len(b)-j {
			return 0, false // more items than bytes left
		}
		for range items {
			if j, ok = mpSkip(b, j, depth+1); !ok {
				return 0, false
			}
		}
	}
	return j, true
}
