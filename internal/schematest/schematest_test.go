package schematest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// event is one non-comment line of a recorded fixture.
type event struct {
	file string
	line int
	raw  []byte
}

// recordings returns every event line of every recorded stream, grouped by
// file name. It fails the test if a recording has none.
func recordings(t *testing.T) map[string][]event {
	t.Helper()
	out := map[string][]event{}
	for _, name := range Recordings() {
		sc := bufio.NewScanner(bytes.NewReader(Recording(t, name)))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] == '#' {
				continue
			}
			out[name] = append(out[name], event{file: name, line: n, raw: bytes.Clone(line)})
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out[name]) == 0 {
			t.Fatalf("%s: no events", name)
		}
	}
	return out
}

func typeOf(t *testing.T, raw []byte) string {
	t.Helper()
	var e struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e.Type
}

func isTerminal(typ string) bool {
	switch typ {
	case "response.completed", "response.failed", "response.incomplete":
		return true
	}
	return false
}

// firstOfType returns the first recorded event with the given type from a
// recording without known deviations, in file-name order.
func firstOfType(t *testing.T, typ string) []byte {
	t.Helper()
	recs := recordings(t)
	names := make([]string, 0, len(recs))
	for name := range recs {
		if knownDeviations[name] == nil { // bases must conform unpatched
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		for _, e := range recs[name] {
			if typeOf(t, e.raw) == typ {
				return e.raw
			}
		}
	}
	t.Fatalf("no recorded %q event", typ)
	return nil
}

// mutate decodes raw, applies f and re-encodes. json.Number keeps numbers
// byte-identical.
func mutate(t *testing.T, raw []byte, f func(m map[string]any)) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// responseOf extracts the "response" member of a lifecycle event.
func responseOf(t *testing.T, raw []byte) []byte {
	t.Helper()
	var e struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Response) == 0 {
		t.Fatalf("event has no response: %.200s", raw)
	}
	return e.Response
}

// knownDeviations lists recordings that legitimately predate the 2026-04-24
// schema. For each listed file, every event whose "response" object lacks
// exactly these ResponseResource-required fields must fail validation naming
// them, and must pass once they are filled in (proving nothing else is wrong).
// The validator itself is not loosened.
var knownDeviations = map[string][]string{
	// Recorded 2026-01-02 (created_at 1767368377), before OpenAI added
	// presence_penalty/frequency_penalty to the Response object; the
	// 2026-01-20 recordings carry both. ResponseResource requires them.
	"openai-recorded-text-stream.jsonl": {"presence_penalty", "frequency_penalty"},
}

// patchMissing checks the known deviation of one event (or bare response,
// when inResponse is false) and returns the patched document. It reports
// whether the deviation was present.
func patchMissing(t *testing.T, raw []byte, fields []string, inResponse bool, check func([]byte) error) ([]byte, bool) {
	t.Helper()
	present := false
	patched := mutate(t, raw, func(m map[string]any) {
		if inResponse {
			r, ok := m["response"].(map[string]any)
			if !ok {
				return
			}
			m = r
		}
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				present = true
				m[f] = json.Number("0")
			}
		}
	})
	if !present {
		return raw, false
	}
	err := check(raw)
	if err == nil {
		t.Errorf("known deviation %v: unpatched document validated, want error: %.200s", fields, raw)
		return patched, true
	}
	for _, f := range fields {
		if !strings.Contains(err.Error(), "'"+f+"'") {
			t.Errorf("known deviation: error does not name %q:\n%v", f, err)
		}
	}
	return patched, true
}

