package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var scanSeeds = []string{
	`{"type":"response.append","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"package main\n\nfunc main() {}\n"}]}`,
	`{"type":"response.append","response_id":"resp_1","stream_id":"work","input":[{"type":"function_call_output","call_id":"c","output":"a \u00e9 \"q\" \\ \t"},{"type":"function_call_output","id":"fco_1","call_id":"d","output":""}]}`,
	` { "type" : "response.append" , "input" : [ ] , "response_id" : "r" } `,
	`{"type":"response.append","response_id":"r","input":[{"type":"message","role":"user","content":"steer"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`,
	`{"type":"response.append","response_id":"r","response_id":"s","input":[]}`,
	`{"Type":"response.append","response_id":"r","input":[]}`,
	`{"type":"response.append","response_id":"r","input":"text"}`,
	`{"type":"response.append","response_id":"r","input":[]}x`,
	`{"type":"response.append","response_id":"r","stream_id":"bad lane!","input":[]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","call_id":"d","output":"x"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"\xff"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":null,"output":"x"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"x","status":"completed"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call","call_id":"c","name":"read_file","arguments":"{\"path\":\"a.go\"}","status":"completed","id":"fc_1"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call","call_id":"c","namespace":"fs","name":"read"},{"type":"function_call_output","call_id":"c","namespace":"fs","output":"x"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","output":"x"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","name":"f","output":"x"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call","arguments":{}}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call"}]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","caller":{"type":"program","caller_id":"call_p"}},{"type":"function_call_output","call_id":"c","output":"x","caller":{"type":"program","caller_id":"call_p"}}]}`,
	`{"type":"response.create","model":"m","input":[]}`,
	`{"type":"response.append","response_id":"r","input":[1,{"type":"function_call_output","call_id":"c","output":"x"}]}`,
	`[]`,
	``,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"x"}],"input":[]}`,
	`{"type":"response.append","response_id":"","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
	`{"type":"response.append","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
	`{"type":"response.append","response_id":"r","stream_id":"bad lane!","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
	`{"type":"response.append","response_id":"r\u00e9","stream_id":"w\t","input":[{"type":"function_call_output","call_id":"c","output":"x"},]}`,
	`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"x","output":"y"}]}`,
	`{"type":"response.inject","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`,
}

// FuzzScanAppend: whatever a scanner takes whole, the general path reads
// the same: the append's head and input, an array's elements, a
// function_call_output.
func FuzzScanAppend(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScanners(t, data) })
}

func TestScanners(t *testing.T) {
	t.Parallel()
	for i, s := range scanSeeds {
		took := checkScanners(t, []byte(s))
		// The shapes clients send are the scanners': the first two seeds,
		// each output of them.
		if want := []int{1, 2}; i < len(want) && took != want[i] {
			t.Errorf("seed %d: the scanners took %d outputs whole, want %d", i, took, want[i])
		}
	}
}

// checkScanners checks the scanners on data against the general path and
// returns how many function items they took whole (-1: not the append).
func checkScanners(t *testing.T, data []byte) (took int) {
	t.Helper()
	checkPlainAppend(t, data)
	head, input, ok := scanAppend(data)
	if !ok {
		return -1
	}
	var want clientHead
	if err := unmarshal(data, &want); err != nil {
		t.Fatalf("scanned %q, which the codec refuses: %v", data, err)
	}
	var in struct {
		Input json.RawMessage `json:"input"`
	}
	if err := unmarshal(data, &in); err != nil {
		t.Fatalf("scanned %q, whose input the codec refuses: %v", data, err)
	}
	head.input = nil
	if !reflect.DeepEqual(head, want) || !bytes.Equal(input, in.Input) {
		t.Fatalf("%q: scanned %+v %s, the codec %+v %s", data, head, input, want, in.Input)
	}
	elems, ok := scanItems(input)
	if !ok {
		return 0
	}
	var wantElems []json.RawMessage
	if err := unmarshal(input, &wantElems); err != nil || len(elems) != len(wantElems) {
		t.Fatalf("%s: scanned %d items, the codec %d (%v)", input, len(elems), len(wantElems), err)
	}
	for i, e := range elems {
		if !bytes.Equal(e, wantElems[i]) {
			t.Fatalf("item %d: scanned %s, the codec %s", i, e, wantElems[i])
		}
		out, ok := scanFunctionItem(e)
		if !ok {
			continue
		}
		it, perr := decodeItem(e, "input[0]")
		if perr != nil {
			t.Fatalf("scanned %s, which the general path refuses: %v", e, perr)
		}
		if !reflect.DeepEqual(out, it) {
			t.Fatalf("%s: scanned %+v, the general path %+v", e, out, it)
		}
		took++
	}
	return took
}

// FuzzScanHeader: of a frame the codec reads, a header the scanner reads
// is the codec's.
func FuzzScanHeader(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.in_progress","sequence_number":3,"response":{"id":"r","output":[]}}`,
		`{"type":"response.output_text.done","sequence_number":5,"stream_id":"lane-2","text":"x\u00e9"}`,
		` { "sequence_number" : -0 , "type" : "" } `,
		`{"type":"e","sequence_number":1e2}`,
		`{"type":"e","sequence_number":99999999999999999999}`,
		`{"type":"e","type":"f"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, ok := scanHeader(data)
		var want EventHeader
		if !ok || unmarshal(data, &want) != nil {
			return // what the scanner skips it does not check
		}
		if h != want {
			t.Fatalf("%q: scanned %+v, the codec %+v", data, h, want)
		}
	})
}

// checkPlainAppend: an append scanPlainAppend takes whole, the codec reads
// the same, item for item by the general item decoder; and
// DecodeClientEvent, fast path or not, decodes data as the path without
// it does (decodeClientEvent: the same event, or the same refusal).
func checkPlainAppend(t *testing.T, data []byte) {
	t.Helper()
	ev, lane, perr := DecodeClientEvent(data)
	wantEv, wantLane, wantErr := decodeClientEvent(data)
	if !reflect.DeepEqual(ev, wantEv) || lane != wantLane || !reflect.DeepEqual(perr, wantErr) {
		t.Fatalf("%q: decoded %#v %q %v; without the fast path %#v %q %v", data, ev, lane, perr, wantEv, wantLane, wantErr)
	}
	head, items, ok := scanPlainAppend(data)
	if !ok {
		return
	}
	var want clientHead
	var in struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := unmarshal(data, &want); err != nil {
		t.Fatalf("scanned %q, which the codec refuses: %v", data, err)
	}
	if err := unmarshal(data, &in); err != nil || len(in.Input) != len(items) {
		t.Fatalf("%q: scanned %d items, the codec %d (%v)", data, len(items), len(in.Input), err)
	}
	if !reflect.DeepEqual(head, want) {
		t.Fatalf("%q: scanned %+v, the codec %+v", data, head, want)
	}
	for i, raw := range in.Input {
		it, perr := decodeItem(raw, "input[0]")
		if perr != nil {
			t.Fatalf("scanned %s, which the general path refuses: %v", raw, perr)
		}
		if !reflect.DeepEqual(items[i], it) {
			t.Fatalf("%s: scanned %+v, the general path %+v", raw, items[i], it)
		}
	}
}

// TestPlainAppendTaken: the appends clients send take the fast path.
func TestPlainAppendTaken(t *testing.T) {
	t.Parallel()
	for _, s := range scanSeeds[:2] {
		if _, _, ok := scanPlainAppend([]byte(s)); !ok {
			t.Errorf("%s: not taken by scanPlainAppend", s)
		}
	}
}
