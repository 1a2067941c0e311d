package runtime

import (
	"net/http"

	"github.com/tether-run/tether/protocol"
)

// handleModels serves GET /v1/models: OpenAI's list of the models served
// here, or, when the Codex CLI asks (it sends its version as client_version),
// the catalog Codex reads its models' capabilities from.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("client_version") {
		writeJSON(w, http.StatusOK, s.codexCatalog())
		return
	}
	list := protocol.List[protocol.Model]{Object: "list", Data: []protocol.Model{}}
	for _, name := range s.ModelNames() {
		list.Data = append(list.Data, s.modelObject(name))
	}
	writeJSON(w, http.StatusOK, list)
}

// handleModel serves GET /v1/models/{id}: the model, or model_not_found.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, perr := s.model(id); perr != nil {
		writeError(w, perr)
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(id))
}

func (s *Server) modelObject(name string) protocol.Model {
	m := protocol.Model{ID: name, Object: "model", Created: 0, OwnedBy: "tether"}
	if se, ok := s.models[name].(SimulatedEngineSampler); ok {
		m.SimulatedEngine = se.SimulatedEngine()
	}
	return m
}

// codexInstructions is what Codex sends as its instructions to tether's
// models in place of its built-in prompt. The simulated models do not read
// it; it says what they are to whoever reads a request.
const codexInstructions = `You are Codex, a coding agent, served by tether: a simulated model that follows the "call:" directives in the user's message (docs/models.md) and otherwise answers with generated text. Use the tools you are given to read, run and edit files in the workspace.`

// codexCatalog describes every model served here as the Codex CLI wants
// it: Codex's own tools (exec_command for commands, apply_patch as a
// freeform tool for edits) offered to it, its calls in parallel, no
// reasoning effort sent (the simulated models take none), its context
// window when the server knows it (Codex compacts before it is full).
func (s *Server) codexCatalog() protocol.CodexModels {
	names := s.ModelNames()
	cat := protocol.CodexModels{Models: make([]protocol.CodexModel, 0, len(names))}
	for i, name := range names {
		cat.Models = append(cat.Models, protocol.CodexModel{
			Slug:                     name,
			DisplayName:              name,
			Description:              "A model served by tether.",
			BaseInstructions:         codexInstructions,
			SupportedReasoningLevels: []protocol.CodexReasoning{},
			ShellType:                "unified_exec",
			ApplyPatchToolType:       "freeform",
			TruncationPolicy:         protocol.CodexTruncation{Mode: "bytes", Limit: 10_000},
			SupportsParallelCalls:    true,
			ExperimentalTools:        []string{},
			InputModalities:          []string{"text", "image"},
			Visibility:               "list",
			SupportedInAPI:           true,
			Priority:                 i,
			ContextWindow:            int64(contextWindow(s.models[name])),
		})
	}
	return cat
}
