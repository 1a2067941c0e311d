// Package safety is tether's lexical safety classifier: the pre-inference
// check a production API runs over the text a request brings (OpenAI's
// servers run model classifiers; this is their cost stand-in, real work
// proportional to the text). It finds, in one pass, the phrases of a
// shipped word list (case-insensitive for ASCII) and credentials that
// match well-known secret formats (API keys, access tokens, private key
// blocks). It flags; it never blocks or rewrites: what a flag costs is the
// point, not what it decides.
//
// The matching is github.com/coregx/ahocorasick's multi-pattern automaton,
// so the cost is one linear scan whatever the list's size.
package safety
