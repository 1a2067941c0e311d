package protocol_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tether-run/tether/protocol"
)

// wireValues is one value of every server event type, the recorded OpenAI
// events as tether writes them, and client events: what a msgpack
// connection carries.
func wireValues(t *testing.T) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for i, ev := range allEvents() {
		vals[fmt.Sprintf("%s/%d", protocol.Type(ev), i)] = ev
	}
	lines, _ := fixtureLines(t)
	for i, line := range lines {
		ev, perr := protocol.DecodeEvent([]byte(line))
		if perr != nil {
			t.Fatal(perr)
		}
		vals[fmt.Sprintf("recorded/%d", i)] = ev
	}
	create, _, perr := protocol.DecodeClientEvent(append([]byte(`{"type":"response.create",`), createBody50()[1:]...))
	if perr != nil {
		t.Fatal(perr)
	}
	vals["response.create"] = create
	app, _, perr := protocol.DecodeClientEvent([]byte(`{"type":"response.append","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"<ok> & \u2028 done: 3.25e-7 1e21 -0"}]}`))
	if perr != nil {
		t.Fatal(perr)
	}
	vals["response.append"] = app
	return vals
}

// TestMsgpackRoundTrip: every event and client event survives JSON ->
// msgpack -> JSON byte for byte, as msgpack maps all the way down (no JSON
// inside msgpack), and its msgpack is smaller than its JSON.
func TestMsgpackRoundTrip(t *testing.T) {
	t.Parallel()
	for name, v := range wireValues(t) {
		t.Run(name, func(t *testing.T) {
			js := mustMarshal(t, v)
			mp, err := protocol.MarshalAs(protocol.EncodingMsgpack, v)
			if err != nil {
				t.Fatal(err)
			}
			back, err := protocol.ToJSON(protocol.EncodingMsgpack, mp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, js) {
				t.Fatalf("JSON -> msgpack -> JSON\n%s\nwant\n%s", back, js)
			}
			if len(mp) >= len(js) {
				t.Errorf("msgpack %d bytes, JSON %d", len(mp), len(js))
			}
			var tree any
			if err := msgpack.Unmarshal(mp, &tree); err != nil {
				t.Fatal(err)
			}
			checkMaps(t, tree)
		})
	}
}

// checkMaps fails if any value below v is bytes (raw JSON would be) rather
// than a msgpack map, array or scalar. Strings stay strings, JSON text
// among them where the API's field is a string (a call's arguments).
func checkMaps(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			checkMaps(t, x)
		}
	case []any:
		for _, x := range v {
			checkMaps(t, x)
		}
	case []byte:
		t.Fatalf("bytes inside msgpack: %q", v)
	}
}

// TestMsgpackValues: JSON values of every kind transcode to what msgpack
// has for them and back as this package writes JSON.
func TestMsgpackValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":[true,false,null],"c":{}}`, ``},
		{`[-1,0,127,128,-129,65536,9223372036854775807,18446744073709551615,-9223372036854775808]`, ``},
		{`[0.5,1e21,1e-7,-2.75,123456789.125]`, `[0.5,1e+21,1e-7,-2.75,123456789.125]`},
		{`["<a&b>","\u2028\u2029","é😀","\u0000\n\t"]`, `["\u003ca\u0026b\u003e","\u2028\u2029","é😀","\u0000\n\t"]`},
		{`{"dup":1,"dup":2}`, ``},
		{`{"k":[[[[[]]]]],"l":` + `[` + strings.Repeat(`1,`, 70000) + `1]}`, ``},
	} {
		mp, err := protocol.JSONToMsgpack([]byte(tc.in))
		if err != nil {
			t.Fatalf("%.60s: %v", tc.in, err)
		}
		back, err := protocol.MsgpackToJSON(mp)
		if err != nil {
			t.Fatalf("%.60s: %v", tc.in, err)
		}
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if string(back) != want {
			t.Errorf("%.60s: back as %.80s, want %.80s", tc.in, back, want)
		}
	}
}

// TestMsgpackBadInput: msgpack that has no JSON, or lies about its
// lengths, is an error, never a panic or an allocation of what it declares.
func TestMsgpackBadInput(t *testing.T) {
	t.Parallel()
	for name, in := range map[string][]byte{
		"empty":                {},
		"truncated map":        {0x82, 0xa1, 'a', 0x01},
		"a str of 4 GiB":       {0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},
		"a bin of 4 GiB":       {0xc6, 0xff, 0xff, 0xff, 0xff},
		"a map of 4G entries":  {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a', 0x01},
		"an array of 4G items": {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01},
		"an integer key":       {0x81, 0x01, 0x02},
		"NaN":                  {0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1},
		"an ext":               {0xd4, 0x01, 0x00},
		"two values":           {0x01, 0x02},
		"nested too deep":      bytes.Repeat([]byte{0x91}, 20000),
	} {
		if out, err := protocol.MsgpackToJSON(in); err == nil {
			t.Errorf("%s: no error (%q)", name, out)
		}
	}
	if _, err := protocol.JSONToMsgpack([]byte(`{"a":1} {"b":2}`)); err == nil {
		t.Error("two JSON values: no error")
	}
	if _, err := protocol.ParseEncoding("cbor"); err == nil {
		t.Error("encoding cbor: no error")
	}
}

// FuzzMsgpackToJSON: any bytes either fail or give valid JSON that comes
// back the same through msgpack.
func FuzzMsgpackToJSON(f *testing.F) {
	for _, s := range []string{`{"type":"response.output_text.delta","sequence_number":3,"delta":"hi"}`, `[1,-2,0.5,"x",null,true]`, `{}`} {
		mp, _ := protocol.JSONToMsgpack([]byte(s))
		f.Add(mp)
	}
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		js, err := protocol.MsgpackToJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(js) {
			t.Fatalf("invalid JSON %q from %x", js, in)
		}
		mp, err := protocol.JSONToMsgpack(js)
		if err != nil {
			t.Fatalf("%s does not go back to msgpack: %v", js, err)
		}
		again, err := protocol.MsgpackToJSON(mp)
		if err != nil || !bytes.Equal(again, js) {
			t.Fatalf("%s came back as %s (%v)", js, again, err)
		}
	})
}

