package protocol

import (
	"bytes"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// deltaStrings are texts a token can be: plain, the escapes the fast path
// writes, and every kind it leaves to the codec.
var deltaStrings = []string{"", "hello", " world", "\n", "a\"b\\c", "\t\r\n", "héllo", "日本語", "emoji 🎉",
	"<b>", "a&b", "x > y", "\x00", "\x1f", "\x7f", "line\u2028sep", "para\u2029", "bad \xff utf8", "\xe2\x82", "}{\":,"}

// TestDeltaEncoding: Marshal's bytes for a delta event are the codec's,
// whatever its strings hold.
func TestDeltaEncoding(t *testing.T) {
	t.Parallel()
	for _, s := range deltaStrings {
		for _, stream := range []string{"", "lane-1", s} {
			checkDeltaEncoding(t, s, stream)
		}
	}
}

func FuzzDeltaEncoding(f *testing.F) {
	for _, s := range deltaStrings {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, delta, stream string) { checkDeltaEncoding(t, delta, stream) })
}

func checkDeltaEncoding(t *testing.T, s, stream string) {
	t.Helper()
	h := EventHeader{Type: EventOutputTextDelta, SequenceNumber: 42, StreamID: stream}
	for _, ev := range []Event{
		&TextDeltaEvent{EventHeader: h, ItemID: "msg_" + s, OutputIndex: 3, Delta: s, Logprobs: &[]LogProb{}},
		&TextDeltaEvent{EventHeader: h, ItemID: "msg_1", OutputIndex: 0, ContentIndex: 1, Delta: s},
		&FunctionArgsDeltaEvent{EventHeader: EventHeader{Type: EventFunctionArgsDelta, SequenceNumber: 7, StreamID: stream}, ItemID: "fc_1", OutputIndex: 2, Delta: s},
		&TextDeltaEvent{EventHeader: EventHeader{Type: EventOutputTextDelta, StreamID: stream, Agent: &AgentRef{AgentName: "/root/" + s}}, ItemID: "msg_2", Delta: s},
	} {
		got, err := Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonv2.Marshal(ev, v1Options)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T with %q:\n got %s\nwant %s", ev, s, got, want)
		}
		// Appended after bytes already there, by the fast path or the
		// codec's, with nothing of a failed fast path left behind.
		prefix := []byte("frame: ")
		got, err = AppendMarshal(append(make([]byte, 0, 4), prefix...), ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(prefix, want...)) {
			t.Errorf("AppendMarshal %T with %q:\n got %s\nwant %s%s", ev, s, got, prefix, want)
		}
	}
}

// BenchmarkMarshalDelta: a text delta, written by the fast path and by
// the codec's reflection.
func BenchmarkMarshalDelta(b *testing.B) {
	ev := &TextDeltaEvent{EventHeader: EventHeader{Type: EventOutputTextDelta, SequenceNumber: 1234},
		ItemID: "msg_0123456789abcdef", OutputIndex: 1, Delta: " token", Logprobs: &[]LogProb{}}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Marshal(ev)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendMarshal(buf[:0], ev)
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonv2.Marshal(ev, v1Options)
		}
	})
}

// TestDeltaDecoding: every delta the server writes is read by the
// scanner, as the codec reads it; what the scanner leaves is read by the
// codec, the same way with or without it.
func TestDeltaDecoding(t *testing.T) {
	t.Parallel()
	for _, s := range deltaStrings {
		for _, ev := range []Event{
			&TextDeltaEvent{EventHeader: EventHeader{Type: EventOutputTextDelta, SequenceNumber: 9, StreamID: "a"}, ItemID: "msg_1", OutputIndex: 2, ContentIndex: 1, Delta: s, Logprobs: &[]LogProb{}},
			&FunctionArgsDeltaEvent{EventHeader: EventHeader{Type: EventFunctionArgsDelta, SequenceNumber: 10}, ItemID: "fc_1", OutputIndex: 3, Delta: s},
		} {
			b, err := Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			checkDeltaDecoding(t, b)
			if _, ok := decodeDelta(b); !ok && plainDelta(s) {
				t.Errorf("the scanner left %s to the codec", b)
			}
		}
	}
	for _, frame := range []string{
		`{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"x","logprobs":[],"obfuscation":"ab"}`,
		` {"type":"response.output_text.delta" , "delta" : "a\/b\b\f" }`,
		`{"type":"response.output_text.delta","delta":"x",}`,
		`{"type":"response.output_text.delta","delta":"x"}x`,
		`{"type":"response.output_text.delta","Delta":"x"}`,
		`{"type":"response.output_text.delta","delta":"\u0041"}`,
		`{"type":"response.output_text.delta","delta":null}`,
		`{"type":"response.output_text.delta","sequence_number":1.5}`,
		`{"type":"response.output_text.delta","sequence_number":01}`,
		`{"type":"response.output_text.delta","sequence_number":-0}`,
		`{"type":"response.output_text.delta","sequence_number":99999999999999999999}`,
		`{"type":"response.output_text.delta","type":"response.function_call_arguments.delta"}`,
		`{"type":"response.output_text.delta","logprobs":[{"token":"x"}]}`,
		`{"type":"response.function_call_arguments.delta","content_index":1}`,
		`{"type":"response.output_text.delta"`,
		`{"type":"response.output_text.delta","delta":"a` + "\x01" + `"}`,
	} {
		checkDeltaDecoding(t, []byte(frame))
	}
}

// plainDelta reports whether the scanner must take a delta of s.
func plainDelta(s string) bool {
	b, ok := appendPlain(nil, s, true)
	return ok && !bytes.Contains(b, []byte(`\u`))
}

func FuzzDeltaDecoding(f *testing.F) {
	f.Add([]byte(`{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"x","logprobs":[]}`))
	f.Add([]byte(`{"type":"response.function_call_arguments.delta","sequence_number":1,"stream_id":"s","item_id":"fc","output_index":0,"delta":"{\"a\\n\":1}"}`))
	f.Add([]byte(`{"type":"response.output_text.delta","sequence_number":2,"agent":{"agent_name":"/root/a"},"item_id":"m","output_index":1,"content_index":0,"delta":"y"}`))
	f.Fuzz(func(t *testing.T, frame []byte) { checkDeltaDecoding(t, frame) })
}

// checkDeltaDecoding: what the scanner takes, the codec reads the same.
func checkDeltaDecoding(t *testing.T, frame []byte) {
	t.Helper()
	fast, ok := decodeDelta(frame)
	if !ok {
		return
	}
	slow, perr := decodeEventAs(Type(fast), frame, readLean)
	if perr != nil {
		t.Fatalf("the scanner read %q, the codec refused it: %v", frame, perr)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: the scanner read %#v, the codec %#v", frame, fast, slow)
	}
}