func TestRecordingsConform(t *testing.T) {
	t.Parallel()
	v := Load(t)
	recs := recordings(t)
	for name := range knownDeviations {
		if _, ok := recs[name]; !ok {
			t.Errorf("knownDeviations lists %s, which is not a recording", name)
		}
	}
	for name, evs := range recs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dev := knownDeviations[name]
			deviated := false
			var terminal []byte
			for _, e := range evs {
				raw := e.raw
				if dev != nil {
					var hit bool
					raw, hit = patchMissing(t, raw, dev, true, v.StreamEvent)
					deviated = deviated || hit
				}
				if err := v.StreamEvent(raw); err != nil {
					t.Errorf("%s:%d StreamEvent: %v", e.file, e.line, err)
				}
				// The same event relayed over WebSocket, tagged with a
				// stream_id, must also pass.
				ws := mutate(t, raw, func(m map[string]any) { m["stream_id"] = "s1" })
				if err := v.WebSocketEvent(ws); err != nil {
					t.Errorf("%s:%d WebSocketEvent: %v", e.file, e.line, err)
				}
				if isTerminal(typeOf(t, e.raw)) {
					terminal = e.raw
				}
			}
			if dev != nil && !deviated {
				t.Errorf("%s: known deviation %v no longer present; remove it from knownDeviations", name, dev)
			}
			if terminal == nil {
				t.Fatalf("%s: no terminal response.* event", name)
			}
			if last := evs[len(evs)-1].raw; !bytes.Equal(last, terminal) {
				t.Errorf("%s: terminal event is not the last line", name)
			}
			resp := responseOf(t, terminal)
			if dev != nil {
				resp, _ = patchMissing(t, resp, dev, false, v.Response)
			}
			if err := v.Response(resp); err != nil {
				t.Errorf("%s: terminal Response: %v", name, err)
			}
		})
	}
}

func TestMutationsFail(t *testing.T) {
	t.Parallel()
	v := Load(t)
	delta := firstOfType(t, "response.output_text.delta")
	added := firstOfType(t, "response.output_item.added")
	completed := firstOfType(t, "response.completed")
	resp := responseOf(t, completed)

	// Sanity: the unmutated bases pass, so failures below are caused by the
	// mutation alone.
	for _, raw := range [][]byte{delta, added, completed} {
		if err := v.StreamEvent(raw); err != nil {
			t.Fatalf("base event fails: %v", err)
		}
	}
	if err := v.Response(resp); err != nil {
		t.Fatalf("base response fails: %v", err)
	}

	tests := []struct {
		name     string
		check    func([]byte) error
		raw      []byte
		contains []string // substrings the error must contain
	}{
		{
			name:     "delta without sequence_number",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { delete(m, "sequence_number") }),
			contains: []string{"ResponseOutputTextDeltaStreamingEvent", "sequence_number"},
		},
		{
			name:     "delta output_index as string",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { m["output_index"] = "0" }),
			contains: []string{"ResponseOutputTextDeltaStreamingEvent", "/output_index"},
		},
		{
			name:     "delta sequence_number fractional",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { m["sequence_number"] = json.Number("1.5") }),
			contains: []string{"/sequence_number"},
		},
		{
			name:     "delta delta as number",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { m["delta"] = 1 }),
			contains: []string{"/delta"},
		},
		{
			name:     "output_item.added without item",
			check:    v.StreamEvent,
			raw:      mutate(t, added, func(m map[string]any) { delete(m, "item") }),
			contains: []string{"ResponseOutputItemAddedStreamingEvent", "item"},
		},
		{
			name:     "completed response without tools",
			check:    v.StreamEvent,
			raw:      mutate(t, completed, func(m map[string]any) { delete(m["response"].(map[string]any), "tools") }),
			contains: []string{"ResponseCompletedStreamingEvent", "tools"},
		},
		{
			name:     "response without tools",
			check:    v.Response,
			raw:      mutate(t, resp, func(m map[string]any) { delete(m, "tools") }),
			contains: []string{"ResponseResource", "tools"},
		},
		{
			name:     "response with wrong object",
			check:    v.Response,
			raw:      mutate(t, resp, func(m map[string]any) { m["object"] = "chat.completion" }),
			contains: []string{"ResponseResource", "/object"},
		},
		{
			name:     "response created_at as string",
			check:    v.Response,
			raw:      mutate(t, resp, func(m map[string]any) { m["created_at"] = "1767368377" }),
			contains: []string{"/created_at"},
		},
		{
			name:     "unknown event type",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { m["type"] = "response.output_text.bogus" }),
			contains: []string{`"response.output_text.bogus"`},
		},
		{
			name:     "missing event type",
			check:    v.StreamEvent,
			raw:      mutate(t, delta, func(m map[string]any) { delete(m, "type") }),
			contains: []string{`"type"`},
		},
		{
			name:     "not an object",
			check:    v.StreamEvent,
			raw:      []byte(`[1,2]`),
			contains: []string{"array"},
		},
		{
			name:     "invalid JSON",
			check:    v.StreamEvent,
			raw:      []byte(`{"type":`),
			contains: []string{"invalid JSON"},
		},
		{
			name:     "trailing data",
			check:    v.Response,
			raw:      append(bytes.Clone(resp), []byte(` {}`)...),
			contains: []string{"invalid JSON"},
		},
		{
			name:     "ws stream_id not a string",
			check:    v.WebSocketEvent,
			raw:      mutate(t, delta, func(m map[string]any) { m["stream_id"] = 7 }),
			contains: []string{"stream_id"},
		},
		{
			name:     "ws error event in SSE shape",
			check:    v.WebSocketEvent,
			raw:      []byte(`{"type":"error","sequence_number":3,"error":{"type":"server_error","code":null,"message":"boom","param":null}}`),
			contains: []string{"WebSocketErrorEvent", "status"},
		},
		{
			name:     "sse error event in ws shape",
			check:    v.StreamEvent,
			raw:      []byte(`{"type":"error","status":400,"error":{"code":"bad","message":"boom"}}`),
			contains: []string{"ErrorStreamingEvent", "sequence_number"},
		},
		{
			name:     "compact missing usage",
			check:    v.Compact,
			raw:      []byte(`{"id":"cmp_1","object":"response.compaction","created_at":1,"output":[]}`),
			contains: []string{"CompactResource", "usage"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.check(tc.raw)
			if err == nil {
				t.Fatalf("validated, want error; doc: %.300s", tc.raw)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
		})
	}
}

