package protocol

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// jsonReason turns an encoding/json error into a short, user-facing reason.
func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return "'" + wireField(te.Field) + "' must be " + article(te.Type.Kind().String()) + ", not " + te.Value
		}
		return "expected " + article(te.Type.Kind().String()) + ", got " + te.Value
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "malformed JSON at byte " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()
	}
	return err.Error()
}

// wireField drops the Go names of embedded structs that encoding/json puts in
// UnmarshalTypeError.Field ("CreateRequest.model"), leaving the wire path.
func wireField(f string) string {
	for _, embedded := range []string{"CreateRequest.", "EventHeader."} {
		f = strings.TrimPrefix(f, embedded)
	}
	return f
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

func indexParam(param string, i int) string {
	return param + "[" + strconv.Itoa(i) + "]"
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
