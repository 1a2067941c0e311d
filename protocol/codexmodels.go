package protocol

// The Codex CLI learns what a model can do (which shell tool to offer, whether
// to offer apply_patch and in which form, its context window, its reasoning
// efforts) from a catalog its provider serves on GET /models, which it asks
// with its version in a client_version query parameter. The catalog is not
// OpenAI's list of models: it is {"models":[…]} of the entries below, the
// shape codex-rs reads (protocol/src/openai_models.rs, ModelInfo). Without
// an entry for its model Codex falls back to defaults that offer no
// apply_patch tool.

// CodexModels is the body of a Codex model catalog.
type CodexModels struct {
	Models []CodexModel `json:"models"`
}

// CodexModel is one model's entry in a Codex model catalog. Codex requires
// every field here; the ones it defaults are left out.
type CodexModel struct {
	Slug        string `json:"slug"` // Codex matches its configured model to the longest slug that prefixes it
	DisplayName string `json:"display_name"`
	Description string `json:"description"`

	// BaseInstructions is what Codex sends as the instructions of every
	// request, in place of its built-in prompt.
	BaseInstructions string `json:"base_instructions"`

	DefaultReasoningLevel    *string           `json:"default_reasoning_level"` // nil: Codex sends no reasoning effort
	SupportedReasoningLevels []CodexReasoning  `json:"supported_reasoning_levels"`
	SupportsReasoningSummary bool              `json:"supports_reasoning_summaries"`
	SupportVerbosity         bool              `json:"support_verbosity"`
	DefaultVerbosity         *string           `json:"default_verbosity"`
	ShellType                string            `json:"shell_type"`            // default, local, unified_exec, shell_command or disabled
	ApplyPatchToolType       string            `json:"apply_patch_tool_type"` // freeform (a custom tool with a grammar) or function
	TruncationPolicy         CodexTruncation   `json:"truncation_policy"`
	SupportsParallelCalls    bool              `json:"supports_parallel_tool_calls"`
	ContextWindow            int64             `json:"context_window,omitzero"`
	ExperimentalTools        []string          `json:"experimental_supported_tools"`
	InputModalities          []string          `json:"input_modalities"` // text, image
	Visibility               string            `json:"visibility"`       // list, hide or none
	SupportedInAPI           bool              `json:"supported_in_api"`
	Priority                 int               `json:"priority"`
	Upgrade                  *CodexModelUpdate `json:"upgrade"`
}

// CodexReasoning is a reasoning effort a model offers.
type CodexReasoning struct {
	Effort      string `json:"effort"` // none, minimal, low, medium, high, xhigh
	Description string `json:"description"`
}

// CodexTruncation is how Codex cuts long tool outputs before it sends them.
type CodexTruncation struct {
	Mode  string `json:"mode"` // bytes or tokens
	Limit int64  `json:"limit"`
}

// CodexModelUpdate names a model Codex suggests moving to.
type CodexModelUpdate struct {
	Model             string `json:"model"`
	MigrationMarkdown string `json:"migration_markdown"`
}
