package websearch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
)

// stdlibPackage is the import path of a pkg.go.dev source URL.
func stdlibPackage(url string) string {
	p := strings.TrimPrefix(url, "https://pkg.go.dev/")
	p, _, _ = strings.Cut(p, "#")
	return p
}

func TestIndexFindsStdlibPackage(t *testing.T) {
	t.Parallel()
	ix := stdlibIndex(t)
	// The wanted package must be among the first three results: exact
	// ranks move with the Go release the corpus was generated from.
	tests := []struct {
		query string
		want  []string
	}{
		{"parse a URL query string", []string{"net/url"}},
		{"sort a slice", []string{"sort", "slices"}},
		{"read a file line by line", []string{"bufio", "os"}},
		{"context with timeout", []string{"context"}},
		{"environment variable", []string{"os"}},
		{"decode png image", []string{"image/png"}},
		{"convert string to int", []string{"strconv"}},
		{"wait for goroutines to finish", []string{"sync"}},
		{"ParseQuery", []string{"net/url"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			got := search(t, ix, tt.query, 5)
			if len(got) != 5 {
				t.Fatalf("got %d results, want 5: %v", len(got), urls(got))
			}
			var pkgs []string
			for _, s := range got[:3] {
				pkgs = append(pkgs, stdlibPackage(s.URL))
			}
			if !slices.ContainsFunc(pkgs, func(p string) bool { return slices.Contains(tt.want, p) }) {
				t.Errorf("top 3 = %v, want one of %v; all results: %v", pkgs, tt.want, urls(got))
			}
			for _, s := range got {
				checkSource(t, s)
				if !strings.HasPrefix(s.URL, "https://pkg.go.dev/") {
					t.Errorf("URL %q is not a pkg.go.dev URL", s.URL)
				}
			}
		})
	}
}

// checkSource checks what every source must be: a url source with a title
// and a short, single-line snippet.
func checkSource(t *testing.T, s protocol.WebSearchSource) {
	t.Helper()
	if s.Type != "url" || s.URL == "" || s.Title == "" {
		t.Errorf("source %+v: want type url, a URL and a title", s)
	}
	if s.Snippet == "" {
		t.Errorf("source %s: empty snippet", s.URL)
	}
	if n := utf8.RuneCountInString(s.Snippet); n > snippetLen {
		t.Errorf("source %s: snippet has %d runes, want <= %d", s.URL, n, snippetLen)
	}
	if strings.ContainsAny(s.Snippet, "\n\t") || strings.Contains(s.Snippet, "  ") {
		t.Errorf("source %s: snippet %q has uncollapsed white space", s.URL, s.Snippet)
	}
}

func TestDefaultCorpus(t *testing.T) {
	t.Parallel()
	docs, err := DefaultCorpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 1000 {
		t.Fatalf("DefaultCorpus has %d documents, want the whole standard library (thousands)", len(docs))
	}
	seen := make(map[string]bool, len(docs))
	for _, d := range docs {
		if !strings.HasPrefix(d.URL, "https://pkg.go.dev/") || d.Title == "" || d.Body == "" {
			t.Fatalf("document %+.80v: want a pkg.go.dev URL, a title and a body", d)
		}
		if seen[d.URL] {
			t.Errorf("duplicate document URL %s", d.URL)
		}
		seen[d.URL] = true
	}
	for _, url := range []string{
		"https://pkg.go.dev/net/url",
		"https://pkg.go.dev/net/url#Values",
		"https://pkg.go.dev/bufio#Scanner",
		"https://pkg.go.dev/builtin#append",
	} {
		if !seen[url] {
			t.Errorf("DefaultCorpus has no document %s", url)
		}
	}
	for _, d := range docs {
		if strings.Contains(d.URL, "/internal") || strings.Contains(d.URL, "/vendor/") || strings.HasPrefix(d.URL, "https://pkg.go.dev/cmd/") {
			t.Errorf("DefaultCorpus holds a non-public package: %s", d.URL)
		}
	}
}

var smallCorpus = []Document{
	{URL: "https://example.test/url", Title: "net/url.ParseQuery", Body: "func ParseQuery(query string) (Values, error)\n    ParseQuery parses the URL-encoded query string and returns a map."},
	{URL: "https://example.test/sort", Title: "Sorting slices", Body: "Use slices.Sort to sort a slice of ordered values in place.\n\nSorting is stable with SortStableFunc."},
	{URL: "https://example.test/bread", Title: "Baking bread", Body: "Knead the dough, let it rise, bake it.\n\nBread keeps for days in a cloth."},
	{URL: "https://example.test/fish", Title: "Fishing", Body: "A rod, a line and patience.\n\nThe fish bite at dawn, when the water is calm and the light is low."},
}

