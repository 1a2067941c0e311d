package sampler

import (
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// chunkFragments add to the property test's fragments what sits around a
// cut: a line feed then a letter, after punctuation, slashes, spaces and
// other line breaks.
var chunkFragments = append(slices.Clone(fragments),
	"\nfunc", "\n//", "\n\n\n", ")\n", "{\n", "\n}", " \n\nx", "\n\tif", "\n'", "\n's", ",\n", ".\n", "\n123", "\nÉ",
	"\n\t", "\n    return", "\n\t\t}", "\n\t\n", "\n \t", "\n\t\r\n", "\n\t\u00a0x", "\n\t\x7f", "\n  \u3000a")

// TestChunkedEncode: tokenizing a text in chunks gives exactly the tokens
// of the whole text, on real files (the fixture repository, the traces'
// tool outputs) and on random texts built to put odd neighbours around
// the cuts.
func TestChunkedEncode(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	var texts []string
	fs.WalkDir(FixtureRepo(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(FixtureRepo(), path)
			texts = append(texts, string(b))
		}
		return nil
	})
	traces, err := LoadTraces()
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range traces {
		for _, s := range tr.Steps {
			for _, c := range s.Calls {
				texts = append(texts, c.Output)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 9))
	for range 300 {
		var b strings.Builder
		for range 200 + rng.IntN(400) {
			b.WriteString(chunkFragments[rng.IntN(len(chunkFragments))])
		}
		texts = append(texts, b.String())
	}
	cuts := 0
	for i, s := range texts {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if !faithful(s) {
			continue
		}
		parts := chunks(s, 64, 16)
		if strings.Join(parts, "") != s {
			t.Fatalf("text %d: chunks do not join back to the text", i)
		}
		cuts += len(parts) - 1
		want := toTokens(nil, s, r)
		if got := r.encodeParallelN(nil, s, 64, 16); !slices.Equal(got, want) {
			t.Fatalf("text %d (%d bytes, %d chunks): chunked tokens differ from the whole text's\n%.300q", i, len(s), len(parts), s)
		}
	}
	if cuts < 400 {
		t.Errorf("only %d cuts over %d texts: the test does not exercise them", cuts, len(texts))
	}
}

// FuzzChunkedEncode checks chunked tokenizing against the whole text's,
// with chunks small enough that fuzzed inputs get cut.
func FuzzChunkedEncode(f *testing.F) {
	for _, s := range []string{"a\nb", "x)\nfunc f() {\n\treturn\n}\n", "// c\n//d\nword's\nWORD'S\n", " \n\nx\n\n y"} {
		f.Add(s)
	}
	r := renderer(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !faithful(s) {
			return
		}
		if got, want := r.encodeParallelN(nil, s, 16, 2), toTokens(nil, s, r); !slices.Equal(got, want) {
			t.Fatalf("%q: chunked %v, whole %v", s, got, want)
		}
	})
}

// BenchmarkEncodeLong tokenizes 32 KB of Go source whole and in chunks.
func BenchmarkEncodeLong(b *testing.B) {
	r := renderer(b)
	src, err := fs.ReadFile(FixtureRepo(), "units/table.go")
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(string(src), 1+(32<<10)/len(src))[:32<<10]
	for _, bc := range []struct {
		name string
		enc  func() []Token
	}{
		{"whole", func() []Token { return toTokens(nil, text, r) }},
		{"chunked", func() []Token { return r.encodeParallel(nil, text, chunkMin) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				bc.enc()
			}
		})
	}
}
