package protocol

import "strings"

// Runner says who runs a tool's calls.
type Runner int

// Runners.
const (
	// RunsOnClient: the client executes the calls. In cached-state turns a
	// call ends the response with the call open; in a suspended rollout it
	// parks the rollout until response.append brings the output.
	RunsOnClient Runner = iota
	// RunsHosted: tether runs the calls in the sampling loop (web_search).
	RunsHosted
	// Unavailable: a hosted type this server does not run; a request that
	// offers it is refused (CodeToolNotAvailable).
	Unavailable
)

// RunnerOf is who runs calls of t: the one rule for every tool type.
// Everything the model calls that executes on the user's side (functions,
// namespaces' members, custom tools, shells with a local environment,
// apply_patch, computer use, and tool search in client mode) is the
// client's; web_search is tether's own; the rest are hosted services that
// tether does not have.
func RunnerOf(t Tool) Runner {
	switch t.Type.Canonical() {
	case ToolFunction, ToolNamespace, ToolCustom, ToolLocalShell, ToolApplyPatch, ToolComputer, ToolComputerUsePreview:
		return RunsOnClient
	case ToolShell:
		if t.Environment == nil || t.Environment.Type == "local" {
			return RunsOnClient
		}
	case ToolToolSearch:
		if t.Execution == "client" {
			return RunsOnClient
		}
	case ToolWebSearch, ToolMCP:
		return RunsHosted
	}
	return Unavailable
}

// Canonical is the type t stands for: web_search for its dated and preview
// aliases, t itself otherwise.
func (t ToolType) Canonical() ToolType {
	switch t {
	case ToolWebSearchPreview, "web_search_2025_08_26", "web_search_preview_2025_03_11":
		return ToolWebSearch
	}
	return t
}

// toolTypes are the tool types the API defines, in the order an error
// lists them.
var toolTypes = []ToolType{ToolFunction, ToolNamespace, ToolCustom, ToolLocalShell, ToolShell, ToolApplyPatch,
	ToolComputer, ToolComputerUsePreview, ToolToolSearch, ToolWebSearch, ToolWebSearchPreview,
	ToolFileSearch, ToolCodeInterpreter, ToolImageGeneration, ToolMCP, ToolProgrammatic}

func knownToolType(t ToolType) bool {
	switch t {
	case "web_search_2025_08_26", "web_search_preview_2025_03_11":
		return true
	}
	for _, k := range toolTypes {
		if k == t {
			return true
		}
	}
	return false
}

