package protocol

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// jsonReason turns an encoding/json error into a short, user-facing reason.
func jsonReason(err error) string {
	var te *jsonv1.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return "'" + wireField(te.Field) + "' must be " + article(te.Type.Kind().String()) + ", not " + te.Value
		}
		return "expected " + article(te.Type.Kind().String()) + ", got " + te.Value
	}
	var se *jsonv1.SyntaxError
	if errors.As(err, &se) {
		return "malformed JSON at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()
	}
	return err.Error()
}

// wireField is the param of the path encoding/json puts in
// UnmarshalTypeError.Field: the Go names of embedded structs dropped
// ("CreateRequest.model" is model), and an array's index in brackets, as
// every other param has it ("context_management.0.compact_threshold" is
// context_management[0].compact_threshold).
func wireField(f string) string {
	for _, embedded := range []string{"CreateRequest.", "EventHeader."} {
		f = strings.TrimPrefix(f, embedded)
	}
	var b strings.Builder
	for tok := range strings.SplitSeq(f, ".") {
		appendParamToken(&b, tok)
	}
	return b.String()
}

// unmarshalPlaced reads the next value of dec with unmarshal, a type's
// UnmarshalJSON, and puts the value's place in dec before the path of a
// type error unmarshal returns. UnmarshalJSON reads its value apart, where
// the path starts again at the value: a tool's name of the wrong type
// would read as name, where it is tools[2].name. A type whose
// UnmarshalJSON reads values of such types in turn has their paths placed
// below its own as well (tools[4].tools[2].name).
func unmarshalPlaced(dec *jsontext.Decoder, unmarshal func([]byte) error) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	err = unmarshal(v)
	var te *jsonv1.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	// The path as encoding/json writes it (tools.2.name): wireField
	// turns it into a param.
	var path []string
	for tok := range dec.StackPointer().Tokens() {
		path = append(path, tok)
	}
	if te.Field != "" {
		path = append(path, te.Field)
	}
	placed := *te
	placed.Field = strings.Join(path, ".")
	return &placed
}

func article(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64", "float64", "float32":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "map", "ptr", "interface":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a " + kind
}

// IndexParam is the param of an error about element i of param: "input[3]".
func IndexParam(param string, i int) string {
	return param + "[" + strconv.Itoa(i) + "]"
}

// leadingType is the value of a "type" member that opens the object in
// data, when it is a plain ASCII name ({"type":"response.done",…), as
// tether and OpenAI write every event. ok is false for anything else.
func leadingType(data []byte) (t string, ok bool) {
	const open = `{"type":"`
	if len(data) < len(open) || string(data[:len(open)]) != open {
		return "", false
	}
	for i := len(open); i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return string(data[len(open):i]), i > len(open)
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
	}
	return "", false
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = trimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