func TestValidEventsPass(t *testing.T) {
	t.Parallel()
	v := Load(t)
	tests := []struct {
		name  string
		check func([]byte) error
		raw   string
	}{
		{"sse error", v.StreamEvent, `{"type":"error","sequence_number":3,"error":{"type":"server_error","code":null,"message":"boom","param":null}}`},
		{"ws error", v.WebSocketEvent, `{"type":"error","status":400,"error":{"code":"bad","message":"boom","param":null}}`},
		{"ws error with stream_id", v.WebSocketEvent, `{"type":"error","status":400,"stream_id":"s1","error":{"code":"bad","message":"boom"}}`},
		{"ws delta with stream_id", v.WebSocketEvent, `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"stream_id":"s1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.check([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// knownBadExamples lists component schemas whose own "example" in the spec
// does not conform to the schema.
var knownBadExamples = map[string]string{
	// The example omits 8 required fields (error, incomplete_details,
	// instructions, max_output_tokens, max_tool_calls, previous_response_id,
	// prompt_cache_key, safety_identifier) and has "reasoning": {} although
	// Reasoning requires effort and summary.
	"ResponseResource": "example omits required fields",
}

// TestSpecExamples validates every component schema's own "example" against
// that schema (this covers Compact with a realistic document).
func TestSpecExamples(t *testing.T) {
	t.Parallel()
	v := Load(t)
	raw := v.spec
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Example json.RawMessage `json:"example"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	checks := map[string]func([]byte) error{
		"CompactResource":  v.Compact,
		"ResponseResource": v.Response,
	}
	n := 0
	for name, s := range doc.Components.Schemas {
		if len(s.Example) == 0 {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check := checks[name]
			if check == nil {
				check = func(b []byte) error { return v.Schema(name, b) }
			}
			err := check(s.Example)
			switch why, known := knownBadExamples[name]; {
			case known && err == nil:
				t.Errorf("example now conforms; remove %s from knownBadExamples", name)
			case known:
				t.Logf("known non-conforming spec example (%s): %v", why, err)
			case err != nil:
				t.Error(err)
			}
		})
	}
	if _, ok := doc.Components.Schemas["CompactResource"]; !ok || len(doc.Components.Schemas["CompactResource"].Example) == 0 {
		t.Error("CompactResource has no example; Compact has no positive test")
	}
	if n == 0 {
		t.Fatal("spec has no schema examples")
	}
}

func TestEventMapFromSpec(t *testing.T) {
	t.Parallel()
	v := Load(t)
	want := map[string]string{
		"response.output_text.delta": "ResponseOutputTextDeltaStreamingEvent",
		"response.completed":         "ResponseCompletedStreamingEvent",
		"error":                      "ErrorStreamingEvent",
	}
	for typ, name := range want {
		if got := v.eventSchemas[typ]; got != name {
			t.Errorf("eventSchemas[%q] = %q, want %q", typ, got, name)
		}
	}
	nEvents := 0
	for name := range v.schemas {
		if strings.HasSuffix(name, streamingEventSuffix) {
			nEvents++
		}
	}
	if len(v.eventSchemas) != nEvents {
		t.Errorf("%d event types for %d *%s schemas", len(v.eventSchemas), nEvents, streamingEventSuffix)
	}
}

func TestSchemaUnknownName(t *testing.T) {
	t.Parallel()
	v := Load(t)
	err := v.Schema("NoSuchSchema", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "NoSuchSchema") {
		t.Fatalf("err = %v, want mention of NoSuchSchema", err)
	}
}

func TestRestrictsExtraProps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		def  string
		want bool
	}{
		{`{}`, false},
		{`{"additionalProperties": true}`, false},
		{`{"additionalProperties": {}}`, false},
		{`{"additionalProperties": false}`, true},
		{`{"additionalProperties": {"type": "string"}}`, true},
		{`{"unevaluatedProperties": false}`, true},
		{`{"additionalProperties": false, "properties": {"stream_id": {"type": "string"}}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.def, func(t *testing.T) {
			t.Parallel()
			var def map[string]any
			if err := json.Unmarshal([]byte(tc.def), &def); err != nil {
				t.Fatal(err)
			}
			if got := restrictsExtraProps(def, "stream_id"); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSpecOverride checks that TETHER_SPEC replaces the embedded spec, and
// that one it names but cannot be read fails rather than falls back. It calls
// load, not the cached Load, and cannot be parallel: it sets the environment.
func TestSpecOverride(t *testing.T) {
	t.Setenv(specEnv, "")
	embedded, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if embedded.path != "internal/schematest/"+specFile {
		t.Errorf("unset: compiled %s, want the embedded spec", embedded.path)
	}

	other := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(other, embedded.spec, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(specEnv, other)
	if v, err := load(); err != nil {
		t.Errorf("%s=%s: %v", specEnv, other, err)
	} else if v.path != other {
		t.Errorf("%s=%s: compiled %s, want that file", specEnv, other, v.path)
	}

	t.Setenv(specEnv, filepath.Join(t.TempDir(), "nope.json"))
	if _, err := load(); err == nil || !strings.Contains(err.Error(), specEnv) {
		t.Errorf("%s naming a missing file: err = %v, want an error naming %s", specEnv, err, specEnv)
	}
}

// TestTestdataSources checks that testdata/README.md names every file beside
// it, so that none is in the repository without its source and licence.
func TestTestdataSources(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("testdata", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "README.md" && !bytes.Contains(readme, []byte("`"+e.Name()+"`")) {
			t.Errorf("testdata/README.md does not name %s", e.Name())
		}
	}
}
