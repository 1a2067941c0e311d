package protocol_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

type clientEventCase struct {
	name string
	in   string
	want protocol.ClientEvent
	lane string
}

var clientEventCases = []clientEventCase{
	{
		name: "response.create as Codex sends it",
		in:   `{"type":"response.create","model":"gpt-5","input":"hi","stream":true,"client_metadata":{"x-codex-turn":"1"},"store":false,"some_future_field":{"a":1}}`,
		want: &protocol.CreateEvent{Request: &protocol.CreateRequest{
			Model:  "gpt-5",
			Input:  protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "hi"}}}},
			Stream: ptr(true),
			Store:  ptr(false),
		}},
	},
	{
		name: "response.create on a lane",
		in:   `{"type":"response.create","stream_id":"lane-1","model":"m","previous_response_id":"resp_1","generate":false}`,
		want: &protocol.CreateEvent{StreamID: "lane-1", Request: &protocol.CreateRequest{Model: "m", PreviousResponseID: "resp_1", Generate: ptr(false)}},
		lane: "lane-1",
	},
	{
		name: "response.create with null stream_id is the default lane",
		in:   `{"type":"response.create","stream_id":null,"model":"m"}`,
		want: &protocol.CreateEvent{Request: &protocol.CreateRequest{Model: "m"}},
	},
	{
		name: "response.append",
		in:   `{"type":"response.append","stream_id":"s1","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`,
		want: &protocol.AppendEvent{StreamID: "s1", ResponseID: "resp_1", Input: protocol.Items{
			&protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "ok"}},
		}},
		lane: "s1",
	},
	{
		name: "response.append with a steering string",
		in:   `{"type":"response.append","response_id":"resp_1","input":"stop"}`,
		want: &protocol.AppendEvent{ResponseID: "resp_1", Input: protocol.Items{
			&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "stop"}}},
		}},
	},
	{
		name: "response.cancel",
		in:   `{"type":"response.cancel","stream_id":"s.2","response_id":"resp_2"}`,
		want: &protocol.CancelEvent{StreamID: "s.2", ResponseID: "resp_2"},
		lane: "s.2",
	},
	{
		name: "response.resume",
		in:   `{"type":"response.resume","response_id":"resp_3"}`,
		want: &protocol.ResumeEvent{ResponseID: "resp_3"},
	},
	{
		name: "response.processed is accepted",
		in:   `{"type":"response.processed","response_id":"resp_4"}`,
		want: &protocol.ProcessedEvent{ResponseID: "resp_4"},
	},
	{
		name: "response.processed without response_id is accepted",
		in:   `{"type":"response.processed"}`,
		want: &protocol.ProcessedEvent{},
	},
}

var longStreamID = strings.Repeat("s", protocol.MaxStreamIDLen+1)

// clientEventErrCases pair each refused frame with the lane its error must be
// reported on ("" for the default lane, and for a stream_id that is invalid).
var clientEventErrCases = []struct {
	errCase
	lane string
}{
	{errCase{"not JSON", `hello`, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"empty frame", ``, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"array", `[{"type":"response.create"}]`, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"string", `"response.create"`, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"type not a string", `{"type":1}`, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"missing type", `{"model":"m"}`, protocol.CodeMissingRequired, "type"}, ""},
	{errCase{"empty type", `{"type":"","stream_id":"s1"}`, protocol.CodeMissingRequired, "type"}, "s1"},
	{errCase{"null frame", `null`, protocol.CodeMissingRequired, "type"}, ""},
	{errCase{"unknown type", `{"type":"session.update"}`, protocol.CodeUnknownEventType, "type"}, ""},
	{errCase{"unknown type on a lane", `{"type":"response.retry","stream_id":"s1"}`, protocol.CodeUnknownEventType, "type"}, "s1"},
	{errCase{"empty stream_id", `{"type":"response.create","stream_id":"","model":"m"}`, protocol.CodeInvalidStreamID, "stream_id"}, ""},
	{errCase{"stream_id too long", `{"type":"response.create","stream_id":"` + longStreamID + `","model":"m"}`, protocol.CodeInvalidStreamID, "stream_id"}, ""},
	{errCase{"stream_id with a space", `{"type":"response.cancel","stream_id":"a b","response_id":"r"}`, protocol.CodeInvalidStreamID, "stream_id"}, ""},
	{errCase{"stream_id with a slash", `{"type":"response.create","stream_id":"a/b"}`, protocol.CodeInvalidStreamID, "stream_id"}, ""},
	{errCase{"stream_id not ASCII", `{"type":"response.create","stream_id":"voie-é"}`, protocol.CodeInvalidStreamID, "stream_id"}, ""},
	{errCase{"stream_id not a string", `{"type":"response.create","stream_id":7}`, protocol.CodeInvalidJSON, ""}, ""},
	{errCase{"append without response_id", `{"type":"response.append","stream_id":"s1","input":[]}`, protocol.CodeMissingRequired, "response_id"}, "s1"},
	{errCase{"cancel without response_id", `{"type":"response.cancel","stream_id":"s2"}`, protocol.CodeMissingRequired, "response_id"}, "s2"},
	{errCase{"resume without response_id", `{"type":"response.resume","response_id":""}`, protocol.CodeMissingRequired, "response_id"}, ""},
	{errCase{"append with bad input", `{"type":"response.append","stream_id":"s3","response_id":"r","input":[{"type":"function_call_output","call_id":"c"}]}`, protocol.CodeMissingRequired, "input[0].output"}, "s3"},
	{errCase{"append with input an object", `{"type":"response.append","response_id":"r","input":{}}`, protocol.CodeInvalidType, "input"}, ""},
	{errCase{"create with bad input", `{"type":"response.create","stream_id":"s4","model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"x"}]}]}`, protocol.CodeInvalidValue, "input[1].content[0].type"}, "s4"},
	{errCase{"create with a mistyped field", `{"type":"response.create","stream_id":"s5","model":["m"]}`, protocol.CodeInvalidType, "model"}, "s5"},
}

func TestDecodeClientEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range clientEventCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, lane, perr := protocol.DecodeClientEvent([]byte(tc.in))
			if perr != nil {
				t.Fatalf("DecodeClientEvent(%s): %v", tc.in, perr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeClientEvent(%s)\n got %s\nwant %s", tc.in, mustMarshal(t, got), mustMarshal(t, tc.want))
			}
			if lane != tc.lane || got.Lane() != tc.lane {
				t.Errorf("lane = %q, Lane() = %q, want %q", lane, got.Lane(), tc.lane)
			}
			if got.ClientEventType() != tc.want.ClientEventType() {
				t.Errorf("ClientEventType() = %s, want %s", got.ClientEventType(), tc.want.ClientEventType())
			}
			roundTrip(t, got, decodeClientEvent)
		})
	}
}

func TestDecodeClientEventErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range clientEventErrCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, lane, perr := protocol.DecodeClientEvent([]byte(tc.in))
			if got != nil {
				t.Errorf("DecodeClientEvent(%s) returned an event with its error: %#v", tc.in, got)
			}
			wantError(t, perr, tc.code, tc.param)
			if lane != tc.lane {
				t.Errorf("lane = %q, want %q: the error must be reported on the event's lane", lane, tc.lane)
			}
		})
	}
}

func TestClientEventMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   protocol.ClientEvent
		want string
	}{
		{
			name: "create puts type and stream_id first",
			ev:   &protocol.CreateEvent{StreamID: "s1", Request: &protocol.CreateRequest{Model: "m"}},
			want: `{"type":"response.create","stream_id":"s1","model":"m","input":[]}`,
		},
		{
			name: "create on the default lane",
			ev:   &protocol.CreateEvent{Request: &protocol.CreateRequest{Model: "m"}},
			want: `{"type":"response.create","model":"m","input":[]}`,
		},
		{
			name: "create without a request is still a frame",
			ev:   &protocol.CreateEvent{},
			want: `{"type":"response.create","model":"","input":[]}`,
		},
		{
			name: "append",
			ev:   &protocol.AppendEvent{StreamID: "s1", ResponseID: "resp_1", Input: protocol.Items{&protocol.FunctionCallOutput{CallID: "c", Output: protocol.ToolOutput{Text: "ok"}}}},
			want: `{"type":"response.append","stream_id":"s1","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
		},
		{
			name: "cancel",
			ev:   &protocol.CancelEvent{ResponseID: "resp_1"},
			want: `{"type":"response.cancel","response_id":"resp_1"}`,
		},
		{
			name: "resume",
			ev:   &protocol.ResumeEvent{StreamID: "s", ResponseID: "resp_1"},
			want: `{"type":"response.resume","stream_id":"s","response_id":"resp_1"}`,
		},
		{
			name: "processed",
			ev:   &protocol.ProcessedEvent{ResponseID: "resp_1"},
			want: `{"type":"response.processed","response_id":"resp_1"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := mustMarshal(t, tc.ev)
			if string(got) != tc.want {
				t.Fatalf("marshal\n got %s\nwant %s", got, tc.want)
			}
			back, _, perr := protocol.DecodeClientEvent(got)
			if perr != nil {
				t.Fatalf("a marshaled %s does not decode: %v", tc.ev.ClientEventType(), perr)
			}
			if back.ClientEventType() != tc.ev.ClientEventType() {
				t.Fatalf("decoded %s as %s", got, back.ClientEventType())
			}
		})
	}
}

