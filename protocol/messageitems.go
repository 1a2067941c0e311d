package protocol

import "strconv"

// A step's messages are written with every pause and resume (the step's
// view in response.done and response.in_progress) and as each is streamed
// (its item and part added and done, its text done): a message whose parts
// are plain text, and its events, are written here without the codec's
// reflection, with the codec's bytes (FuzzMessageEncoding,
// FuzzTextEventEncoding). Any other (annotations, logprobs, a refusal, a
// sub-agent's) goes the codec's way.

// appendItem appends an output item the way the codec writes it, when it
// is a function item or a message appendMessage takes; ok is false (and
// what it appended is to be dropped) otherwise.
func appendItem(b []byte, v any) ([]byte, bool) {
	if m, ok := v.(*Message); ok {
		return appendMessage(b, m)
	}
	return appendFunctionItem(b, v)
}

// appendMessage appends a message whose parts are all text (output_text
// with no annotations or logprobs, or input_text), written by no
// sub-agent.
func appendMessage(b []byte, m *Message) (_ []byte, ok bool) {
	if m == nil || m.Agent != nil {
		return b, false
	}
	b = append(b, `{"type":"message"`...)
	b, ok = appendMember(b, `,"id":`, m.ID, true, true)
	b, ok = appendMember(b, `,"status":`, string(m.Status), true, ok)
	b, ok = appendMember(b, `,"role":`, string(m.Role), false, ok)
	b = append(b, `,"content":[`...)
	for i, c := range m.Content {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendTextPart(b, c, ok); !ok {
			return b, false
		}
	}
	b = append(b, ']')
	b, ok = appendMember(b, `,"phase":`, m.Phase, true, ok)
	return append(b, '}'), ok
}

// appendTextPart appends a content part that is output_text with no
// annotations or logprobs, or input_text; ok is false for any other, or
// when it was false already.
func appendTextPart(b []byte, c Content, ok bool) ([]byte, bool) {
	switch c := c.(type) {
	case *OutputText:
		if c == nil || len(c.Annotations) > 0 || len(c.Logprobs) > 0 {
			return b, false
		}
		b, ok = appendMember(append(b, `{"type":"output_text"`...), `,"text":`, c.Text, false, ok)
		return append(b, `,"annotations":[]}`...), ok
	case *InputText:
		if c == nil {
			return b, false
		}
		b, ok = appendMember(append(b, `{"type":"input_text"`...), `,"text":`, c.Text, false, ok)
		return append(b, '}'), ok
	}
	return b, false
}

// appendTextEvent appends a message's content_part.added or .done whose
// part appendTextPart takes, or its output_text.done with no logprobs (or
// none but an empty list); ok is false (and what it appended is to be
// dropped) for any other value.
func appendTextEvent(b []byte, v any) (_ []byte, ok bool) {
	switch e := v.(type) {
	case *ContentPartEvent:
		b, ok = appendHeader(b, &e.EventHeader)
		b, ok = appendMember(b, `,"item_id":`, e.ItemID, false, ok)
		b = appendIndexes(b, e.OutputIndex, e.ContentIndex)
		b, ok = appendTextPart(append(b, `,"part":`...), e.Part, ok)
		return append(b, '}'), ok
	case *TextDoneEvent:
		if e.Text == nil || e.Refusal != nil || e.Logprobs != nil && len(*e.Logprobs) > 0 {
			return b, false
		}
		b, ok = appendHeader(b, &e.EventHeader)
		b, ok = appendMember(b, `,"item_id":`, e.ItemID, false, ok)
		b = appendIndexes(b, e.OutputIndex, e.ContentIndex)
		b, ok = appendMember(b, `,"text":`, *e.Text, false, ok)
		if e.Logprobs != nil {
			b = append(b, `,"logprobs":[]`...)
		}
		return append(b, '}'), ok
	}
	return b, false
}

// appendIndexes appends output_index and content_index.
func appendIndexes(b []byte, output, content int) []byte {
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	b = append(b, `,"content_index":`...)
	return strconv.AppendInt(b, int64(content), 10)
}

// itemSize is room enough for most of v's encodings if appendItem may
// take it, 0 otherwise.
func itemSize(v any) int {
	if m, ok := v.(*Message); ok && m != nil {
		return messageSize(m)
	}
	return functionItemSize(v)
}

// messageSize is room enough for most of m's encodings.
func messageSize(m *Message) int {
	n := 128 + len(m.ID) + len(m.Phase)
	for _, c := range m.Content {
		n += 48 + len(c.PlainText())*9/8
	}
	return n
}