// quotedList is 'a', 'b' and 'c'.
func quotedList[T ~string](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		switch {
		case i == len(xs)-1 && i > 0:
			b.WriteString(" and ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + string(x) + "'")
	}
	return b.String()
}

// unavailable is the refusal of t, which RunnerOf says this server does
// not run, with what to do instead where there is something.
func unavailable(t Tool, param string) *Error {
	const runs = "this server runs web_search and mcp itself and leaves function, namespace, custom, local_shell, shell (local environment), apply_patch, computer and tool_search (client execution) tools to the client"
	var how string
	switch t.Type {
	case ToolShell:
		how = "Shell tools with a '" + t.Environment.Type + "' environment run in a hosted container, which this server does not have: set \"environment\": {\"type\": \"local\"} to run the commands on the client."
	case ToolToolSearch:
		how = "Hosted tool search is not available here: set \"execution\": \"client\" to search on the client."
	default:
		how = "The hosted '" + string(t.Type) + "' tool is not available on this server; " + runs + "."
	}
	return Invalid(CodeToolNotAvailable, param+".type", "%s", how)
}

func validateTools(tools []Tool) *Error {
	if len(tools) > MaxTools {
		return Invalid(CodeInvalidValue, "tools", "Invalid 'tools': at most %d tools are allowed, got %d.", MaxTools, len(tools))
	}
	names := make(map[string]bool, len(tools)) // functions, custom tools and namespaces share one space
	for i, t := range tools {
		param := IndexParam("tools", i)
		if perr := validateTool(t, param, names, false); perr != nil {
			return perr
		}
	}
	return nil
}

// validateTool checks one definition at param; names holds the names taken
// at its level. inNamespace is set for a namespace's members.
func validateTool(t Tool, param string, names map[string]bool, inNamespace bool) *Error {
	switch {
	case t.Type == "":
		return Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	case inNamespace && t.Type == ToolNamespace:
		return Invalid(CodeInvalidValue, param+".type", "Invalid value: 'namespace'. A namespace cannot contain a namespace: its tools are 'function' and 'custom' tools.")
	case inNamespace && t.Type != ToolFunction && t.Type != ToolCustom:
		return Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. The tools of a namespace are 'function' and 'custom' tools.", t.Type)
	case !knownToolType(t.Type):
		return Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported tool types are: %s.", t.Type, quotedList(toolTypes))
	}
	switch t.Type {
	case ToolFunction:
		if perr := validateFunction(t, param, names); perr != nil {
			return perr
		}
	case ToolCustom:
		if perr := claimName(t.Name, param+".name", names); perr != nil {
			return perr
		}
		if perr := validateFormat(t.Format, param+".format"); perr != nil {
			return perr
		}
	case ToolNamespace:
		if perr := claimName(t.Name, param+".name", names); perr != nil {
			return perr
		}
		if len(t.Tools) == 0 {
			return Invalid(CodeMissingRequired, param+".tools", "Missing required parameter: '%s.tools': a namespace holds at least one tool.", param)
		}
		members := make(map[string]bool, len(t.Tools))
		for j, m := range t.Tools {
			if perr := validateTool(m, IndexParam(param+".tools", j), members, true); perr != nil {
				return perr
			}
		}
	case ToolShell:
		if t.Environment != nil {
			switch t.Environment.Type {
			case "local", "container_auto", "container_reference":
			default:
				return Invalid(CodeInvalidValue, param+".environment.type", "Invalid value: '%s'. Supported values are: 'local', 'container_auto' and 'container_reference'.", t.Environment.Type)
			}
		}
	case ToolMCP:
		if perr := validateMCPServer(t.MCP, param, names); perr != nil {
			return perr
		}
	case ToolToolSearch:
		switch t.Execution {
		case "", "server", "client":
		default:
			return Invalid(CodeInvalidValue, param+".execution", "Invalid value: '%s'. Supported values are: 'server' and 'client'.", t.Execution)
		}
	}
	if RunnerOf(t) == Unavailable {
		return unavailable(t, param)
	}
	return nil
}

// claimName checks a tool name and takes it in names.
func claimName(name, param string, names map[string]bool) *Error {
	if perr := validateName(name, param); perr != nil {
		return perr
	}
	if names[name] {
		return Invalid(CodeInvalidValue, param, "Duplicate tool name '%s': the names of functions, custom tools and namespaces must be unique (a namespace's tools, within it).", name)
	}
	names[name] = true
	return nil
}

// validateFormat checks a custom tool's input format.
func validateFormat(f *CustomFormat, param string) *Error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text":
	case "grammar":
		switch f.Syntax {
		case "lark", "regex":
		case "":
			return Invalid(CodeMissingRequired, param+".syntax", "Missing required parameter: '%s.syntax'.", param)
		default:
			return Invalid(CodeInvalidValue, param+".syntax", "Invalid value: '%s'. Supported grammar syntaxes are: 'lark' and 'regex'.", f.Syntax)
		}
		if f.Definition == "" {
			return Invalid(CodeMissingRequired, param+".definition", "Missing required parameter: '%s.definition'.", param)
		}
	case "":
		return Invalid(CodeMissingRequired, param+".type", "Missing required parameter: '%s.type'.", param)
	default:
		return Invalid(CodeInvalidValue, param+".type", "Invalid value: '%s'. Supported format types are: 'text' and 'grammar'.", f.Type)
	}
	return nil
}
