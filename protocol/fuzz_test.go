package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tether-run/tether/protocol"
)

// The fuzzers check the properties every decoder keeps: it never panics; a
// refusal is a 4xx *protocol.Error a client can act on; and what it accepts
// survives a round trip through encoding/json (re-marshal, decode again,
// re-marshal: the same bytes).

// trickySeeds are inputs that stress encoding/json's corners rather than
// tether's vocabulary: case-insensitive and duplicate keys, escapes, invalid
// UTF-8, HTML characters, extreme numbers. Every fuzzer gets them.
var trickySeeds = []string{
	`{"type":"response.create","Model":"m","MODEL":"n","input":"\u003c\ud800\"\u0000"}`,
	`{"type":"response.cancel","Type":"response.resume","response_id":"r","RESPONSE_ID":"s"}`,
	`{"role":"user","content":"a","Content":[{"type":"input_text","text":"b"}]}`,
	`{"type":"function_call_output","call_id":"c","output":"x","OUTPUT":[]}`,
	`{"type":"message","role":"assistant","content":"\xff\ufffd<&>\u2028"}`,
	"{\"type\":\"input_text\",\"text\":\"\xff\xfe\"}",
	`{"model":"m","tools":[{"type":"web_search","q":"<&>","n":1E+2},{"type":"function","name":"f","parameters":{"a":[1.0,-0,1e-400]}}]}`,
	`{"model":"m","text":{"format":{"type":"json_schema","name":"n","schema":{"a":12345678901234567890,"b":-0,"c":1e-400}}}}`,
	`{"model":"m","tool_choice":{"type":"allowed_tools","mode":"","tools":[{"name":"a"}]}}`,
	`{"model":"m","tools":[null],"tool_choice":""}`,
	`{"type":"response.completed","sequence_number":1,"response":{"output":null,"tools":null,"metadata":null,"tool_choice":"auto"}}`,
	`{"type":"output_text","text":"x","logprobs":[{"token":"x","logprob":-1e308,"bytes":null,"top_logprobs":null}]}`,
	`{"type":"reasoning","summary":"s","content":"c"}`,
	` {"type" : "item_reference" , "id" : "x" } `,
}

func addTricky(f *testing.F) {
	for _, s := range trickySeeds {
		f.Add([]byte(s))
	}
}

func FuzzDecodeClientEvent(f *testing.F) {
	addTricky(f)
	for _, c := range clientEventCases {
		f.Add([]byte(c.in))
	}
	for _, c := range clientEventErrCases {
		f.Add([]byte(c.in))
	}
	_, requests := fixtureLines(f)
	for _, r := range requests {
		f.Add([]byte(`{"type":"response.create",` + strings.TrimPrefix(r, "{")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame := bytes.Clone(data) // the read loop's buffer, read into again once decoded
		ev, lane, perr := protocol.DecodeClientEvent(frame)
		if perr != nil {
			if ev != nil {
				t.Fatalf("event %#v returned with error %v", ev, perr)
			}
			checkError(t, perr)
			if lane != "" && protocol.ValidateStreamID(lane) != nil {
				t.Fatalf("error reported on invalid lane %q", lane)
			}
			return
		}
		if ev == nil {
			t.Fatal("nil event without an error")
		}
		if _, processed := ev.(*protocol.ProcessedEvent); !processed && ev.Lane() != lane {
			t.Fatalf("Lane() = %q, DecodeClientEvent said %q", ev.Lane(), lane)
		}
		if lane != "" && protocol.ValidateStreamID(lane) != nil {
			t.Fatalf("accepted invalid lane %q", lane)
		}
		before, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("marshal %#v: %v", ev, err)
		}
		for i := range frame {
			frame[i] = 'x'
		}
		if after, _ := json.Marshal(ev); !bytes.Equal(after, before) {
			t.Fatalf("the event keeps a reference into its frame: %s, then %s", before, after)
		}
		roundTrip(t, ev, decodeClientEvent)
	})
}

