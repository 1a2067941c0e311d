package websearch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// SearchLimit is how many sources one web_search call returns.
const SearchLimit = 5

// Tool is the hosted web_search tool, a runtime.Tool: it runs the model's
// query through a Searcher and returns a web_search_call item carrying the
// sources. It is safe for concurrent use if its Searcher is (Index and
// SearXNG are).
type Tool struct {
	searcher Searcher
}

var _ runtime.Tool = (*Tool)(nil)

// New returns the web_search tool backed by s.
func New(s Searcher) *Tool {
	return &Tool{searcher: s}
}

// Definition returns the web_search tool definition.
func (*Tool) Definition() protocol.Tool {
	return protocol.Tool{Type: protocol.ToolWebSearch}
}

// webSearchArgs is what the model sends: {"query": "..."}.
type webSearchArgs struct {
	Query string `json:"query"`
}

// Call parses {"query": "..."} from call.Arguments, emits
// response.web_search_call.in_progress and .searching, searches, emits
// .completed, and returns a completed *protocol.WebSearchCall whose action
// holds the query and the sources. Nothing is emitted for arguments that do
// not parse. A failed or cancelled search returns an error after
// .searching and emits no .completed.
func (w *Tool) Call(ctx context.Context, call protocol.Call, emit func(protocol.Event)) (protocol.Item, error) {
	query, err := parseQuery(call.Input)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	emit(webSearchEvent(protocol.EventWebSearchInProgress))
	emit(webSearchEvent(protocol.EventWebSearchSearching))
	sources, err := w.searcher.Search(ctx, query, SearchLimit)
	if err != nil {
		return nil, fmt.Errorf("web_search %q: %w", query, err)
	}
	// A searcher that ignores ctx must not turn a cancelled call into a
	// completed one.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(sources) > SearchLimit {
		sources = sources[:SearchLimit]
	}
	emit(webSearchEvent(protocol.EventWebSearchCompleted))
	return &protocol.WebSearchCall{
		ID:     call.ID,
		Status: protocol.StatusCompleted,
		Action: &protocol.WebSearchAction{Type: "search", Query: query, Sources: sources},
	}, nil
}

func webSearchEvent(t protocol.EventType) protocol.Event {
	return &protocol.WebSearchCallEvent{EventHeader: protocol.EventHeader{Type: t}}
}

// parseQuery reads the query from a web_search call's arguments.
func parseQuery(arguments string) (string, error) {
	var args webSearchArgs
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "", fmt.Errorf(`%w: web_search arguments must be a JSON object {"query": "..."}: %v`, ErrInvalidArguments, err)
	}
	q := strings.TrimSpace(args.Query)
	if q == "" {
		return "", fmt.Errorf(`%w: web_search needs a non-empty "query"`, ErrInvalidArguments)
	}
	return q, nil
}
