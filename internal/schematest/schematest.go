// Package schematest is a test-only helper that validates JSON documents
// against the Open Responses OpenAPI component schemas, and hands tests the
// real OpenAI streams recorded for this project. Both are in testdata (its
// README.md names their sources and licences) and embedded, so every clone of
// the repository runs the tests that use them.
//
// It is meant to be imported from _test.go files only.
//
// Validation is delegated to github.com/santhosh-tekuri/jsonschema/v6; the
// OpenAPI document is registered as a single JSON Schema 2020-12 resource and
// each component is compiled from its JSON pointer
// (#/components/schemas/<Name>).
package schematest

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// specEnv is the environment variable that, when set, names the path of an
// Open Responses OpenAPI JSON document to validate against instead of the
// embedded one.
const specEnv = "TETHER_SPEC"

const (
	// specFile is the embedded spec, in testdata.
	specFile = "testdata/openresponses-openapi-2026-04-24.json"

	// docURL is the fake URL under which the OpenAPI document is registered
	// with the compiler. It is never read from disk.
	docURL = "file:///openresponses.json"

	schemaPtrPrefix = "#/components/schemas/"

	streamingEventSuffix = "StreamingEvent"

	// wsErrorSchema replaces the SSE error event schema on WebSocket.
	wsErrorSchema = "WebSocketErrorEvent"

	// streamIDField is the WebSocket-only top-level event field.
	streamIDField = "stream_id"
)

// testdata holds the spec and the recorded streams (testdata/README.md).
//
//go:embed testdata/*.json testdata/*.jsonl
var testdata embed.FS

// Validator validates JSON documents against the compiled Open Responses
// component schemas. It is immutable after [Load] and safe for concurrent use.
type Validator struct {
	// path names the spec the validator was compiled from, in messages.
	path string
	// spec is that document.
	spec []byte

	schemas map[string]*jsonschema.Schema
	// eventSchemas maps a streaming event "type" value to the name of its
	// *StreamingEvent component schema.
	eventSchemas map[string]string
	// closed records component schemas whose top-level additional
	// properties are restricted; WebSocket "stream_id" is stripped before
	// validating against them.
	closed map[string]bool
}

// loadSpec compiles the spec once per test binary.
var loadSpec = sync.OnceValues(load)

// Load returns the process-wide Validator, compiling the spec on first use.
// It is safe to call from parallel tests. When the spec cannot be read or
// compiled (TETHER_SPEC names a missing file, say), Load calls tb.Fatalf.
func Load(tb testing.TB) *Validator {
	tb.Helper()
	v, err := loadSpec()
	if err != nil {
		tb.Fatalf("schematest: %v", err)
	}
	return v
}

// load compiles the spec TETHER_SPEC names, or the embedded one.
func load() (*Validator, error) {
	if p := os.Getenv(specEnv); p != "" {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", specEnv, err)
		}
		return compile(p, raw)
	}
	raw, err := testdata.ReadFile(specFile)
	if err != nil {
		return nil, err
	}
	return compile("internal/schematest/"+specFile, raw)
}

// noLoader refuses every external load so that validation only ever uses the
// registered OpenAPI document.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schematest: external schema %q not allowed", url)
}

// compile compiles the spec raw, read from path.
func compile(path string, raw []byte) (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse spec %s: %w", path, err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec %s: top level is not an object", path)
	}
	// OpenAPI 3.1 schema objects are JSON Schema 2020-12 (plus annotation
	// keywords such as discriminator/example, which the library ignores).
	// OpenAPI 3.0 uses a different dialect (nullable, boolean
	// exclusiveMinimum, ...) that would be silently misinterpreted.
	ver, _ := root["openapi"].(string)
	if !strings.HasPrefix(ver, "3.1.") {
		return nil, fmt.Errorf("spec %s: openapi version %q unsupported (want 3.1.x)", path, ver)
	}
	if d, ok := root["jsonSchemaDialect"].(string); ok && d != "https://json-schema.org/draft/2020-12/schema" && d != "https://spec.openapis.org/oas/3.1/dialect/base" {
		return nil, fmt.Errorf("spec %s: jsonSchemaDialect %q unsupported", path, d)
	}
	components, _ := root["components"].(map[string]any)
	defs, _ := components["schemas"].(map[string]any)
	if len(defs) == 0 {
		return nil, fmt.Errorf("spec %s: no components/schemas", path)
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, fmt.Errorf("add spec resource: %w", err)
	}

	v := &Validator{
		path:         path,
		spec:         raw,
		schemas:      make(map[string]*jsonschema.Schema, len(defs)),
		eventSchemas: map[string]string{},
		closed:       map[string]bool{},
	}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		sch, err := c.Compile(docURL + schemaPtrPrefix + name)
		if err != nil {
			return nil, fmt.Errorf("spec %s: compile %s: %w", path, name, err)
		}
		v.schemas[name] = sch
		def, _ := defs[name].(map[string]any)
		v.closed[name] = restrictsExtraProps(def, streamIDField)
		if !strings.HasSuffix(name, streamingEventSuffix) {
			continue
		}
		typ, err := eventType(def)
		if err != nil {
			return nil, fmt.Errorf("spec %s: %s: %w", path, name, err)
		}
		if prev, dup := v.eventSchemas[typ]; dup {
			return nil, fmt.Errorf("spec %s: event type %q claimed by both %s and %s", path, typ, prev, name)
		}
		v.eventSchemas[typ] = name
	}
	if len(v.eventSchemas) == 0 {
		return nil, fmt.Errorf("spec %s: no *%s schemas", path, streamingEventSuffix)
	}
	if _, ok := v.schemas[wsErrorSchema]; !ok {
		return nil, fmt.Errorf("spec %s: no %s schema", path, wsErrorSchema)
	}
	return v, nil
}

