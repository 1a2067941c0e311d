package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestCheckNumbers: a number no double holds is refused with the param
// where it is; text that spells one, and numbers a double holds (however
// small), are not.
func TestCheckNumbers(t *testing.T) {
	long := "1" + strings.Repeat("0", 400)
	for _, tt := range []struct {
		body, param string
	}{
		{`{"tools":[{"type":"function","name":"f","parameters":{"maximum":1e999}}]}`, "tools[0].parameters.maximum"},
		{`{"tools":[{"type":"function","name":"f","parameters":{"enum":[1,-1E+400]}}]}`, "tools[0].parameters.enum[1]"},
		{`{"text":{"format":{"type":"json_schema","name":"s","schema":{"minimum":` + long + `}}}}`, "text.format.schema.minimum"},
		{`{"metadata":{"a":"1e999"},"temperature":1e-999,"max_output_tokens":1e308,"input":"1e999 and ` + long + `"}`, ""},
		{`{"n":123.456e-7,"m":0.` + long + `}`, ""},
	} {
		perr := checkNumbers([]byte(tt.body), "")
		switch {
		case tt.param == "" && perr != nil:
			t.Errorf("%.60s: refused: %v", tt.body, perr)
		case tt.param != "" && (perr == nil || perr.Code != CodeInvalidValue || perr.Param != tt.param):
			t.Errorf("%.60s: %v, want invalid_value at %s", tt.body, perr, tt.param)
		}
	}
	// On every decoder of a client's JSON.
	if _, perr := DecodeCreateRequest([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","maximum":1e999}}]}`)); perr == nil || perr.Param != "tools[0].parameters.maximum" {
		t.Errorf("create: %v", perr)
	}
	if _, _, perr := DecodeClientEvent([]byte(`{"type":"response.append","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x","n":1e999}]}]}`)); perr == nil || perr.Param != "input[0].output[0].n" {
		t.Errorf("append: %v", perr)
	}
	if _, perr := DecodeChatRequest([]byte(`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"maximum":1e999}}}]}`)); perr == nil || perr.Code != CodeInvalidValue {
		t.Errorf("chat: %v", perr)
	}
}

// FuzzCheckNumbers holds checkNumbers to encoding/json: a JSON text is
// refused exactly when encoding/json cannot decode one of its numbers.
func FuzzCheckNumbers(f *testing.F) {
	for _, s := range []string{`{"a":1e999}`, `[1,2,-3.5e308]`, `"1e999"`, `{"b":[1e-999,{"c":1E+309}]}`, `0`, `{"d":"x","e":` + strings.Repeat("9", 310) + `}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			checkNumbers(data, "") // must not panic
			return
		}
		var v any
		err := json.Unmarshal(data, &v)
		var te *json.UnmarshalTypeError
		overflow := errors.As(err, &te) && strings.HasPrefix(te.Value, "number")
		if perr := checkNumbers(data, ""); (perr != nil) != overflow {
			t.Fatalf("%q: checkNumbers %v; encoding/json %v", data, perr, err)
		}
	})
}

// TestClientJSONEchoed: what a request keeps as the client wrote it (a
// tool's parameters) comes back with its invalid UTF-8 and lone
// surrogates replaced; an object naming a member twice is refused, with
// the param where it is.
func TestClientJSONEchoed(t *testing.T) {
	req, perr := DecodeCreateRequest([]byte("{\"model\":\"m\",\"input\":\"hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"description\":\"a\\ud800b\xffc\\ud83d\\ude00\"}}]}"))
	if perr != nil {
		t.Fatal(perr)
	}
	if got := string(req.Tools[0].Parameters); got != "{\"description\":\"a\uFFFDb\uFFFDc😀\"}" {
		t.Errorf("parameters %s", got)
	}
	for _, body := range []string{
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","type":"string"}}]}`,
		`{"model":"m","model":"n","input":"hi"}`,
	} {
		_, perr := DecodeCreateRequest([]byte(body))
		if perr == nil || perr.Code != CodeInvalidJSON || !strings.Contains(perr.Message, "twice") {
			t.Errorf("%s: %v", body, perr)
		}
	}
	if _, perr := DecodeCreateRequest([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","type":"string"}}]}`)); perr.Param != "tools[0].parameters.type" {
		t.Errorf("param %q", perr.Param)
	}
}
