package websearch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
)

//go:generate go run ./internal/gencorpus -o corpus/stdlib.jsonl.gz

// stdlibCorpus is the Go standard library documentation as gzip-compressed
// JSON Lines of Document, written by internal/gencorpus.
//
//go:embed corpus/stdlib.jsonl.gz
var stdlibCorpus []byte

// DefaultCorpus decodes the embedded default corpus: the documentation of
// the Go standard library (go doc -all of every public package, and of
// builtin), one Document per package overview, per package's constants, per
// package's variables, per function, and per type with its constructors and
// methods (see internal/gencorpus for why). URLs point at pkg.go.dev. Each
// call decodes a fresh copy.
func DefaultCorpus() ([]Document, error) {
	return decodeCorpus(bytes.NewReader(stdlibCorpus))
}

// decodeCorpus reads gzip-compressed JSON Lines of Document.
func decodeCorpus(r io.Reader) ([]Document, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("websearch: corpus: %w", err)
	}
	defer zr.Close()
	var docs []Document
	dec := json.NewDecoder(bufio.NewReader(zr))
	for dec.More() {
		var d Document
		if err := dec.Decode(&d); err != nil {
			return nil, fmt.Errorf("websearch: corpus document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, d)
	}
	return docs, nil
}