// eventType reads properties.type.enum[0] (or properties.type.const) of a
// streaming event schema.
func eventType(def map[string]any) (string, error) {
	props, _ := def["properties"].(map[string]any)
	typ, _ := props["type"].(map[string]any)
	if enum, ok := typ["enum"].([]any); ok && len(enum) > 0 {
		if s, ok := enum[0].(string); ok {
			return s, nil
		}
	}
	if s, ok := typ["const"].(string); ok {
		return s, nil
	}
	return "", errors.New("properties.type has no string enum[0] or const")
}

// restrictsExtraProps reports whether def would reject an undeclared
// top-level property named prop (via additionalProperties or
// unevaluatedProperties, other than true/{}), unless def declares it.
func restrictsExtraProps(def map[string]any, prop string) bool {
	if props, ok := def["properties"].(map[string]any); ok {
		if _, declared := props[prop]; declared {
			return false
		}
	}
	for _, kw := range []string{"additionalProperties", "unevaluatedProperties"} {
		switch x := def[kw].(type) {
		case nil:
		case bool:
			if !x {
				return true
			}
		case map[string]any:
			if len(x) > 0 {
				return true
			}
		}
	}
	return false
}

// Schema validates raw against the component schema
// #/components/schemas/<name>. An unknown name is an error.
func (v *Validator) Schema(name string, raw []byte) error {
	inst, err := decode(name, raw)
	if err != nil {
		return err
	}
	return v.validate(name, inst)
}

// Response validates a response object against ResponseResource.
func (v *Validator) Response(raw []byte) error {
	return v.Schema("ResponseResource", raw)
}

// Compact validates a compaction result against CompactResource.
func (v *Validator) Compact(raw []byte) error {
	return v.Schema("CompactResource", raw)
}

// StreamEvent validates one streaming (SSE) event. The JSON "type" field
// selects the *StreamingEvent component schema whose properties.type.enum[0]
// equals it (e.g. "response.output_text.delta" ->
// ResponseOutputTextDeltaStreamingEvent, "error" -> ErrorStreamingEvent). An
// unknown or missing type is an error.
func (v *Validator) StreamEvent(raw []byte) error {
	obj, typ, err := decodeEvent(raw)
	if err != nil {
		return err
	}
	name, ok := v.eventSchemas[typ]
	if !ok {
		return fmt.Errorf("schematest: unknown streaming event type %q (no *%s schema has it)", typ, streamingEventSuffix)
	}
	return v.validate(name, obj)
}

// WebSocketEvent validates one server-to-client WebSocket event. It is like
// [Validator.StreamEvent] except that type "error" is validated against
// WebSocketErrorEvent, and an optional top-level "stream_id" (which must be a
// string) is accepted even if the event schema does not declare it.
func (v *Validator) WebSocketEvent(raw []byte) error {
	obj, typ, err := decodeEvent(raw)
	if err != nil {
		return err
	}
	name := wsErrorSchema
	if typ != "error" {
		var ok bool
		if name, ok = v.eventSchemas[typ]; !ok {
			return fmt.Errorf("schematest: unknown WebSocket event type %q (no *%s schema has it)", typ, streamingEventSuffix)
		}
	}
	if sid, present := obj[streamIDField]; present {
		if _, isStr := sid.(string); !isStr {
			return fmt.Errorf("schematest: %s: %q must be a string, got %T", name, streamIDField, sid)
		}
		if v.closed[name] {
			// Validate a shallow copy without stream_id.
			cp := make(map[string]any, len(obj))
			for k, val := range obj {
				if k != streamIDField {
					cp[k] = val
				}
			}
			obj = cp
		}
	}
	return v.validate(name, obj)
}

func (v *Validator) validate(name string, inst any) error {
	sch, ok := v.schemas[name]
	if !ok {
		return fmt.Errorf("schematest: no component schema %q in %s", name, v.path)
	}
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			// %#v renders the verbose tree with schema locations.
			return fmt.Errorf("schematest: does not conform to %s:\n%#v", name, ve)
		}
		return fmt.Errorf("schematest: does not conform to %s: %w", name, err)
	}
	return nil
}

func decode(name string, raw []byte) (any, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schematest: %s: invalid JSON: %w", name, err)
	}
	return inst, nil
}

func decodeEvent(raw []byte) (map[string]any, string, error) {
	inst, err := decode("event", raw)
	if err != nil {
		return nil, "", err
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("schematest: event is %s, not a JSON object", jsonKind(inst))
	}
	typ, ok := obj["type"].(string)
	if !ok {
		return nil, "", fmt.Errorf("schematest: event has no string \"type\" field (got %s)", jsonKind(obj["type"]))
	}
	return obj, typ, nil
}

func jsonKind(x any) string {
	switch x.(type) {
	case nil:
		return "null/absent"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	}
	return fmt.Sprintf("%T", x)
}

// Recordings returns the names of the recorded OpenAI streams, sorted. Each is
// a .jsonl file whose first line is "# request: " and the JSON body of the
// request that produced it, and whose every other line is one event OpenAI
// sent, as received.
func Recordings() []string {
	entries, err := testdata.ReadDir("testdata")
	if err != nil {
		panic(err) // embedded when the test binary was built: always there
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") {
			names = append(names, e.Name())
		}
	}
	return names
}

// Recording returns the recorded stream name, one of [Recordings]; for any
// other name it calls tb.Fatalf.
func Recording(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := testdata.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatalf("schematest: no recorded stream %q (have %s)", name, strings.Join(Recordings(), ", "))
	}
	return raw
}
