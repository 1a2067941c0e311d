package protocol

import (
	"encoding/json"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// ToolType names a tool.
type ToolType string

// Tool types: every type of the Responses API's tools array (see
// tooltypes.go for who runs which).
const (
	ToolFunction           ToolType = "function"
	ToolNamespace          ToolType = "namespace"
	ToolCustom             ToolType = "custom"
	ToolLocalShell         ToolType = "local_shell"
	ToolShell              ToolType = "shell"
	ToolApplyPatch         ToolType = "apply_patch"
	ToolComputer           ToolType = "computer"
	ToolComputerUsePreview ToolType = "computer_use_preview"
	ToolToolSearch         ToolType = "tool_search"
	ToolWebSearch          ToolType = "web_search"
	ToolWebSearchPreview   ToolType = "web_search_preview"
	ToolFileSearch         ToolType = "file_search"
	ToolCodeInterpreter    ToolType = "code_interpreter"
	ToolImageGeneration    ToolType = "image_generation"
	ToolMCP                ToolType = "mcp"
	ToolProgrammatic       ToolType = "programmatic_tool_calling"
)

// Tool is a tool definition offered to the model. Function tools echo back
// with description, parameters and strict always present (null when unset),
// as the spec requires; other tool types echo back as they were sent.
type Tool struct {
	Type        ToolType        `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`

	// Tools are a namespace's members: function and custom tools, which
	// the model calls by name with the namespace beside it.
	Tools []Tool `json:"tools,omitempty"`
	// Format is a custom tool's input format; nil is free text.
	Format *CustomFormat `json:"format,omitempty"`
	// Environment is where a shell tool's commands run; nil is local.
	Environment *ShellEnvironment `json:"environment,omitempty"`
	// Execution says who runs a tool_search: "server" (the default) or
	// "client".
	Execution string `json:"execution,omitempty"`
	// MCP is an mcp tool's server and filters.
	MCP *MCPServer `json:"-"`

	// Raw is the definition as the client sent it, for non-function tools.
	Raw json.RawMessage `json:"-"`
}

// CustomFormat is what a custom tool's input must be: free text, or text
// that a grammar accepts.
type CustomFormat struct {
	Type       string `json:"type"`                 // "text" or "grammar"
	Syntax     string `json:"syntax,omitempty"`     // grammar: "lark" or "regex"
	Definition string `json:"definition,omitempty"` // grammar: its source
}

// ShellEnvironment is a shell tool's environment; only its type matters to
// tether (the rest echoes back as sent).
type ShellEnvironment struct {
	Type string `json:"type"` // "local", "container_auto" or "container_reference"
}

type wireTool Tool

// MarshalJSON writes a function tool with all its fields, others verbatim.
func (t Tool) MarshalJSONTo(enc *jsontext.Encoder) error {
	if t.Type != ToolFunction && t.Raw != nil {
		return enc.WriteValue(jsontext.Value(t.Raw))
	}
	if t.Parameters == nil {
		t.Parameters = json.RawMessage("null")
	}
	return marshalTo(enc, wireTool(t))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (t Tool) MarshalJSON() ([]byte, error) { return Marshal(t) }

// UnmarshalJSON keeps the raw form of every tool. A field that means
// different things in different types (computer_use_preview's environment
// is a string, shell's an object) is read only for the type it belongs to.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var w struct {
		wireTool
		Environment json.RawMessage `json:"environment"`
	}
	if err := unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type == ToolShell && !isNull(w.Environment) {
		w.wireTool.Environment = new(ShellEnvironment)
		if err := unmarshal(w.Environment, w.wireTool.Environment); err != nil {
			return err
		}
	}
	if w.Type == ToolMCP {
		w.wireTool.MCP = new(MCPServer)
		if err := unmarshal(b, w.wireTool.MCP); err != nil {
			return err
		}
	}
	w.Raw = append(json.RawMessage(nil), b...)
	*t = Tool(w.wireTool)
	return nil
}

// UnmarshalJSONFrom is UnmarshalJSON, the path of a type error in the tool
// placed below the tool's own (tools[2].name, not name): see
// unmarshalPlaced.
func (t *Tool) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return unmarshalPlaced(dec, t.UnmarshalJSON)
}

// ToolChoice says which tool the model must, may or may not call. The zero
// value is "auto". At most one of Function, Custom and Builtin is set: the
// one tool the model must call.
type ToolChoice struct {
	Mode     string    // none, auto or required; "" means auto
	Function string    // {"type":"function","name"}: the one function to call
	Custom   string    // {"type":"custom","name"}: the one custom tool to call
	Builtin  ToolType  // {"type":"web_search_preview"}, {"type":"shell"}…: the one built-in tool to call
	Allowed  []ToolRef // allowed_tools: the tools the model may call; nil is every tool
}

