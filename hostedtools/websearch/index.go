package websearch

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/camelcase"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bleveindex "github.com/blevesearch/bleve_index_api"

	"github.com/tether-run/tether/protocol"
)

// Document is one searchable document: a web page, a file, or a piece of
// package documentation.
type Document struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

// Index is an in-memory full-text index over a fixed set of documents. It is
// built once and then only searched; Search is safe for concurrent use. An
// Index runs one bleve goroutine until Close.
type Index struct {
	bleve    bleve.Index
	docs     []Document        // by bleve document id (its position); read-only
	analyzer analysis.Analyzer // the index's analyzer, to match snippets the way the index matched hits
}

const (
	analyzerName = "tether_text"
	fieldTitle   = "title"
	fieldBody    = "body"
	// titleBoost weighs a title match against a body match. Measured on
	// the default corpus, 1 to 2 rank about equally well; higher lets
	// identifiers that merely contain the query words (debug/dwarf.LineFile
	// for "read a file line by line") win.
	titleBoost = 1.5

	// batchSize is how many documents go into one in-memory segment. One
	// segment for the whole default corpus doubles the peak memory of a
	// build and makes neither building nor searching faster.
	batchSize = 1000
	// maxQueryRunes bounds the terms one query can expand to, well below
	// bleve's limit on term searchers per query.
	maxQueryRunes = 1000
	// maxLimit bounds the hits one Search returns.
	maxLimit = 100
)

// indexedDocument is what bleve indexes of a Document: the URL is only
// returned, never searched.
type indexedDocument struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// NewIndex indexes docs. The documents are kept, not copied; the caller must
// not modify them afterwards. Indexing allocates many times the text's size
// along the way and leaves an index smaller than the text;
// BenchmarkNewIndexDefaultCorpus measures it on the default corpus (about
// 3,000 documents, 2.7 MB of text).
func NewIndex(docs []Document) (*Index, error) {
	m, err := newMapping()
	if err != nil {
		return nil, err
	}
	// An in-memory scorch index (an empty path). bleve.NewMemOnly picks the
	// older upsidedown engine over a gtreap store: on the default corpus it
	// builds several times slower, keeps about ten times the index, searches
	// slower, and has no statistics for BM25.
	b, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("websearch: new index: %w", err)
	}
	ix := &Index{bleve: b, docs: docs, analyzer: m.AnalyzerNamed(analyzerName)}
	if ix.analyzer == nil {
		b.Close()
		return nil, fmt.Errorf("websearch: analyzer %s not registered", analyzerName)
	}
	for start := 0; start < len(docs); start += batchSize {
		batch := b.NewBatch()
		for i, d := range docs[start:min(start+batchSize, len(docs))] {
			if err := batch.Index(strconv.Itoa(start+i), indexedDocument{Title: d.Title, Body: d.Body}); err != nil {
				b.Close()
				return nil, fmt.Errorf("websearch: index %s: %w", d.URL, err)
			}
		}
		if err := b.Batch(batch); err != nil {
			b.Close()
			return nil, fmt.Errorf("websearch: index batch: %w", err)
		}
	}
	return ix, nil
}

// newMapping indexes title and body with one analyzer: Unicode words,
// camelCase identifiers split ("ParseQuery" matches "parse query"), English
// possessives, lower case, English stop words and Porter stems. Nothing is
// stored and no term vectors are kept: hits are resolved to Documents by id,
// and snippets are picked here, not by bleve's highlighter.
func newMapping() (*mapping.IndexMappingImpl, error) {
	m := bleve.NewIndexMapping()
	err := m.AddCustomAnalyzer(analyzerName, map[string]any{
		"type":      custom.Name,
		"tokenizer": unicode.Name,
		"token_filters": []any{
			camelcase.Name,
			en.PossessiveName,
			lowercase.Name,
			en.StopName,
			porter.Name,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("websearch: analyzer: %w", err)
	}
	m.DefaultAnalyzer = analyzerName
	m.ScoringModel = bleveindex.BM25Scoring
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false

	text := bleve.NewTextFieldMapping()
	text.Analyzer = analyzerName
	text.Store = false
	text.IncludeTermVectors = false
	text.IncludeInAll = false
	text.DocValues = false

	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldTitle, text)
	dm.AddFieldMappingsAt(fieldBody, text)
	m.DefaultMapping = dm
	return m, nil
}

// Len reports how many documents the index holds.
func (ix *Index) Len() int { return len(ix.docs) }

// Close releases the index. Search must not be called after Close.
func (ix *Index) Close() error { return ix.bleve.Close() }

// Search returns up to limit sources for query, best first; limit <= 0 means
// SearchLimit, and more than 100 means 100. Each source's snippet is the passage of the document that
// matches most query terms, whitespace-collapsed and at most 300 characters.
// A query with no searchable words (only stop words) finds nothing.
func (ix *Index) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, ErrEmptyQuery
	}
	if r := []rune(query); len(r) > maxQueryRunes {
		query = string(r[:maxQueryRunes])
	}
	if limit <= 0 {
		limit = SearchLimit
	}
	limit = min(limit, maxLimit)

	title := bleve.NewMatchQuery(query)
	title.SetField(fieldTitle)
	title.SetBoost(titleBoost)
	body := bleve.NewMatchQuery(query)
	body.SetField(fieldBody)
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(title, body), limit, 0, false)

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := ix.bleve.SearchInContext(ctx, req)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, fmt.Errorf("websearch: search: %w", err)
	}
	if len(res.Hits) == 0 {
		return nil, nil
	}
	terms := ix.terms(query)
	out := make([]protocol.WebSearchSource, 0, len(res.Hits))
	for _, h := range res.Hits {
		i, err := strconv.Atoi(h.ID)
		if err != nil || i < 0 || i >= len(ix.docs) {
			return nil, fmt.Errorf("websearch: search: unknown document id %q", h.ID)
		}
		d := &ix.docs[i]
		out = append(out, protocol.WebSearchSource{
			Type:    "url",
			URL:     d.URL,
			Title:   d.Title,
			Snippet: ix.snippet(d.Body, terms),
		})
	}
	return out, nil
}
