package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// msgpack is the second encoding of the very same objects, not a second
// codec: a value is written as JSON by its one encoder (Marshal) and the
// JSON is transcoded, token by token, to msgpack; msgpack read is
// transcoded back to JSON for the one decoder. So no type has a second
// encoder to drift from its first, nested objects are msgpack maps (never
// JSON bytes inside msgpack), keys keep their order, and every event
// survives JSON -> msgpack -> JSON byte for byte. The price is the JSON
// work on top of the msgpack work, on both sides of this process; a peer
// in another language reads and writes plain msgpack.

// Encoding is how a connection's frames are written.
type Encoding int

const (
	EncodingJSON    Encoding = iota // JSON text frames (the default)
	EncodingMsgpack                 // msgpack binary frames of the same objects
)

func (e Encoding) String() string {
	if e == EncodingMsgpack {
		return "msgpack"
	}
	return "json"
}

// ParseEncoding reads an encoding's name: "json" or "msgpack".
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "json":
		return EncodingJSON, nil
	case "msgpack":
		return EncodingMsgpack, nil
	}
	return 0, fmt.Errorf("protocol: encoding %q: want json or msgpack", s)
}

// MarshalAs is v in encoding e.
func MarshalAs(e Encoding, v any) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil || e == EncodingJSON {
		return b, err
	}
	return JSONToMsgpack(b)
}

// ToJSON is a frame of encoding e as JSON, for the package's decoders: a
// JSON frame as it is, a msgpack one transcoded.
func ToJSON(e Encoding, frame []byte) ([]byte, error) {
	if e == EncodingJSON {
		return frame, nil
	}
	return MsgpackToJSON(frame)
}

// maxDepth bounds the nesting of a transcoded value, as the JSON decoder
// bounds its own: a hostile frame of nested arrays must not exhaust the
// stack.
const maxDepth = 10000

// JSONToMsgpack transcodes one JSON value to msgpack: objects become maps
// (their keys in order), arrays arrays, strings str, numbers written
// without a fraction or exponent that fit 64 bits integers, other numbers
// float64, and true, false and null themselves.
func JSONToMsgpack(data []byte) ([]byte, error) {
	t := toMsgpackPool.Get().(*toMsgpack)
	defer putTranscoder(&toMsgpackPool, t, len(data))
	t.in.Reset(data)
	t.dec.Reset(&t.in, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	t.out = make([]byte, 0, len(data))
	if err := t.value(0); err != nil {
		return nil, fmt.Errorf("protocol: JSON to msgpack: %w", err)
	}
	if _, err := t.dec.ReadToken(); err != io.EOF {
		return nil, errors.New("protocol: JSON to msgpack: more than one value")
	}
	out := t.out
	t.out = nil
	return out, nil
}

// toMsgpackPool keeps transcoders, each a decoder and an encoder with their
// buffers, between frames.
var toMsgpackPool = sync.Pool{New: func() any {
	t := &toMsgpack{}
	t.dec = jsontext.NewDecoder(&t.in)
	t.enc = msgpack.NewEncoder((*appendWriter)(&t.out))
	t.enc.UseCompactInts(true)
	return t
}}

// appendWriter appends what is written to a byte slice.
type appendWriter []byte

func (w *appendWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

type toMsgpack struct {
	in      bytes.Reader
	dec     *jsontext.Decoder
	enc     *msgpack.Encoder // writes numbers to out
	out     []byte
	scratch []byte // a string's unquoted bytes
}

func (t *toMsgpack) value(depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deep")
	}
	switch t.dec.PeekKind() {
	case '"':
		raw, err := t.dec.ReadValue()
		if err != nil {
			return err
		}
		if t.scratch, err = jsontext.AppendUnquote(t.scratch[:0], raw); err != nil {
			return err
		}
		t.str(t.scratch)
		return nil
	case '0':
		raw, err := t.dec.ReadValue()
		if err != nil {
			return err
		}
		return t.number(string(raw))
	}
	tok, err := t.dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
		t.out = append(t.out, msgpcode.Nil)
		return nil
	case 'f':
		t.out = append(t.out, msgpcode.False)
		return nil
	case 't':
		t.out = append(t.out, msgpcode.True)
		return nil
	case '{', '[':
		// A container's length comes first in msgpack: its items are
		// written after room for the longest header, which then shrinks
		// to the one its count needs.
		at := len(t.out)
		t.out = append(t.out, 0, 0, 0, 0, 0)
		n := 0
		end := jsontext.Kind('}')
		if tok.Kind() == '[' {
			end = ']'
		}
		for t.dec.PeekKind() != end {
			if tok.Kind() == '{' { // the name
				if err := t.value(depth + 1); err != nil {
					return err
				}
			}
			if err := t.value(depth + 1); err != nil {
				return err
			}
			n++
		}
		if _, err := t.dec.ReadToken(); err != nil {
			return err
		}
		return t.header(at, tok.Kind() == '{', n)
	}
	return fmt.Errorf("unexpected %v", tok)
}

