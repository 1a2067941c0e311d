// Package websearch is tether's hosted web_search tool. Tool implements
// runtime.Tool, the interface the sampling loop dispatches a model's calls
// through; the loop cannot tell a hosted tool from the client's functions,
// which is what makes the suspended and cached-state designs comparable.
//
// Tool asks a Searcher, which is either an Index (an in-process full-text
// index; by default over the Go standard library documentation embedded in
// this package, or over a directory of files given with --search-corpus)
// or SearXNG (a metasearch engine reached over HTTP, for real web results).
//
// This package is not a search engine. The Index exists so that web_search
// does real, deterministic, offline work with realistic latency and useful
// results: the machines tether runs on have no internet, and a benchmark
// must not depend on one. It ranks a few thousand documents well; it is
// not built for millions, and it keeps everything in memory.
//
// The Index uses bleve (github.com/blevesearch/bleve/v2) because it is a
// maintained, pure-Go full-text engine with language analysis (stemming,
// stop words, camelCase splitting of identifiers) and BM25 scoring, which
// is what a hand-rolled inverted index would have grown into. Snippets are
// picked by this package from the best-matching passage of each hit, which
// keeps bleve's index free of stored fields and term vectors.
//
// Importing this package imports bleve, which starts four analysis worker
// goroutines (bleve_index_api.AnalysisWorker) when it is initialized; they
// live for the whole process, and goleak checks in packages that import
// this one must ignore them. Package runtime does not import it: a program
// that serves no web_search pays for none of that.
package websearch
