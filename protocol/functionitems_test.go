package protocol

import (
	"bytes"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// FuzzFunctionItemEncoding: a function item Marshal and AppendMarshal
// write is the codec's encoding, and reads back as the item it was.
func FuzzFunctionItemEncoding(f *testing.F) {
	for _, s := range []string{
		"package main\n\nfunc main() {\n\tif a < b && c > d {\n\t\tprintln(\"x\")\n\t}\n}\n",
		`{"path":"pkg/config/file1.go"}`, "", "é 世界 \U0001F600", "\u2028", "\x00\b\f", "\xff", "long enough to take whole words <&> at a time",
	} {
		f.Add(s, "call_1", "")
	}
	f.Fuzz(func(t *testing.T, s, callID, other string) {
		for _, it := range []Item{
			&FunctionCall{CallID: callID, Name: "read_file", Arguments: s},
			&FunctionCall{ID: other, CallID: callID, Name: s, Namespace: other, Arguments: "{}", Status: ItemStatus(other)},
			&FunctionCallOutput{CallID: callID, Output: ToolOutput{Text: s}},
			&FunctionCallOutput{ID: other, CallID: callID, Namespace: other, Output: ToolOutput{Text: s}, Status: ItemStatus(other)},
			&FunctionCall{CallID: callID, Name: "read_file", Arguments: s, Caller: &Caller{Type: CallerProgram, CallerID: other}},
			&FunctionCallOutput{CallID: callID, Output: ToolOutput{Text: s}, Caller: &Caller{Type: CallerType(other)}},
		} {
			got, err := Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			want, err := jsonv2.Marshal(it, v1Options)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%T:\n got %s\nwant %s", it, got, want)
			}
			prefix := []byte("frame: ")
			if got, err = AppendMarshal(append(make([]byte, 0, 4), prefix...), it); err != nil || !bytes.Equal(got, append(prefix, want...)) {
				t.Fatalf("%T appended: %s (%v)", it, got, err)
			}
			if _, ok := appendFunctionItem(nil, it); !ok {
				continue
			}
			back, perr := DecodeItem(got[len(prefix):], "input[0]")
			if perr != nil {
				t.Fatalf("%s does not read back: %v", got, perr)
			}
			if !reflect.DeepEqual(back, it) {
				t.Fatalf("%s reads back as %+v, not %+v", got, back, it)
			}
		}
	})
}
