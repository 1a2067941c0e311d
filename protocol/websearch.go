package protocol

import "github.com/go-json-experiment/json/jsontext"

// ItemWebSearchCall is the item of a hosted web search.
const ItemWebSearchCall ItemType = "web_search_call"

// Web search progress events, in the order a search emits them.
const (
	EventWebSearchInProgress EventType = "response.web_search_call.in_progress"
	EventWebSearchSearching  EventType = "response.web_search_call.searching"
	EventWebSearchCompleted  EventType = "response.web_search_call.completed"
)

// WebSearchCall is a hosted web search the model ran: its query and, once
// completed, its sources. The sources travel with the item so that the
// results stay in the conversation whatever carries it next (cache, store,
// or a client re-sending the item over stateless HTTP).
type WebSearchCall struct {
	ID     string           `json:"id"`
	Status ItemStatus       `json:"status"` // in_progress, searching, completed, failed
	Action *WebSearchAction `json:"action,omitempty"`
	Agent  *AgentRef        `json:"agent,omitempty"` // the multi-agent beta's sub-agent that made it
}

// Web search call statuses beyond the common item statuses.
const (
	StatusSearching ItemStatus = "searching"
	StatusFailed    ItemStatus = "failed"
)

// WebSearchAction is what a web search did.
type WebSearchAction struct {
	Type    string            `json:"type"` // search
	Query   string            `json:"query"`
	Sources []WebSearchSource `json:"sources,omitempty"`
}

// WebSearchSource is one search result. OpenAI sends type and url; tether
// adds the title and snippet the model read.
type WebSearchSource struct {
	Type    string `json:"type"` // url
	URL     string `json:"url"`
	Title   string `json:"title,omitempty"`
	Snippet string `json:"snippet,omitempty"`
}

// WebSearchCallEvent is response.web_search_call.in_progress, .searching and
// .completed.
type WebSearchCallEvent struct {
	EventHeader
	OutputIndex int    `json:"output_index"`
	ItemID      string `json:"item_id"`
}

func (*WebSearchCall) ItemType() ItemType { return ItemWebSearchCall }

func (i *WebSearchCall) ItemID() string { return i.ID }

type wireWebSearchCall WebSearchCall

func (i *WebSearchCall) MarshalJSONTo(enc *jsontext.Encoder) error {
	return typedTo(enc, string(ItemWebSearchCall), (*wireWebSearchCall)(i))
}

// MarshalJSON is MarshalJSONTo, for encoding/json.
func (i *WebSearchCall) MarshalJSON() ([]byte, error) { return Marshal(i) }
