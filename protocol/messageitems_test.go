package protocol

import (
	"bytes"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// FuzzMessageEncoding: a message Marshal and AppendMarshal write is the
// codec's encoding, whether or not appendMessage takes it, and one it
// takes reads back as the message it was.
func FuzzMessageEncoding(f *testing.F) {
	for _, s := range deltaStrings {
		f.Add(s, "msg_1")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		for _, m := range messages(s, other) {
			want, err := jsonv2.Marshal(m, v1Options)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Marshal(m)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%+v:\n got %s (%v)\nwant %s", m, got, err, want)
			}
			prefix := []byte("frame: ")
			if got, err = AppendMarshal(append(make([]byte, 0, 4), prefix...), m); err != nil || !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("%+v appended: %s (%v)", m, got, err)
			}
			if _, ok := appendMessage(nil, m); !ok {
				continue
			}
			back, perr := DecodeItem(want, "input[0]")
			if perr != nil {
				t.Fatalf("%s does not read back: %v", want, perr)
			}
			if !reflect.DeepEqual(back, normalMessage(m)) {
				t.Fatalf("%s reads back as %+v, not %+v", want, back, m)
			}
		}
	})
}

// FuzzTextEventEncoding: a message's part and text events are written with
// the codec's bytes, whether or not appendTextEvent takes them.
func FuzzTextEventEncoding(f *testing.F) {
	for _, s := range deltaStrings {
		f.Add(s, "msg_1")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		for _, ev := range textEvents(s, other) {
			want, err := jsonv2.Marshal(ev, v1Options)
			if err != nil {
				t.Fatal(err)
			}
			prefix := []byte("frame: ")
			if got, err := AppendMarshal(append(make([]byte, 0, 4), prefix...), ev); err != nil || !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("%T with %q:\n got %s (%v)\nwant %s%s", ev, s, got, err, prefix, want)
			}
		}
	})
}

// TestTextEventsFast: a message's plain part and text events take the fast
// path.
func TestTextEventsFast(t *testing.T) {
	t.Parallel()
	for i, ev := range textEvents("plain", "msg_1")[:4] {
		if _, ok := appendTextEvent(nil, ev); !ok {
			t.Errorf("event %d (%T): not taken by the fast path", i, ev)
		}
	}
}

// textEvents are part and text events with s and other in their strings:
// the first four of the shapes appendTextEvent writes.
func textEvents(s, other string) []any {
	empty, full := []LogProb{}, []LogProb{{Token: s, Bytes: []int{1}, TopLogprobs: []TopLogProb{}}}
	h := func(typ EventType) EventHeader { return EventHeader{Type: typ, SequenceNumber: 7, StreamID: other} }
	return []any{
		&ContentPartEvent{EventHeader: h(EventContentPartAdded), ItemID: other, OutputIndex: 2, ContentIndex: 1, Part: &OutputText{Text: s}},
		&ContentPartEvent{EventHeader: EventHeader{Type: EventContentPartDone}, ItemID: s, Part: &OutputText{Text: s, Annotations: []Annotation{}}},
		&TextDoneEvent{EventHeader: h(EventOutputTextDone), ItemID: other, OutputIndex: 3, Text: &s, Logprobs: &empty},
		&TextDoneEvent{EventHeader: h(EventOutputTextDone), ItemID: s, Text: &other},
		&ContentPartEvent{EventHeader: h(EventContentPartDone), ItemID: other, Part: &Refusal{Refusal: s}},
		&ContentPartEvent{EventHeader: h(EventContentPartDone), ItemID: other},
		&ContentPartEvent{EventHeader: EventHeader{Type: EventContentPartAdded, Agent: &AgentRef{AgentName: s}}, Part: &OutputText{Text: s, Logprobs: full}},
		&TextDoneEvent{EventHeader: h(EventOutputTextDone), ItemID: other, Text: &s, Logprobs: &full},
		&TextDoneEvent{EventHeader: h(EventRefusalDone), ItemID: other, Refusal: &s},
	}
}

// TestMessageFast: appendMessage takes a step's message whole, and leaves
// to the codec what it does not write.
func TestMessageFast(t *testing.T) {
	t.Parallel()
	for i, m := range messages("plain", "msg_1") {
		_, ok := appendMessage(nil, m)
		if fast := i < 4; ok != fast {
			t.Errorf("message %d (%+v): taken by the fast path %v, want %v", i, m, ok, fast)
		}
	}
}

// messages are messages with s and other in their strings: the first four
// of the shapes appendMessage writes, the rest of shapes it leaves to the
// codec.
func messages(s, other string) []*Message {
	return []*Message{
		{ID: other, Status: StatusCompleted, Role: RoleAssistant, Content: Contents{&OutputText{Text: s, Annotations: []Annotation{}}}},
		{Role: RoleAssistant, Content: Contents{&OutputText{Text: s}, &OutputText{Text: other}}, Phase: s},
		{Role: Role(s), Status: ItemStatus(other), Content: Contents{&InputText{Text: s}}},
		{Role: RoleUser},
		{Role: RoleAssistant, Content: Contents{&OutputText{Text: s, Annotations: []Annotation{{Type: "url_citation", URL: other}}}}},
		{Role: RoleAssistant, Content: Contents{&OutputText{Text: s, Logprobs: []LogProb{{Token: s, Bytes: []int{}, TopLogprobs: []TopLogProb{}}}}}},
		{Role: RoleAssistant, Content: Contents{&Refusal{Refusal: s}}},
		{Role: RoleAssistant, Content: Contents{&OutputText{Text: s}}, Agent: &AgentRef{AgentName: other}},
	}
}

// normalMessage is m as it reads back: empty annotations and content are
// written as [], which reads back empty, not nil.
func normalMessage(m *Message) *Message {
	n := *m
	if n.Content == nil {
		n.Content = Contents{}
	}
	for i, c := range n.Content {
		if o, ok := c.(*OutputText); ok && o.Annotations == nil {
			cp := *o
			cp.Annotations = []Annotation{}
			n.Content[i] = &cp
		}
	}
	return &n
}