func FuzzDecodeCreateRequest(f *testing.F) {
	addTricky(f)
	for _, c := range createCases {
		f.Add([]byte(c.in))
	}
	for _, c := range createErrCases {
		f.Add([]byte(c.in))
	}
	for _, c := range validateCases {
		f.Add([]byte(c.in))
	}
	_, requests := fixtureLines(f)
	for _, r := range requests {
		f.Add([]byte(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, perr := protocol.DecodeCreateRequest(data)
		if perr != nil {
			if r != nil {
				t.Fatalf("request %#v returned with error %v", r, perr)
			}
			checkError(t, perr)
			return
		}
		// Validation must not panic on anything the decoder accepts, and
		// refuses with the same kind of error.
		if verr := r.Validate(); verr != nil {
			checkError(t, verr)
		}
		if verr := protocol.ValidateItems(r.Input, "input"); verr != nil {
			checkError(t, verr)
			if !strings.HasPrefix(verr.Param, "input[") {
				t.Fatalf("ValidateItems error param %q does not name an input item", verr.Param)
			}
		}
		roundTrip(t, r, protocol.DecodeCreateRequest)
		// What the server would echo of it, every client can read: the
		// request written back is JSON a strict decoder takes (valid
		// UTF-8, no name twice) with numbers encoding/json reads.
		b, err := protocol.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !jsontext.Value(b).IsValid() {
			t.Fatalf("%q re-encodes as %q: not strict JSON", data, b)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%q re-encodes as %q, which encoding/json refuses: %v", data, b, err)
		}
	})
}

func FuzzDecodeItem(f *testing.F) {
	addTricky(f)
	for _, c := range itemCases {
		f.Add([]byte(c.in))
	}
	for _, c := range itemErrCases {
		f.Add([]byte(c.in))
	}
	for _, c := range programItems {
		f.Add([]byte(c.in))
	}
	for _, raw := range typedItems {
		f.Add([]byte(raw))
	}
	for _, c := range validateItemsCases {
		var elems []json.RawMessage
		if json.Unmarshal([]byte(c.in), &elems) == nil {
			for _, e := range elems {
				f.Add([]byte(e))
			}
		}
	}
	decode := func(b []byte) (protocol.Item, *protocol.Error) { return protocol.DecodeItem(b, "input[7]") }
	f.Fuzz(func(t *testing.T, data []byte) {
		it, perr := decode(data)
		if perr != nil {
			if it != nil {
				t.Fatalf("item %#v returned with error %v", it, perr)
			}
			checkError(t, perr)
			if !strings.HasPrefix(perr.Param, "input[7]") {
				t.Fatalf("error param %q is not under input[7]", perr.Param)
			}
			return
		}
		if it == nil {
			t.Fatal("nil item without an error")
		}
		if verr := protocol.ValidateItems(protocol.Items{it}, "input"); verr != nil {
			checkError(t, verr)
		}
		roundTrip(t, it, decode)
	})
}

func FuzzDecodeEvent(f *testing.F) {
	addTricky(f)
	for _, c := range eventCases {
		f.Add([]byte(c.in))
	}
	for _, c := range eventErrCases {
		f.Add([]byte(c.in))
	}
	events, _ := fixtureLines(f)
	for _, line := range events {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, perr := protocol.DecodeEvent(data)
		// The lean decode is the full one without a response's tools
		// (which alone may fail the full one).
		lean, leanErr := protocol.DecodeEventLean(data)
		if leanErr != nil && perr == nil {
			t.Fatalf("the lean decode failed (%v) where the full one did not", leanErr)
		}
		if perr != nil {
			if ev != nil {
				t.Fatalf("event %#v returned with error %v", ev, perr)
			}
			checkError(t, perr)
			return
		}
		if re, ok := ev.(*protocol.ResponseEvent); ok && re.Response != nil {
			r := *re.Response
			r.Tools = nil
			if lr, ok := lean.(*protocol.ResponseEvent); !ok || !reflect.DeepEqual(lr.Response, &r) || lr.EventHeader != re.EventHeader {
				t.Fatalf("lean %s, full without tools %s", mustMarshal(t, lean), mustMarshal(t, &r))
			}
		} else if !reflect.DeepEqual(lean, ev) {
			t.Fatalf("lean %#v, full %#v", lean, ev)
		}
		if ev == nil {
			t.Fatal("nil event without an error")
		}
		b := mustMarshal(t, ev)
		if !strings.HasPrefix(string(b), `{"type":`) {
			t.Fatalf("re-marshaled event does not start with its type: %s", b)
		}
		roundTrip(t, ev, protocol.DecodeEvent)
	})
}

func FuzzDecodeContent(f *testing.F) {
	addTricky(f)
	for _, c := range contentCases {
		f.Add([]byte(c.in))
	}
	for _, c := range contentErrCases {
		f.Add([]byte(c.in))
	}
	decode := func(b []byte) (protocol.Content, *protocol.Error) { return protocol.DecodeContent(b, "content[0]") }
	f.Fuzz(func(t *testing.T, data []byte) {
		c, perr := decode(data)
		if perr != nil {
			if c != nil {
				t.Fatalf("part %#v returned with error %v", c, perr)
			}
			checkError(t, perr)
			if !strings.HasPrefix(perr.Param, "content[0]") {
				t.Fatalf("error param %q is not under content[0]", perr.Param)
			}
			return
		}
		if c == nil {
			t.Fatal("nil part without an error")
		}
		roundTrip(t, c, decode)
	})
}
