package protocol

import (
	"encoding/json"
	"unicode/utf8"
)

// The Conversations API keeps a conversation's items on the server: a client
// creates one, adds items to it, lists and deletes them, and a create that
// names it in `conversation` reads its items as context and adds its own
// input and output to it when it ends.

// Conversation is the conversation object of /v1/conversations.
type Conversation struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"` // conversation
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// ConversationRef names a conversation: a create sends its id or {"id": …};
// a response shows {"id": …}.
type ConversationRef struct {
	ID string `json:"id"`
}

// UnmarshalJSON takes the id as a string or as {"id": …}.
func (c *ConversationRef) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return unmarshal(b, &c.ID)
	}
	if len(b) == 0 || b[0] != '{' {
		return Invalid(CodeInvalidType, "conversation", "Invalid type for 'conversation': expected a string or an object.")
	}
	var w struct {
		ID string `json:"id"`
	}
	if err := unmarshal(b, &w); err != nil {
		return err
	}
	c.ID = w.ID
	return nil
}

// The API's bounds on what one request adds to a conversation.
const MaxConversationItems = 20

// ConversationItems is the body of POST /v1/conversations (with Metadata)
// and of POST /v1/conversations/{id}/items.
type ConversationItems struct {
	Items    Items
	Metadata map[string]string
}

// DecodeConversationItems decodes and checks such a body: at most
// MaxConversationItems items, valid as input items, and metadata within
// the API's bounds. needItems is true for items.create, which must add one.
func DecodeConversationItems(data []byte, needItems bool) (*ConversationItems, *Error) {
	var w struct {
		Items    json.RawMessage   `json:"items"`
		Metadata map[string]string `json:"metadata"`
	}
	if _, perr := unmarshalRequest(data, &w, ""); perr != nil {
		return nil, perr
	}
	body := &ConversationItems{Metadata: w.Metadata}
	if !isNull(w.Items) {
		items, perr := DecodeItems(w.Items, "items")
		if perr != nil {
			return nil, perr
		}
		body.Items = items
	}
	switch {
	case needItems && len(body.Items) == 0:
		return nil, Invalid(CodeMissingRequired, "items", "Missing required parameter: 'items'.")
	case len(body.Items) > MaxConversationItems:
		return nil, Invalid(CodeInvalidValue, "items", "Invalid 'items': at most %d items can be added at once, got %d.", MaxConversationItems, len(body.Items))
	}
	if perr := ValidateItems(body.Items, "items"); perr != nil {
		return nil, perr
	}
	for _, it := range body.Items {
		if it.ItemType() == ItemReference {
			return nil, Invalid(CodeInvalidValue, "items", "Invalid 'items': an item_reference cannot be added to a conversation; add the item itself.")
		}
	}
	if perr := ValidateMetadata(body.Metadata); perr != nil {
		return nil, perr
	}
	return body, nil
}

// DecodeConversationUpdate decodes POST /v1/conversations/{id}: its
// metadata, which replaces the conversation's.
func DecodeConversationUpdate(data []byte) (map[string]string, *Error) {
	var w struct {
		Metadata *map[string]string `json:"metadata"`
	}
	if _, perr := unmarshalRequest(data, &w, ""); perr != nil {
		return nil, perr
	}
	if w.Metadata == nil {
		return nil, Invalid(CodeMissingRequired, "metadata", "Missing required parameter: 'metadata'.")
	}
	if perr := ValidateMetadata(*w.Metadata); perr != nil {
		return nil, perr
	}
	return *w.Metadata, nil
}

// ValidateMetadata checks metadata against the API's bounds.
func ValidateMetadata(m map[string]string) *Error {
	if len(m) > MaxMetadataPairs {
		return Invalid(CodeInvalidValue, "metadata", "Invalid 'metadata': at most %d key-value pairs are allowed, got %d.", MaxMetadataPairs, len(m))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > MaxMetadataKeyLen || utf8.RuneCountInString(v) > MaxMetadataValueLen {
			return Invalid(CodeInvalidValue, "metadata", "Invalid 'metadata': keys are limited to %d characters and values to %d.", MaxMetadataKeyLen, MaxMetadataValueLen)
		}
	}
	return nil
}
