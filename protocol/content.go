package protocol

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// ContentType names a content part.
type ContentType string

// Content part types.
const (
	ContentInputText     ContentType = "input_text"
	ContentInputImage    ContentType = "input_image"
	ContentInputFile     ContentType = "input_file"
	ContentInputVideo    ContentType = "input_video"
	ContentOutputText    ContentType = "output_text"
	ContentRefusal       ContentType = "refusal"
	ContentText          ContentType = "text"
	ContentSummaryText   ContentType = "summary_text"
	ContentReasoningText ContentType = "reasoning_text"
)

// Content is one part of a message, reasoning item or tool output: a sealed
// union of the *Content types below.
type Content interface {
	ContentType() ContentType
	// PlainText is the part's text, or "" for parts without text (images, files).
	PlainText() string
}

// InputText is user-supplied text.
type InputText struct {
	Text string `json:"text"`
}

// OutputText is model-generated text. Annotations is never nil on output.
type OutputText struct {
	Text        string       `json:"text"`
	Annotations []Annotation `json:"annotations"`
	Logprobs    []LogProb    `json:"logprobs,omitempty"`
}

// Refusal is a model refusal.
type Refusal struct {
	Refusal string `json:"refusal"`
}

// InputImage is an image given by URL or data URL.
type InputImage struct {
	ImageURL *string `json:"image_url"`
	Detail   string  `json:"detail"`
}

// InputFile is a file given inline or by URL.
type InputFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
}

// InputVideo is a video given by URL or data URL.
type InputVideo struct {
	VideoURL string `json:"video_url"`
}

// TextPart is the generic "text" content part.
type TextPart struct {
	Text string `json:"text"`
}

// SummaryText is a reasoning summary.
type SummaryText struct {
	Text string `json:"text"`
}

// ReasoningText is raw reasoning text.
type ReasoningText struct {
	Text string `json:"text"`
}

// Annotation is a citation attached to output text.
type Annotation struct {
	Type       string `json:"type"` // url_citation
	URL        string `json:"url"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
	Title      string `json:"title"`
}

// LogProb is a sampled token's log probability.
type LogProb struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogProb `json:"top_logprobs"`
}

// TopLogProb is one alternative token.
type TopLogProb struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func (*InputText) ContentType() ContentType     { return ContentInputText }
func (*OutputText) ContentType() ContentType    { return ContentOutputText }
func (*Refusal) ContentType() ContentType       { return ContentRefusal }
func (*InputImage) ContentType() ContentType    { return ContentInputImage }
func (*InputFile) ContentType() ContentType     { return ContentInputFile }
func (*InputVideo) ContentType() ContentType    { return ContentInputVideo }
func (*TextPart) ContentType() ContentType      { return ContentText }
func (*SummaryText) ContentType() ContentType   { return ContentSummaryText }
func (*ReasoningText) ContentType() ContentType { return ContentReasoningText }

func (c *InputText) PlainText() string     { return c.Text }
func (c *OutputText) PlainText() string    { return c.Text }
func (c *Refusal) PlainText() string       { return c.Refusal }
func (*InputImage) PlainText() string      { return "" }
func (*InputFile) PlainText() string       { return "" }
func (*InputVideo) PlainText() string      { return "" }
func (c *TextPart) PlainText() string      { return c.Text }
func (c *SummaryText) PlainText() string   { return c.Text }
func (c *ReasoningText) PlainText() string { return c.Text }

// typedTo writes v (a method-free wire type) as an object with "type"
// first.
func typedTo[T any](enc *jsontext.Encoder, typ string, v *T) error {
	return marshalTo(enc, struct {
		Type string `json:"type"`
		V    *T     `json:",embed"`
	}{typ, v})
}

type (
	wireInputText     InputText
	wireOutputText    OutputText
	wireRefusal       Refusal
	wireInputImage    InputImage
	wireInputFile     InputFile
	wireInputVideo    InputVideo
	wireTextPart      TextPart
	wireSummaryText   SummaryText
	wireReasoningText ReasoningText
)

func (c *InputText) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentInputText), (*wireInputText)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *InputText) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *OutputText) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *c
	if w.Annotations == nil {
		w.Annotations = []Annotation{}
	}
	return typedTo(enc, string(ContentOutputText), (*wireOutputText)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *OutputText) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *Refusal) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentRefusal), (*wireRefusal)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *Refusal) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *InputImage) MarshalJSONTo(enc *jsontext.Encoder) error {
	w := *c
	if w.Detail == "" {
		w.Detail = "auto"
	}
	return typedTo(enc, string(ContentInputImage), (*wireInputImage)(&w))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *InputImage) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *InputFile) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentInputFile), (*wireInputFile)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *InputFile) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *InputVideo) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentInputVideo), (*wireInputVideo)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *InputVideo) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *TextPart) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentText), (*wireTextPart)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *TextPart) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *SummaryText) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentSummaryText), (*wireSummaryText)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *SummaryText) MarshalJSON() ([]byte, error) { return Marshal(c) }

func (c *ReasoningText) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ContentReasoningText), (*wireReasoningText)(c))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c *ReasoningText) MarshalJSON() ([]byte, error) { return Marshal(c) }

// Contents is a list of content parts that decodes from a JSON array, or from
// a plain string (the shorthand for one text part).
type Contents []Content

// DecodeContent decodes one content part. param names it in errors.
func DecodeContent(raw json.RawMessage, param string) (Content, *Error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := unmarshal(raw, &head); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid content part: expected an object with a 'type' field.")
	}
	var c Content
	switch ContentType(head.Type) {
	case ContentInputText:
		c = new(InputText)
	case ContentOutputText:
		c = new(OutputText)
	case ContentRefusal:
		c = new(Refusal)
	case ContentInputImage:
		c = new(InputImage)
	case ContentInputFile:
		c = new(InputFile)
	case ContentInputVideo:
		c = new(InputVideo)
	case ContentText:
		c = new(TextPart)
	case ContentSummaryText:
		c = new(SummaryText)
	case ContentReasoningText:
		c = new(ReasoningText)
	case "":
		return nil, Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	default:
		return nil, Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported content types are: 'input_text', 'input_image', 'input_file', 'input_video', 'output_text', 'refusal', 'text', 'summary_text' and 'reasoning_text'.", head.Type)
	}
	if err := unmarshal(raw, c); err != nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid %s content part: %v.", head.Type, jsonReason(err))
	}
	return c, nil
}

// decodeContents decodes a content array, or a string as one part made by text.
func decodeContents(raw json.RawMessage, param string, text func(string) Content) (Contents, *Error) {
	raw = trimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := unmarshal(raw, &s); err != nil {
			return nil, Invalid(CodeInvalidType, param, "Invalid string: %v.", jsonReason(err))
		}
		return Contents{text(s)}, nil
	}
	var parts []json.RawMessage
	if err := unmarshal(raw, &parts); err != nil || parts == nil {
		return nil, Invalid(CodeInvalidType, param, "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	out := make(Contents, len(parts))
	for i, p := range parts {
		c, perr := DecodeContent(p, IndexParam(param, i))
		if perr != nil {
			return nil, perr
		}
		out[i] = c
	}
	return out, nil
}

// Text concatenates the text of every part.
func (cs Contents) Text() string {
	if len(cs) == 1 {
		return cs[0].PlainText()
	}
	var n int
	for _, c := range cs {
		n += len(c.PlainText())
	}
	b := make([]byte, 0, n)
	for _, c := range cs {
		b = append(b, c.PlainText()...)
	}
	return string(b)
}
