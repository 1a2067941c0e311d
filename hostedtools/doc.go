// Package hostedtools holds the tools tether runs on the server side. Each
// implements runtime.Tool, the interface the sampling loop dispatches a
// model's calls through (declared by runtime, its consumer; this package
// does not import it). The loop cannot tell a hosted tool from the client's
// functions; that is what makes the suspended and cached-state designs
// comparable.
//
// WebSearch is the hosted web_search tool. It asks a Searcher, which is
// either an Index (an in-process full-text index; by default over the Go
// standard library documentation embedded in this package, or over a
// directory of files given with --search-corpus) or SearXNG (a metasearch
// engine reached over HTTP, for real web results).
//
// MCP is the client half of the hosted mcp tool: it reaches the MCP
// servers requests name (Streamable HTTP, through the official Go SDK,
// github.com/modelcontextprotocol/go-sdk), checking each URL against an
// allow-list before any connection, or the servers the operator configured
// by label (stdio commands included), and lists and calls their tools with
// a timeout and an output cap. The rollout's side (the mcp_list_tools and
// mcp_call items, approvals) is package runtime's.
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
// this one must ignore them.
package hostedtools
