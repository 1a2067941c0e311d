package protocol

import (
	"encoding/json"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// ItemConfigurationUpdate is the item type of a ConfigurationUpdate.
const ItemConfigurationUpdate ItemType = "configuration_update"

// ConfigurationUpdate changes the reasoning or text settings of the
// responses after it in a conversation, in OpenAI's Responses API: each
// setting holds until a later update replaces it. tether takes it in a
// history, keeps it as sent and renders it for the model; a response runs
// with its own request's reasoning and text all the same. Reasoning and
// Text are kept as the JSON they came as, checked as the API checks them.
type ConfigurationUpdate struct {
	ID        string          `json:"id,omitempty"`
	Reasoning json.RawMessage `json:"reasoning,omitempty"` // {"effort": …}
	Text      json.RawMessage `json:"text,omitempty"`      // {"format": {"type": "text"} or a json_schema}
}

func (*ConfigurationUpdate) ItemType() ItemType { return ItemConfigurationUpdate }
func (i *ConfigurationUpdate) ItemID() string   { return i.ID }

type wireConfigurationUpdate ConfigurationUpdate

func (i *ConfigurationUpdate) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemConfigurationUpdate), (*wireConfigurationUpdate)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *ConfigurationUpdate) MarshalJSON() ([]byte, error) { return Marshal(i) }

// ReasoningEfforts are the values of a reasoning effort, as openai-go
// lists them.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// validateConfigurationUpdate checks what an update sets: reasoning, text
// or both, the effort one of ReasoningEfforts, the text a format of the
// two an update may set.
func validateConfigurationUpdate(u *ConfigurationUpdate, p string) *Error {
	if isNull(u.Reasoning) && isNull(u.Text) {
		return Invalid(CodeMissingRequired, p+".reasoning", "Missing required parameter: '%s.reasoning' or '%s.text' (a configuration_update sets one or both).", p, p)
	}
	if !isNull(u.Reasoning) {
		var r struct {
			Effort *string `json:"effort"`
		}
		if err := unmarshal(u.Reasoning, &r); err != nil {
			return Invalid(CodeInvalidType, p+".reasoning", "Invalid '%s.reasoning': %s.", p, jsonReason(err))
		}
		if r.Effort != nil && !slices.Contains(ReasoningEfforts, *r.Effort) {
			return Invalid(CodeInvalidValue, p+".reasoning.effort", "Invalid '%s.reasoning.effort': '%s'. Supported values are: %s.", p, *r.Effort, quotedList(ReasoningEfforts))
		}
	}
	if !isNull(u.Text) {
		var t struct {
			Format *TextFormat `json:"format"`
		}
		if err := unmarshal(u.Text, &t); err != nil {
			return Invalid(CodeInvalidType, p+".text", "Invalid '%s.text': %s.", p, jsonReason(err))
		}
		if t.Format == nil {
			return Invalid(CodeMissingRequired, p+".text.format", "Missing required parameter: '%s.text.format'.", p)
		}
		return validateTextFormat(*t.Format, p+".text.format", "text", "json_schema")
	}
	return nil
}
