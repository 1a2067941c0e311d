package protocol_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tether-run/tether/internal/schematest"
	"github.com/tether-run/tether/protocol"
)

// errCase is a frame a decoder must refuse, with the code and param the
// client is told.
type errCase struct {
	name  string
	in    string
	code  string
	param string
}

func ptr[T any](v T) *T { return &v }

// checkError asserts the contract every decoder error keeps: a 4xx
// *protocol.Error with a code, a type and a message a user can act on.
func checkError(t testing.TB, perr *protocol.Error) {
	t.Helper()
	if perr.Code == "" {
		t.Errorf("error %#v has no code", perr)
	}
	if perr.Status < 400 || perr.Status > 499 {
		t.Errorf("error %#v: status %d, want 4xx", perr, perr.Status)
	}
	if perr.Message == "" {
		t.Errorf("error %#v has no message", perr)
	}
	if perr.Type == "" {
		t.Errorf("error %#v has no type", perr)
	}
}

// wantError asserts perr is the error a client must see: code and param.
func wantError(t testing.TB, perr *protocol.Error, code, param string) {
	t.Helper()
	if perr == nil {
		t.Fatalf("got no error, want %s (%s)", code, param)
	}
	checkError(t, perr)
	if perr.Code != code || perr.Param != param {
		t.Fatalf("got error %s (param %q): %s\nwant %s (param %q)", perr.Code, perr.Param, perr.Message, code, param)
	}
}

// roundTrip re-marshals a decoded value, decodes the result again and
// asserts that both decodes marshal to the same bytes.
func roundTrip[T any](t testing.TB, first T, decode func([]byte) (T, *protocol.Error)) {
	t.Helper()
	b1, err := json.Marshal(first)
	if err != nil {
		t.Fatalf("re-marshal %#v: %v", first, err)
	}
	second, perr := decode(b1)
	if perr != nil {
		t.Fatalf("re-marshaled value %s does not decode: %v", b1, perr)
	}
	b2, err := json.Marshal(second)
	if err != nil {
		t.Fatalf("re-marshal second decode %#v: %v", second, err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("round trip changed the value:\nfirst:  %s\nsecond: %s", b1, b2)
	}
}

// keys returns the top-level keys of a JSON object in order.
func keys(t testing.TB, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is not a JSON object (%v)", raw, err)
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return out
}

// object decodes raw as a JSON object of raw values.
func object(t testing.TB, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v", raw, err)
	}
	return m
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	return b
}

// fixtureLines returns the event lines (and, separately, the recorded
// request bodies from "# request:" comments) of the real OpenAI recordings
// (schematest.Recordings).
func fixtureLines(tb testing.TB) (events, requests []string) {
	tb.Helper()
	for _, name := range schematest.Recordings() {
		sc := bufio.NewScanner(bytes.NewReader(schematest.Recording(tb, name)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case line == "":
			case strings.HasPrefix(line, "# request:"):
				requests = append(requests, strings.TrimSpace(strings.TrimPrefix(line, "# request:")))
			case strings.HasPrefix(line, "#"):
			default:
				events = append(events, line)
			}
		}
		if err := sc.Err(); err != nil {
			tb.Fatalf("read %s: %v", name, err)
		}
	}
	return events, requests
}
