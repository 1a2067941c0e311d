package sampler

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tether-run/tether/protocol"
)

// answerPart is the text answer, in the form text.format asks for: free
// text; a JSON object holding it (json_object); or JSON made from the
// schema, as a tool's arguments are, its free-text fields from the answer
// (json_schema). A json: directive in the newest user message sets the
// answer in every form (checkJSONDirective has checked it).
func answerPart(req *Request) part {
	if j, ok := jsonDirective(newestUserText(req.Items)); ok {
		return part{text: j}
	}
	text, cites := answer(req.Items)
	switch f := req.Format; {
	case f == nil || f.Type == "" || f.Type == "text":
		return part{text: text, cites: cites}
	case f.Type == "json_object":
		b, _ := json.Marshal(map[string]string{"answer": text})
		return part{text: string(b)}
	}
	schema, err := json.Marshal(req.Format.Schema)
	if err != nil {
		schema = []byte("{}")
	}
	return part{text: schemaArgs(schema, text)}
}

// checkJSONDirective refuses a json: directive the answer cannot be: text
// that is not JSON; under json_object, JSON that is not an object; under
// json_schema, JSON the schema does not validate. The error, code
// invalid_directive, is the response's.
func checkJSONDirective(req *Request) error {
	j, ok := jsonDirective(newestUserText(req.Items))
	if !ok || req.Format == nil {
		return nil
	}
	refuse := func(format string, args ...any) error {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidDirective, "", "The json: directive "+format, args...)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(j))
	switch {
	case req.Format.Type == "json_object" || req.Format.Type == "json_schema":
		if err != nil {
			return refuse("is not JSON: %v.", err)
		}
	default:
		return nil
	}
	if _, isObj := v.(map[string]any); req.Format.Type == "json_object" && !isObj {
		return refuse("is not a JSON object, and text.format is json_object.")
	}
	if req.Format.Type != "json_schema" {
		return nil
	}
	raw, err := json.Marshal(req.Format.Schema)
	if err != nil {
		return refuse("cannot be checked: text.format.schema does not encode: %v.", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return refuse("cannot be checked: %v.", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("format.json", doc); err != nil {
		return refuse("cannot be checked: %v.", err)
	}
	sch, err := c.Compile("format.json")
	if err != nil {
		return refuse("cannot be checked against text.format.schema, which does not compile: %v.", err)
	}
	if err := sch.Validate(v); err != nil {
		return refuse("does not match text.format.schema '%s': %v", req.Format.Name, err)
	}
	return nil
}
