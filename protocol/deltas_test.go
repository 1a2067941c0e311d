package protocol

import (
	"bytes"
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
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonv2.Marshal(ev, v1Options)
		}
	})
}
