package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tether-run/tether/protocol"
)

type contentCase struct {
	name string
	in   string
	want protocol.Content
	text string // PlainText
}

var contentCases = []contentCase{
	{"input_text", `{"type":"input_text","text":"hello"}`, &protocol.InputText{Text: "hello"}, "hello"},
	{
		"output_text with annotation and logprobs",
		`{"type":"output_text","text":"Paris","annotations":[{"type":"url_citation","url":"https://example.com","start_index":0,"end_index":5,"title":"Ex"}],"logprobs":[{"token":"Paris","logprob":-0.5,"bytes":[80],"top_logprobs":[{"token":"Lyon","logprob":-2,"bytes":[76]}]}]}`,
		&protocol.OutputText{
			Text:        "Paris",
			Annotations: []protocol.Annotation{{Type: "url_citation", URL: "https://example.com", StartIndex: 0, EndIndex: 5, Title: "Ex"}},
			Logprobs:    []protocol.LogProb{{Token: "Paris", Logprob: -0.5, Bytes: []int{80}, TopLogprobs: []protocol.TopLogProb{{Token: "Lyon", Logprob: -2, Bytes: []int{76}}}}},
		},
		"Paris",
	},
	{"output_text as OpenAI streams it", `{"type":"output_text","annotations":[],"logprobs":[],"text":""}`, &protocol.OutputText{Annotations: []protocol.Annotation{}, Logprobs: []protocol.LogProb{}}, ""},
	{"refusal", `{"type":"refusal","refusal":"I can't."}`, &protocol.Refusal{Refusal: "I can't."}, "I can't."},
	{"input_image by URL", `{"type":"input_image","image_url":"https://example.com/a.png","detail":"high"}`, &protocol.InputImage{ImageURL: ptr("https://example.com/a.png"), Detail: "high"}, ""},
	{"input_image with null url", `{"type":"input_image","image_url":null}`, &protocol.InputImage{}, ""},
	{"input_file inline", `{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,AAAA"}`, &protocol.InputFile{Filename: "a.pdf", FileData: "data:application/pdf;base64,AAAA"}, ""},
	{"input_file by URL", `{"type":"input_file","file_url":"https://example.com/a.pdf"}`, &protocol.InputFile{FileURL: "https://example.com/a.pdf"}, ""},
	{"input_video", `{"type":"input_video","video_url":"https://example.com/a.mp4"}`, &protocol.InputVideo{VideoURL: "https://example.com/a.mp4"}, ""},
	{"text", `{"type":"text","text":"plain"}`, &protocol.TextPart{Text: "plain"}, "plain"},
	{"summary_text", `{"type":"summary_text","text":"sum"}`, &protocol.SummaryText{Text: "sum"}, "sum"},
	{"reasoning_text", `{"type":"reasoning_text","text":"why"}`, &protocol.ReasoningText{Text: "why"}, "why"},
	{"unknown fields ignored", `{"text":"x","type":"input_text","cache_control":{"type":"ephemeral"}}`, &protocol.InputText{Text: "x"}, "x"},
}

// contentErrCases are decoded with param "content[3]".
var contentErrCases = []errCase{
	{"not an object", `"hello"`, protocol.CodeInvalidType, "content[3]"},
	{"array", `[{"type":"input_text"}]`, protocol.CodeInvalidType, "content[3]"},
	{"malformed", `{"type":`, protocol.CodeInvalidType, "content[3]"},
	{"null", `null`, protocol.CodeMissingRequired, "content[3].type"},
	{"no type", `{"text":"x"}`, protocol.CodeMissingRequired, "content[3].type"},
	{"unknown type", `{"type":"input_audio","data":"x"}`, protocol.CodeInvalidValue, "content[3].type"},
	{"type not a string", `{"type":["input_text"]}`, protocol.CodeInvalidType, "content[3]"},
	{"text a number", `{"type":"output_text","text":1}`, protocol.CodeInvalidType, "content[3]"},
	{"annotations an object", `{"type":"output_text","text":"x","annotations":{}}`, protocol.CodeInvalidType, "content[3]"},
	{"image_url a number", `{"type":"input_image","image_url":1}`, protocol.CodeInvalidType, "content[3]"},
}

func TestDecodeContent(t *testing.T) {
	t.Parallel()
	for _, tc := range contentCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeContent(json.RawMessage(tc.in), "content[0]")
			if perr != nil {
				t.Fatalf("DecodeContent(%s): %v", tc.in, perr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DecodeContent(%s)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
			if got.PlainText() != tc.text {
				t.Errorf("PlainText() = %q, want %q", got.PlainText(), tc.text)
			}
			b := mustMarshal(t, got)
			if k := keys(t, b); k[0] != "type" {
				t.Errorf("%s: \"type\" is not the first key", b)
			}
			if typ := string(object(t, b)["type"]); typ != `"`+string(got.ContentType())+`"` {
				t.Errorf("%s: type %s, want %q", b, typ, got.ContentType())
			}
			roundTrip(t, got, func(b []byte) (protocol.Content, *protocol.Error) { return protocol.DecodeContent(b, "content[0]") })
		})
	}
}

func TestDecodeContentErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range contentErrCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, perr := protocol.DecodeContent(json.RawMessage(tc.in), "content[3]")
			if got != nil {
				t.Errorf("DecodeContent(%s) returned a part with its error: %#v", tc.in, got)
			}
			wantError(t, perr, tc.code, tc.param)
		})
	}
}

func TestContentMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		part protocol.Content
		want string
	}{
		{"output_text nil annotations become []", &protocol.OutputText{Text: "a"}, `{"type":"output_text","text":"a","annotations":[]}`},
		{"input_image detail defaults to auto", &protocol.InputImage{ImageURL: ptr("https://x/y.png")}, `{"type":"input_image","image_url":"https://x/y.png","detail":"auto"}`},
		{"input_image without url writes null", &protocol.InputImage{Detail: "low"}, `{"type":"input_image","image_url":null,"detail":"low"}`},
		{"input_file omits empty fields", &protocol.InputFile{FileURL: "https://x/a.pdf"}, `{"type":"input_file","file_url":"https://x/a.pdf"}`},
		{"refusal", &protocol.Refusal{Refusal: "no"}, `{"type":"refusal","refusal":"no"}`},
		{"empty text keeps its field", &protocol.InputText{}, `{"type":"input_text","text":""}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := string(mustMarshal(t, tc.part)); got != tc.want {
				t.Fatalf("marshal\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestContentsText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cs   protocol.Contents
		want string
	}{
		{"nil", nil, ""},
		{"one", protocol.Contents{&protocol.OutputText{Text: "a"}}, "a"},
		{"image has no text", protocol.Contents{&protocol.InputText{Text: "a"}, &protocol.InputImage{}, &protocol.Refusal{Refusal: "b"}}, "ab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.cs.Text(); got != tc.want {
				t.Fatalf("Text() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestContentsUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want protocol.Contents
		err  bool
	}{
		{"string is one input_text", `"hi"`, protocol.Contents{&protocol.InputText{Text: "hi"}}, false},
		{"array", `[{"type":"summary_text","text":"s"}]`, protocol.Contents{&protocol.SummaryText{Text: "s"}}, false},
		{"null is refused", `null`, nil, true},
		{"number is refused", `1`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got protocol.Contents
			err := json.Unmarshal([]byte(tc.in), &got)
			if tc.err {
				if err == nil {
					t.Fatalf("Unmarshal(%s) = %#v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Unmarshal(%s) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}
