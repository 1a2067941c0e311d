package sampler

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
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
	if !schemaCheckable(req.Format.Schema) {
		return refuse("cannot be checked: text.format.schema has more than %d subschemas once its references are followed.", maxCheckedSubschemas)
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
	// Nothing outside the schema is ever loaded: the default loader would
	// read files (a "$ref" to file:///etc/...) on the client's word.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const at = "urn:tether:text-format"
	if err := c.AddResource(at, doc); err != nil {
		return refuse("cannot be checked: %v.", err)
	}
	sch, err := c.Compile(at)
	if err != nil {
		return refuse("cannot be checked against text.format.schema, which does not compile (only references inside it are followed): %v.", err)
	}
	if err := sch.Validate(v); err != nil {
		return refuse("does not match text.format.schema '%s': %v", req.Format.Name, err)
	}
	return nil
}

// maxCheckedSubschemas bounds the subschemas a json: directive is checked
// against, its references followed: a chain of definitions each referring
// to the next twice makes a validator's work exponential in the chain.
const maxCheckedSubschemas = 10000

// schemaCheckable reports whether schema, its local references followed
// (a reference back into the path that reached it is a recursion, taken
// once), has at most maxCheckedSubschemas subschemas.
func schemaCheckable(schema map[string]any) bool {
	budget := maxCheckedSubschemas
	var onPath []string
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			if budget--; budget < 0 {
				return false
			}
			if ref, ok := v["$ref"].(string); ok && !slices.Contains(onPath, ref) {
				if target, ok := protocol.ResolveLocalRef(schema, ref); ok {
					onPath = append(onPath, ref)
					ok := walk(target)
					onPath = onPath[:len(onPath)-1]
					if !ok {
						return false
					}
				}
			}
			for k, sub := range v {
				if k != "$ref" && k != "const" && k != "enum" && k != "default" && k != "examples" && !walk(sub) {
					return false
				}
			}
		case []any:
			for _, sub := range v {
				if !walk(sub) {
					return false
				}
			}
		}
		return true
	}
	return walk(schema)
}
