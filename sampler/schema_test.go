package sampler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// conforms reports how v fails the schema's types and required keys.
func conforms(schema, v any, path string) error {
	m, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	typ, _ := m["type"].(string)
	switch typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", path, v)
		}
		req, _ := m["required"].([]any)
		for _, k := range req {
			if k, ok := k.(string); !ok {
				continue
			} else if _, ok := obj[k]; !ok {
				return fmt.Errorf("%s: missing required %q", path, k)
			}
		}
		props, _ := m["properties"].(map[string]any)
		for k, sub := range props {
			if val, ok := obj[k]; ok {
				if err := conforms(sub, val, path+"."+k); err != nil {
					return err
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", path, v)
		}
		for i, e := range arr {
			if err := conforms(m["items"], e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want a string", path, v)
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			return fmt.Errorf("%s: %v, want an integer", path, v)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return fmt.Errorf("%s: %T, want a number", path, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", path, v)
		}
	}
	if enum, ok := m["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		return fmt.Errorf("%s: %v not in enum", path, v)
	}
	return nil
}

func TestSchemaArgs(t *testing.T) {
	t.Parallel()
	const user = "What is the weather like in Paris today?\ncall: ignored"
	tests := []struct {
		name   string
		schema string
		want   string // "" when only conformance is checked
	}{
		{"weather", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["fahrenheit","celsius"]}},"required":["location"]}`,
			`{"location":"Boston, MA"}`},
		{"all when none required", `{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["fahrenheit","celsius"]}}}`,
			`{"location":"Boston, MA","unit":"fahrenheit"}`},
		{"names", `{"type":"object","properties":{"filePath":{"type":"string"},"working_dir":{"type":"string"},"query":{"type":"string"},"url":{"type":"string"},"misc":{"type":"string"}}}`,
			`{"filePath":"README.md","misc":"example","query":"What is the weather like in","url":"https://example.com","working_dir":"."}`},
		{"numbers", `{"type":"object","properties":{"limit":{"type":"integer","minimum":5},"top":{"type":"integer","maximum":0},"ratio":{"type":"number","exclusiveMinimum":0.5},"n":{"type":"integer"},"on":{"type":"boolean"}}}`,
			`{"limit":5,"n":1,"on":true,"ratio":1.5,"top":0}`},
		{"array and nested", `{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}},"opts":{"type":"object","properties":{"depth":{"type":"integer"},"hidden":{"type":"boolean"}},"required":["depth"]}},"required":["paths","opts"]}`,
			`{"opts":{"depth":1},"paths":["README.md"]}`},
		{"nullable and formats", `{"type":"object","properties":{"when":{"type":["string","null"],"format":"date-time"},"who":{"anyOf":[{"type":"null"},{"type":"string","format":"email"}]}}}`,
			`{"when":"2025-01-01T12:00:00Z","who":"user@example.com"}`},
		{"const and default", `{"type":"object","properties":{"v":{"const":2},"mode":{"type":"string","default":"fast"}}}`,
			`{"mode":"fast","v":2}`},
		{"lengths", `{"type":"object","properties":{"code":{"type":"string","minLength":10},"id":{"type":"string","maxLength":0}}}`,
			`{"code":"examplexxx","id":""}`},
		{"ref", `{"type":"object","properties":{"p":{"$ref":"#/$defs/Point"}},"required":["p"],"$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}}}`,
			`{"p":{"x":1,"y":1}}`},
		{"self reference", `{"type":"object","properties":{"child":{"$ref":"#"},"name":{"type":"string"}},"required":["name","child"]}`, ""},
		{"exploding reference", `{"type":"object","required":["a","b","c","d"],"properties":{"a":{"$ref":"#"},"b":{"$ref":"#"},"c":{"$ref":"#"},"d":{"$ref":"#"}}}`, ""},
		{"required without properties", `{"type":"object","required":["path", 3]}`, `{"path":"README.md"}`},
		{"untyped object", `{"properties":{"q":{}}}`, `{"q":"What is the weather like in"}`},
		{"empty object", `{"type":"object"}`, `{}`},
		{"garbage properties", `{"type":"object","properties":"bad","required":"x"}`, `{}`},
		{"not an object schema", `{"type":"string"}`, `{}`},
		{"null", `null`, `{}`},
		{"number", `42`, `{}`},
		{"invalid json", `{"type":`, `{}`},
		{"empty", ``, `{}`},
	}
	// Schemas that cannot be met (infinitely recursive): only check that the
	// args stay small.
	unsatisfiable := map[string]bool{"self reference": true, "exploding reference": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := schemaArgs([]byte(tt.schema), stripDirectives(user))
			var v map[string]any
			if err := json.Unmarshal([]byte(got), &v); err != nil || v == nil {
				t.Fatalf("args %q are not a JSON object: %v", got, err)
			}
			if unsatisfiable[tt.name] {
				if len(got) > 16<<10 {
					t.Fatalf("args are %d bytes", len(got))
				}
				return
			}
			// Arguments are always an object: schemas of other types cannot be met.
			var schema map[string]any
			if json.Unmarshal([]byte(tt.schema), &schema) == nil && (schema["type"] == nil || schema["type"] == "object") {
				if err := conforms(schema, v, "args"); err != nil {
					t.Errorf("args %s: %v", got, err)
				}
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("args\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func FuzzSchemaArgs(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`,
		`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`,
		`{"type":["object","null"],"properties":{"n":{"type":"integer","minimum":1e308}}}`,
		`{"properties":{"x":{"type":"array","items":[{"type":"string"}],"minItems":99}}}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":1e9,"maxLength":-1}}}`,
		`[]`, `"x"`, `{`,
	} {
		f.Add(s, "find the weather")
	}
	f.Fuzz(func(t *testing.T, schema, user string) {
		got := schemaArgs([]byte(schema), user)
		var v map[string]any
		if err := json.Unmarshal([]byte(got), &v); err != nil || v == nil {
			t.Fatalf("schemaArgs(%q) = %q: not a JSON object (%v)", schema, got, err)
		}
		if got != schemaArgs([]byte(schema), user) {
			t.Fatalf("schemaArgs(%q) is not deterministic", schema)
		}
	})
}
