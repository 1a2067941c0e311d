package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Appends are most of what a client sends in a suspended rollout, and the
// tools' outputs most of an append's bytes. The general decoders read an
// output six times over (the event's head, the event's input, the input's
// items, an item's head, its fields, then its string) and copy it three
// times; for the shape clients send, an append of function_call_output
// items whose output is a string, the scanners below read each level once,
// in place, and copy the output once, into its string. The same item
// scanner reads function calls and their outputs wherever items are
// decoded, a journal's snapshot of a context among them. Whatever they do
// not take whole (a name in another case or spelling, a member they do not
// know, invalid UTF-8, a lone surrogate, an output of parts) goes the
// general way, which decides and words the errors (FuzzScanAppend: what a
// scanner takes, the general path reads the same).

// scanner is a JSON decoder that reads a frame in place: the values it
// returns are slices of the frame.
type scanner struct {
	dec jsontext.Decoder
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// scan returns a scanner over data; put it back with release.
func scan(data []byte) *scanner {
	s := scanners.Get().(*scanner)
	s.dec.Reset(bytes.NewBuffer(data))
	return s
}

func (s *scanner) release() {
	s.dec.Reset(eofReader{}) // let the frame go
	scanners.Put(s)
}

// eofReader is an empty input, for a scanner at rest.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// object reads the members of an object whose every value is read by
// member, which reports false for a name it does not take; ok is false
// for anything but one whole object that member took entirely.
func (s *scanner) object(member func(name string) bool) bool {
	if tok, err := s.dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for s.dec.PeekKind() == '"' {
		name, err := s.dec.ReadToken()
		if err != nil || !member(name.String()) {
			return false
		}
	}
	if tok, err := s.dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	_, err := s.dec.ReadToken()
	return err == io.EOF
}

// str reads a string value.
func (s *scanner) str() (string, bool) {
	if s.dec.PeekKind() != '"' {
		return "", false
	}
	tok, err := s.dec.ReadToken()
	return tok.String(), err == nil
}

// value reads any value and returns its bytes, a slice of the frame.
func (s *scanner) value() (json.RawMessage, bool) {
	v, err := s.dec.ReadValue()
	return json.RawMessage(v), err == nil
}

// scanAppend reads a response.append of type, response_id, stream_id and
// input (an array), each once; input is its raw value, also in head.
func scanAppend(data []byte) (head clientHead, input json.RawMessage, ok bool) {
	s := scan(data)
	defer s.release()
	var typ, lane string
	ok = s.object(func(name string) bool {
		var ok bool
		switch name {
		case "type":
			typ, ok = s.str()
			ok = ok && typ == string(ClientAppend)
		case "response_id":
			head.ResponseID, ok = s.str()
		case "stream_id":
			lane, ok = s.str()
			head.StreamID = &lane
		case "input":
			input, ok = s.value()
			ok = ok && len(input) > 0 && input[0] == '['
		}
		return ok
	})
	if !ok || typ == "" || input == nil {
		return clientHead{}, nil, false
	}
	t := ClientAppend
	head.Type, head.input = &t, input
	return head, input, true
}

// scanPlainAppend reads a response.append (type, response_id, stream_id
// and input, each once) whose input is an array of the function items
// functionItem takes, in one pass over the frame: no token of it is read
// twice, and nothing but the strings is copied. It is DecodeClientEvent's
// path for the append a suspended rollout's client sends at every pause;
// scanAppend's, then the general path's, take what it does not take whole
// (an empty input among them), and word the errors.
func scanPlainAppend(data []byte) (head clientHead, items Items, ok bool) {
	s := deltaScanner{b: data}
	var lane string
	var seen uint8
	ok = s.object(func(key []byte) bool {
		var ok bool
		var bit uint8
		switch string(key) { // compared without a copy
		case "type": // compared in place, not copied
			raw, escaped, rok := s.raw()
			ok, bit = rok && !escaped && string(raw) == string(ClientAppend), 1<<0
		case "response_id":
			head.ResponseID, ok = s.text()
			bit = 1 << 1
		case "stream_id":
			lane, ok = s.text()
			head.StreamID, bit = &lane, 1<<2
		case "input":
			items, ok = s.functionItems()
			bit = 1 << 3
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return ok
	})
	if !ok || seen&(1<<0) == 0 || seen&(1<<3) == 0 {
		return clientHead{}, nil, false
	}
	t := ClientAppend
	head.Type = &t
	return head, items, true
}

// functionItems reads an array of at least one function item
// (functionItem).
func (s *deltaScanner) functionItems() (Items, bool) {
	if !s.byte('[') {
		return nil, false
	}
	var items Items
	for {
		it, ok := s.functionItem()
		if !ok {
			return nil, false
		}
		if items == nil {
			items = make(Items, 0, 1)
		}
		items = append(items, it)
		if !s.byte(',') {
			return items, s.byte(']')
		}
	}
}

// scanHeader reads an event's header (type, sequence_number, stream_id,
// agent) and reads past its other members: their strings to the closing quote,
// objects and arrays to their bracket, nothing in them decoded or checked
// further (a 4 KB response object in a microsecond, where the codec's
// reader takes five). A header member with an escape, or another spelling
// of one (the codec matches names regardless of case), is not read here.
func scanHeader(data []byte) (h EventHeader, ok bool) {
	s := deltaScanner{b: data}
	ok = s.object(func(key []byte) bool {
		var ok bool
		switch string(key) { // compared without a copy
		case "type":
			var t string
			t, ok = s.plain()
			h.Type = EventType(t)
		case "sequence_number":
			ok = s.int(&h.SequenceNumber)
		case "stream_id":
			h.StreamID, ok = s.plain()
		case "agent":
			h.Agent = new(AgentRef)
			ok = s.members(func(key []byte) bool {
				var ok bool
				if string(key) == "agent_name" {
					h.Agent.AgentName, ok = s.plain()
				}
				return ok
			})
		default:
			ok = !headerName(string(key)) && s.skip()
		}
		return ok
	})
	return h, ok
}

func headerName(name string) bool {
	return strings.EqualFold(name, "type") || strings.EqualFold(name, "sequence_number") || strings.EqualFold(name, "stream_id") ||
		strings.EqualFold(name, "agent")
}

// scanItems splits an array into its elements, slices of raw.
func scanItems(raw json.RawMessage) ([]json.RawMessage, bool) {
	s := scan(raw)
	defer s.release()
	if tok, err := s.dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, false
	}
	var elems []json.RawMessage
	for k := s.dec.PeekKind(); k != ']'; k = s.dec.PeekKind() {
		if k == 0 {
			return nil, false
		}
		v, ok := s.value()
		if !ok {
			return nil, false
		}
		elems = append(elems, v)
	}
	if tok, err := s.dec.ReadToken(); err != nil || tok.Kind() != ']' {
		return nil, false
	}
	_, err := s.dec.ReadToken()
	return elems, err == io.EOF
}