// str writes a msgpack str of b.
func (t *toMsgpack) str(b []byte) {
	switch n := len(b); {
	case n < 32:
		t.out = append(t.out, msgpcode.FixedStrLow|byte(n))
	case n <= math.MaxUint8:
		t.out = append(t.out, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		t.out = append(t.out, msgpcode.Str16, byte(n>>8), byte(n))
	default:
		t.out = append(t.out, msgpcode.Str32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	t.out = append(t.out, b...)
}

// number writes a JSON number: an integer as one, anything else as float64.
func (t *toMsgpack) number(s string) error {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return t.enc.EncodeInt(i)
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return t.enc.EncodeUint(u)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return err
	}
	return t.enc.EncodeFloat64(f)
}

// header writes the map or array header of n items at at, where five
// bytes were kept, and closes the gap.
func (t *toMsgpack) header(at int, isMap bool, n int) error {
	var h []byte
	switch {
	case n < 16 && isMap:
		h = []byte{msgpcode.FixedMapLow | byte(n)}
	case n < 16:
		h = []byte{msgpcode.FixedArrayLow | byte(n)}
	case n <= math.MaxUint16 && isMap:
		h = []byte{msgpcode.Map16, byte(n >> 8), byte(n)}
	case n <= math.MaxUint16:
		h = []byte{msgpcode.Array16, byte(n >> 8), byte(n)}
	case n > math.MaxUint32:
		return errors.New("too many items")
	case isMap:
		h = []byte{msgpcode.Map32, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	default:
		h = []byte{msgpcode.Array32, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	copy(t.out[at:], h)
	if gap := 5 - len(h); gap > 0 {
		t.out = append(t.out[:at+len(h)], t.out[at+5:]...)
	}
	return nil
}

// MsgpackToJSON transcodes one msgpack value to JSON, written as this
// package writes JSON (encoding/json's escaping, the same number format):
// maps with string keys become objects, arrays arrays, str and bin strings,
// integers and floats numbers (a non-finite float is an error, as in JSON).
// Declared lengths cost nothing until their bytes arrive: a frame cannot
// make it allocate more than its own size allows.
func MsgpackToJSON(data []byte) ([]byte, error) {
	t := toJSONPool.Get().(*toJSON)
	defer putTranscoder(&toJSONPool, t, len(data))
	t.in.Reset(data)
	t.dec.Reset(&t.in)
	t.out.Reset()
	t.out.Grow(len(data) + len(data)/8 + 64) // strings, most of a frame, grow only by their quotes
	t.enc.Reset(&t.out, jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	if err := t.value(0, len(data)); err != nil {
		return nil, fmt.Errorf("protocol: msgpack to JSON: %w", err)
	}
	if _, err := t.dec.PeekCode(); err != io.EOF {
		return nil, errors.New("protocol: msgpack to JSON: more than one value")
	}
	js := bytes.TrimSuffix(t.out.Bytes(), []byte("\n"))
	if t.out.Cap() > 64<<10 {
		t.out = bytes.Buffer{} // a large frame's buffer is handed over, not kept in the pool at its size
		return js, nil
	}
	return bytes.Clone(js), nil
}

// maxPooledFrame is the largest frame whose transcoder goes back to its
// pool: the decoder's and encoder's own buffers grow to a frame's largest
// token (a 12 MB string), and a pooled transcoder would keep that alive.
const maxPooledFrame = 64 << 10

// putTranscoder returns t to pool unless it transcoded a frame of n bytes
// larger than maxPooledFrame; such a transcoder is dropped with its buffers.
func putTranscoder(pool *sync.Pool, t any, n int) {
	if n <= maxPooledFrame {
		pool.Put(t)
	}
}

// toJSONPool keeps transcoders between frames.
var toJSONPool = sync.Pool{New: func() any {
	t := &toJSON{}
	t.dec = msgpack.NewDecoder(&t.in)
	t.enc = jsontext.NewEncoder(&t.out)
	return t
}}

type toJSON struct {
	in  bytes.Reader
	dec *msgpack.Decoder
	out bytes.Buffer
	enc *jsontext.Encoder
}

// value transcodes one value; left is the input's size, a bound on any
// count it declares (every item takes a byte at least).
func (t *toJSON) value(depth, left int) error {
	if depth > maxDepth {
		return errors.New("nested too deep")
	}
	c, err := t.dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		t.dec.DecodeNil()
		return t.enc.WriteToken(jsontext.Null)
	case c == msgpcode.True || c == msgpcode.False:
		b, _ := t.dec.DecodeBool()
		return t.enc.WriteToken(jsontext.Bool(b))
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64:
		i, err := t.dec.DecodeInt64()
		if err != nil {
			return err
		}
		return t.enc.WriteToken(jsontext.Int(i))
	case c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32 || c == msgpcode.Uint64:
		u, err := t.dec.DecodeUint64()
		if err != nil {
			return err
		}
		return t.enc.WriteToken(jsontext.Uint(u))
	case c == msgpcode.Float || c == msgpcode.Double:
		f, err := t.dec.DecodeFloat64()
		if err != nil {
			return err
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return errors.New("a non-finite number has no JSON")
		}
		return t.enc.WriteToken(jsontext.Float(f))
	case msgpcode.IsString(c) || msgpcode.IsBin(c):
		s, err := t.dec.DecodeString()
		if err != nil {
			return err
		}
		return t.enc.WriteToken(jsontext.String(s))
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32,
		msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		isMap := msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
		decodeLen, begin, end := t.dec.DecodeArrayLen, jsontext.BeginArray, jsontext.EndArray
		if isMap {
			decodeLen, begin, end = t.dec.DecodeMapLen, jsontext.BeginObject, jsontext.EndObject
		}
		n, err := decodeLen()
		if err != nil {
			return err
		}
		if n > left {
			return fmt.Errorf("%d items declared in %d bytes", n, left)
		}
		if err := t.enc.WriteToken(begin); err != nil {
			return err
		}
		for range n {
			if isMap {
				if k, err := t.dec.PeekCode(); err != nil || !msgpcode.IsString(k) && !msgpcode.IsBin(k) {
					return errors.New("a map key that is not a string")
				}
				if err := t.value(depth+1, left); err != nil {
					return err
				}
			}
			if err := t.value(depth+1, left); err != nil {
				return err
			}
		}
		return t.enc.WriteToken(end)
	}
	return fmt.Errorf("msgpack code 0x%02x has no JSON", c)
}