// BenchmarkEncodings writes and reads three events in each encoding: a
// text delta, a pause's response.done and a 50-item create. B/op and ns/op
// per event; bytes is the frame's size.
func BenchmarkEncodings(b *testing.B) {
	req, perr := protocol.DecodeCreateRequest(createBody50())
	if perr != nil {
		b.Fatal(perr)
	}
	pause := &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone, SequenceNumber: 80},
		Response: &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseRequiresAction, Model: "gpt-5",
			Output: req.Input[len(req.Input)-3:], Tools: req.Tools, Metadata: map[string]string{}}}
	create := &protocol.CreateEvent{Request: req}
	call := req.Input[len(req.Input)-2] // a function_call
	argsDelta := &protocol.FunctionArgsDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventFunctionArgsDelta, SequenceNumber: 1235},
		ItemID: "fc_0f60efc621c9344f006957e6b92914819482372070e73583e2", OutputIndex: 2, Delta: `{"path":`}
	itemDone := &protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone, SequenceNumber: 1236}, OutputIndex: 2, Item: call}
	completed := &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCompleted, SequenceNumber: 2000},
		Response: &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseCompleted, Model: "gpt-5",
			Output: req.Input[1:], Tools: req.Tools, Metadata: map[string]string{}}}
	appendEv := &protocol.AppendEvent{ResponseID: "resp_1", Input: req.Input[len(req.Input)-1:]} // a function_call_output
	errEv := protocol.Invalid(protocol.CodeToolCallNotFound, "input[0].call_id", "No pending tool call with call_id 'call_x' in response 'resp_1'.").WebSocketError("")
	for _, ev := range []struct {
		name string
		v    any
	}{{"text_delta", textDelta()}, {"args_delta", argsDelta}, {"item_done", itemDone}, {"pause", pause}, {"completed50", completed},
		{"error", errEv}, {"create50", create}, {"append", appendEv}} {
		for _, enc := range []protocol.Encoding{protocol.EncodingJSON, protocol.EncodingMsgpack} {
			frame, err := protocol.MarshalAs(enc, ev.v)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(ev.name+"/"+enc.String()+"/encode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := protocol.MarshalAs(enc, ev.v); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(frame)), "bytes")
			})
			b.Run(ev.name+"/"+enc.String()+"/decode", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					js, err := protocol.ToJSON(enc, frame)
					if err != nil {
						b.Fatal(err)
					}
					if _, client := ev.v.(protocol.ClientEvent); client {
						_, _, perr = protocol.DecodeClientEvent(js)
					} else {
						_, perr = protocol.DecodeEvent(js)
					}
					if perr != nil {
						b.Fatal(perr)
					}
				}
			})
		}
	}
}

// TestPeekClientEventMsgpack: a msgpack frame's type and lane are read
// where they lie, whatever comes before them, and a frame that is not a
// msgpack map, or lies about a length, peeks as nothing.
func TestPeekClientEventMsgpack(t *testing.T) {
	t.Parallel()
	frame := func(js string) []byte {
		mp, err := protocol.JSONToMsgpack([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return mp
	}
	big := strings.Repeat("x", 70000)
	for _, tc := range []struct {
		in   []byte
		typ  protocol.ClientEventType
		lane string
		ok   bool
	}{
		{frame(`{"input":[{"role":"user","content":"` + big + `"}],"n":[1,-2,3.5,null,true,{"a":{}}],"stream_id":"l1","type":"response.create"}`), protocol.ClientCreate, "l1", true},
		{frame(`{"type":"response.append","response_id":"resp_1"}`), protocol.ClientAppend, "", true},
		{frame(`{"stream_id":"l2"}`), "", "l2", false},
		{frame(`[1,2]`), "", "", false},
		{[]byte{0x81, 0xa4, 't', 'y', 'p', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff}, "", "", false},
		{[]byte{0x82, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff}, "", "", false},
		{[]byte{0xc1}, "", "", false},
	} {
		typ, lane, ok := protocol.PeekClientEventAs(protocol.EncodingMsgpack, tc.in)
		if ok != tc.ok || ok && (typ != tc.typ || lane != tc.lane) {
			t.Errorf("%.40x: %q %q %v, want %q %q %v", tc.in, typ, lane, ok, tc.typ, tc.lane, tc.ok)
		}
	}
}
