package protocol

import (
	"encoding/json"
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
func (t Tool) MarshalJSON() ([]byte, error) {
	if t.Type != ToolFunction && t.Raw != nil {
		return t.Raw, nil
	}
	if t.Parameters == nil {
		t.Parameters = json.RawMessage("null")
	}
	return json.Marshal(wireTool(t))
}

// UnmarshalJSON keeps the raw form of every tool. A field that means
// different things in different types (computer_use_preview's environment
// is a string, shell's an object) is read only for the type it belongs to.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var w struct {
		wireTool
		Environment json.RawMessage `json:"environment"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type == ToolShell && !isNull(w.Environment) {
		w.wireTool.Environment = new(ShellEnvironment)
		if err := json.Unmarshal(w.Environment, w.wireTool.Environment); err != nil {
			return err
		}
	}
	w.Raw = append(json.RawMessage(nil), b...)
	*t = Tool(w.wireTool)
	return nil
}

// ToolChoice says which tool the model must, may or may not call. The zero
// value is "auto".
type ToolChoice struct {
	Mode     string   // none, auto or required; "" means auto
	Function string   // the one function to call, when forced
	Allowed  []string // allowed_tools: function names the model may call
}

// MarshalJSON writes the string or object form.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	switch {
	case c.Function != "":
		return json.Marshal(map[string]string{"type": "function", "name": c.Function})
	case c.Allowed != nil:
		type ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		refs := make([]ref, len(c.Allowed))
		for i, n := range c.Allowed {
			refs[i] = ref{"function", n}
		}
		mode := c.Mode
		if mode == "" {
			mode = "auto"
		}
		return json.Marshal(struct {
			Type  string `json:"type"`
			Mode  string `json:"mode"`
			Tools []ref  `json:"tools"`
		}{"allowed_tools", mode, refs})
	case c.Mode == "":
		return []byte(`"auto"`), nil
	}
	return json.Marshal(c.Mode)
}

// UnmarshalJSON accepts "none" | "auto" | "required", {"type":"function","name"},
// and {"type":"allowed_tools","mode","tools":[...]}.
func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*c = ToolChoice{}
		return json.Unmarshal(b, &c.Mode)
	}
	var w struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	switch w.Type {
	case "function":
		if w.Name == "" {
			return Invalid(CodeMissingRequired, "tool_choice.name", "Missing required parameter: 'tool_choice.name'.")
		}
		*c = ToolChoice{Mode: "required", Function: w.Name}
	case "allowed_tools":
		names := make([]string, 0, len(w.Tools))
		for _, t := range w.Tools {
			names = append(names, t.Name)
		}
		*c = ToolChoice{Mode: w.Mode, Allowed: names}
	default:
		return Invalid(CodeInvalidValue, "tool_choice.type", "Invalid value: '%s'. Supported tool_choice types are: 'function' and 'allowed_tools'.", w.Type)
	}
	return nil
}