// ToolRef names a tool in tool_choice: functions and custom tools by name,
// built-in tools by type.
type ToolRef struct {
	Type ToolType `json:"type"`
	Name string   `json:"name,omitempty"`
}

// Refers reports whether r names t.
func (r ToolRef) Refers(t Tool) bool {
	switch r.Type {
	case ToolFunction, ToolCustom:
		return t.Type == r.Type && t.Name == r.Name
	}
	return t.Type.Canonical() == r.Type.Canonical()
}

// Allows reports whether the choice lets the model call t (a top-level tool,
// or a namespace's member).
func (c ToolChoice) Allows(t Tool) bool {
	if c.Allowed == nil {
		return true
	}
	for _, r := range c.Allowed {
		if r.Refers(t) {
			return true
		}
	}
	return false
}

// builtinChoices are the tool types tool_choice may force by type alone.
var builtinChoices = []ToolType{ToolFileSearch, ToolWebSearchPreview, ToolWebSearch, ToolComputer, ToolComputerUsePreview, "computer_use",
	ToolImageGeneration, ToolCodeInterpreter, ToolProgrammatic, ToolApplyPatch, ToolShell, ToolLocalShell, ToolToolSearch, ToolMCP}

// MarshalJSON writes the string or object form.
func (c ToolChoice) MarshalJSONTo(enc *jsontext.Encoder) error {
	switch {
	case c.Function != "":
		return marshalTo(enc, ToolRef{ToolFunction, c.Function})
	case c.Custom != "":
		return marshalTo(enc, ToolRef{ToolCustom, c.Custom})
	case c.Builtin != "":
		return marshalTo(enc, ToolRef{Type: c.Builtin})
	case c.Allowed != nil:
		mode := c.Mode
		if mode == "" {
			mode = "auto"
		}
		return marshalTo(enc, struct {
			Type  string    `json:"type"`
			Mode  string    `json:"mode"`
			Tools []ToolRef `json:"tools"`
		}{"allowed_tools", mode, c.Allowed})
	case c.Mode == "":
		return enc.WriteToken(jsontext.String("auto"))
	}
	return marshalTo(enc, c.Mode)
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (c ToolChoice) MarshalJSON() ([]byte, error) { return Marshal(c) }

// UnmarshalJSONFrom is UnmarshalJSON, the path of a type error placed
// below tool_choice (unmarshalPlaced).
func (c *ToolChoice) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return unmarshalPlaced(dec, c.UnmarshalJSON)
}

// UnmarshalJSON accepts "none" | "auto" | "required", {"type":"function",
// "name"}, {"type":"custom","name"}, {"type": a built-in type},
// and {"type":"allowed_tools","mode","tools":[...]}.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ToolChoice{}
		return unmarshal(b, &c.Mode)
	}
	if len(b) == 0 || b[0] != '{' {
		return Invalid(CodeInvalidType, "tool_choice", "Invalid type for 'tool_choice': expected a string or an object.")
	}
	var w struct {
		Type  ToolType  `json:"type"`
		Name  string    `json:"name"`
		Mode  string    `json:"mode"`
		Tools []ToolRef `json:"tools"`
	}
	if err := unmarshal(b, &w); err != nil {
		return err
	}
	switch w.Type {
	case ToolFunction, ToolCustom:
		if w.Name == "" {
			return Invalid(CodeMissingRequired, "tool_choice.name", "Missing required parameter: 'tool_choice.name'.")
		}
		*c = ToolChoice{Mode: "required", Function: w.Name}
		if w.Type == ToolCustom {
			*c = ToolChoice{Mode: "required", Custom: w.Name}
		}
	case "allowed_tools":
		for i, r := range w.Tools {
			if perr := validateRef(r, IndexParam("tool_choice.tools", i)); perr != nil {
				return perr
			}
		}
		if w.Tools == nil {
			w.Tools = []ToolRef{}
		}
		*c = ToolChoice{Mode: w.Mode, Allowed: w.Tools}
	default:
		if !slices.Contains(builtinChoices, w.Type) {
			return Invalid(CodeInvalidValue, "tool_choice.type", "Invalid value: '%s'. Supported tool_choice types are: 'function', 'custom', 'allowed_tools' and the built-in tools %s.", w.Type, quotedList(builtinChoices))
		}
		*c = ToolChoice{Mode: "required", Builtin: w.Type}
	}
	return nil
}

// validateRef checks one entry of allowed_tools.
func validateRef(r ToolRef, param string) *Error {
	switch r.Type {
	case ToolFunction, ToolCustom:
		if r.Name == "" {
			return Invalid(CodeMissingRequired, param+".name", "Missing required parameter: '%s.name'.", param)
		}
	case "":
		return Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	default:
		if !knownToolType(r.Type) {
			return Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported tool types are: %s.", r.Type, quotedList(toolTypes))
		}
	}
	return nil
}
