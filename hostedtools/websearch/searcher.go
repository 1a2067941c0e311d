package websearch

import (
	"context"

	"github.com/tether-run/tether/protocol"
)

// Searcher runs one search and returns at most limit sources, best first.
// Implementations are safe for concurrent use and honour ctx.
type Searcher interface {
	Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error)
}