func TestIndexSearch(t *testing.T) {
	t.Parallel()
	ix := newTestIndex(t, smallCorpus)
	tests := []struct {
		name, query string
		limit       int
		want        []string // URLs, in order
	}{
		{"title and body", "bake bread", 5, []string{"https://example.test/bread"}},
		{"camelCase identifiers split", "parse query", 5, []string{"https://example.test/url"}},
		{"query identifier split", "ParseQuery", 5, []string{"https://example.test/url"}},
		{"stemming", "sorted slices", 5, []string{"https://example.test/sort"}},
		{"case folded", "FISHING", 5, []string{"https://example.test/fish"}},
		{"no match", "quantum chromodynamics", 5, nil},
		{"only stop words", "the and of", 5, nil},
		{"ranked by relevance, limited", "bread fish dough rise bake", 1, []string{"https://example.test/bread"}},
		{"zero limit means SearchLimit", "a rod a line and the dough", 0, []string{"https://example.test/fish", "https://example.test/bread"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := search(t, ix, tt.query, tt.limit)
			if !slices.Equal(urls(got), tt.want) {
				t.Errorf("Search(%q, %d) = %v, want %v", tt.query, tt.limit, urls(got), tt.want)
			}
			for _, s := range got {
				checkSource(t, s)
			}
		})
	}
}

func TestIndexSnippetIsBestPassage(t *testing.T) {
	t.Parallel()
	ix := newTestIndex(t, smallCorpus)
	got := search(t, ix, "when do fish bite", 1)
	if len(got) != 1 {
		t.Fatalf("got %v, want the fishing document", urls(got))
	}
	want := "The fish bite at dawn, when the water is calm and the light is low."
	if got[0].Snippet != want {
		t.Errorf("snippet = %q, want the matching paragraph %q", got[0].Snippet, want)
	}
}

func TestIndexSearchErrors(t *testing.T) {
	t.Parallel()
	ix := newTestIndex(t, smallCorpus)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		query string
		want  error
	}{
		{"empty query", context.Background(), "", ErrEmptyQuery},
		{"white space query", context.Background(), " \t\n", ErrEmptyQuery},
		{"cancelled", cancelled, "bread", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ix.Search(tt.ctx, tt.query, 5)
			if !errors.Is(err, tt.want) || got != nil {
				t.Errorf("Search = %v, %v; want nil, %v", urls(got), err, tt.want)
			}
		})
	}
}

func TestIndexLongQuery(t *testing.T) {
	t.Parallel()
	ix := newTestIndex(t, smallCorpus)
	// Far more distinct terms than bleve allows in one query: the query is
	// cut, not refused.
	var b strings.Builder
	b.WriteString("bread ")
	for i := range 5000 {
		b.WriteString("w")
		b.WriteString(strings.Repeat("x", i%7+1))
		b.WriteString(string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + " ")
	}
	got := search(t, ix, b.String(), 5)
	if len(got) == 0 || got[0].URL != "https://example.test/bread" {
		t.Errorf("Search(long query) = %v, want the bread document first", urls(got))
	}
}

func TestEmptyIndex(t *testing.T) {
	t.Parallel()
	ix := newTestIndex(t, nil)
	if got := search(t, ix, "anything", 5); len(got) != 0 {
		t.Errorf("empty index found %v", urls(got))
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40) + "Needle sentence starts here. " + strings.Repeat("tail ", 100)
	long = strings.TrimSpace(long)
	tests := []struct {
		name, s      string
		at, n        int
		want         string // exact, when set
		prefix, has  string
		wantEllipsis bool
	}{
		{name: "short unchanged", s: "short text", at: 0, n: 20, want: "short text"},
		{name: "clipped from start", s: long, at: 0, n: 50, prefix: "word word", wantEllipsis: true},
		{name: "clipped around match", s: long, at: strings.Index(long, "Needle"), n: 60, has: "Needle", wantEllipsis: true},
		{name: "multibyte", s: strings.Repeat("é", 400), at: 0, n: 300, wantEllipsis: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := clip(tt.s, tt.at, tt.n)
			if tt.want != "" && got != tt.want {
				t.Errorf("clip = %q, want %q", got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > tt.n {
				t.Errorf("clip has %d runes, want <= %d: %q", n, tt.n, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("clip cut a rune: %q", got)
			}
			if !strings.HasPrefix(got, tt.prefix) || !strings.Contains(got, tt.has) {
				t.Errorf("clip = %q, want prefix %q containing %q", got, tt.prefix, tt.has)
			}
			if tt.wantEllipsis != strings.HasSuffix(got, "…") {
				t.Errorf("clip = %q, want ellipsis %v", got, tt.wantEllipsis)
			}
		})
	}
}

func TestCollapseSpace(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"  a  b\n\n\tc  ", "a b c"},
		{"func F()\n    F does.", "func F() F does."},
	}
	for _, tt := range tests {
		if got := collapseSpace(tt.in); got != tt.want {
			t.Errorf("collapseSpace(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func BenchmarkSearch(b *testing.B) {
	ix := stdlibIndex(b)
	queries := []string{"parse a URL query string", "sort a slice", "read a file line by line", "http server graceful shutdown", "json decode into struct"}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := ix.Search(ctx, queries[i%len(queries)], SearchLimit); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkNewIndexDefaultCorpus(b *testing.B) {
	docs, err := DefaultCorpus()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ix, err := NewIndex(docs)
		if err != nil {
			b.Fatal(err)
		}
		ix.Close()
	}
}
