package main

import (
	"context"
	"sync"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
)

// lazyIndex builds the full-text index on the first search, so that serve
// starts at once and servers that never search never pay for the index.
type lazyIndex struct {
	load func() ([]websearch.Document, error)

	once sync.Once
	ix   *websearch.Index
	err  error
}

func (l *lazyIndex) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	l.once.Do(func() {
		docs, err := l.load()
		if err != nil {
			l.err = err
			return
		}
		l.ix, l.err = websearch.NewIndex(docs)
	})
	if l.err != nil {
		return nil, l.err
	}
	return l.ix.Search(ctx, query, limit)
}

// webSearch is the hosted web_search tool: a SearXNG instance when one is
// given, else a local index over dir, else over the embedded corpus.
func webSearch(searxngURL, dir string) *websearch.Tool {
	if searxngURL != "" {
		return websearch.New(websearch.NewSearXNG(searxngURL, nil))
	}
	load := websearch.DefaultCorpus
	if dir != "" {
		load = func() ([]websearch.Document, error) { return websearch.LoadDir(dir) }
	}
	return websearch.New(&lazyIndex{load: load})
}