func decodeClientEvent(b []byte) (protocol.ClientEvent, *protocol.Error) {
	ev, _, perr := protocol.DecodeClientEvent(b)
	return ev, perr
}

// TestClientEventTypesListed guards the errors that list the client event
// types (an unknown type, a missing one): they name every type the decoder
// accepts, each ClientEventType constant of the package, and only those.
func TestClientEventTypesListed(t *testing.T) {
	t.Parallel()
	declared := clientEventTypeConstants(t)
	if len(declared) == 0 {
		t.Fatal("no ClientEventType constant found in the package's source")
	}
	for _, frame := range []string{`{"type":"session.update"}`, `{"model":"m"}`} {
		_, _, perr := protocol.DecodeClientEvent([]byte(frame))
		if perr == nil {
			t.Fatalf("DecodeClientEvent(%s) accepted it", frame)
		}
		listed := regexp.MustCompile(`response\.[a-z_]+`).FindAllString(perr.Message, -1)
		for _, typ := range declared {
			if !slices.Contains(listed, typ) {
				t.Errorf("the error for %s does not name %s, which the decoder accepts: %q", frame, typ, perr.Message)
			}
			_, _, perr := protocol.DecodeClientEvent([]byte(`{"type":"` + typ + `","response_id":"r","input":[],"stream_ids":["b"]}`))
			if perr != nil && perr.Code == protocol.CodeUnknownEventType {
				t.Errorf("%s is declared but not decoded: %v", typ, perr)
			}
		}
		for _, typ := range listed {
			if !slices.Contains(declared, typ) {
				t.Errorf("the error for %s names %s, which is no ClientEventType: %q", frame, typ, perr.Message)
			}
		}
	}
}

// clientEventTypeConstants is the value of every ClientEventType constant
// declared in the package's (non-test) source.
func clientEventTypeConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ClientEventType" {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						types = append(types, s)
					}
				}
			}
		}
	}
	return types
}

// TestDecodeInject: response.inject decodes as an AppendEvent marked
// Inject, its input as sent kept for a failure to give back, and writes
// itself back as response.inject; one without response_id or input, or
// with more than MaxInjectItems items, is refused.
func TestDecodeInject(t *testing.T) {
	frame := `{"type":"response.inject","response_id":"resp_1","stream_id":"a","input":[{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`
	ev, lane, perr := protocol.DecodeClientEvent([]byte(frame))
	if perr != nil {
		t.Fatal(perr)
	}
	in, ok := ev.(*protocol.AppendEvent)
	if !ok || !in.Inject || lane != "a" || in.ResponseID != "resp_1" || len(in.Input) != 1 || in.ClientEventType() != protocol.ClientInject {
		t.Fatalf("decoded %#v on lane %q", ev, lane)
	}
	if string(in.RawInput) != `[{"type":"function_call_output","call_id":"call_1","output":"ok"}]` {
		t.Fatalf("raw input %s", in.RawInput)
	}
	b, err := protocol.Marshal(in)
	if err != nil || !strings.Contains(string(b), `"type":"response.inject"`) {
		t.Fatalf("written back as %s (%v)", b, err)
	}
	f, err := protocol.Marshal(protocol.InjectFailure(in, &protocol.Error{Code: protocol.CodeResponseNotFound, Message: "gone"}))
	if err != nil || !strings.Contains(string(f), `"input":[{"type":"function_call_output","call_id":"call_1","output":"ok"}]`) || !strings.Contains(string(f), `"stream_id":"a"`) {
		t.Fatalf("its failure: %s (%v)", f, err)
	}
	many := `{"type":"response.inject","response_id":"resp_1","input":[` + strings.Repeat(`{"type":"function_call_output","call_id":"c","output":"x"},`, protocol.MaxInjectItems) + `{"type":"function_call_output","call_id":"c","output":"x"}]}`
	for frame, code := range map[string]string{
		`{"type":"response.inject","input":[]}`:             protocol.CodeMissingRequired,
		`{"type":"response.inject","response_id":"resp_1"}`: protocol.CodeMissingRequired,
		many: protocol.CodeArrayAboveMaxLength,
	} {
		if _, _, perr := protocol.DecodeClientEvent([]byte(frame)); perr == nil || perr.Code != code || perr.Status != 400 {
			t.Errorf("%.80s: %v, want %s", frame, perr, code)
		}
	}
}
