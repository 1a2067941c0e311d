package main

import (
	"slices"
	"testing"
)

// goDocOutput is abridged `go doc -all` output in the shape the splitter
// relies on: a package clause, the package comment (which may hold
// unindented lines and headings), then upper-case sections whose
// declarations start unindented and whose comments are indented.
const goDocOutput = `package url // import "net/url"

Package url parses URLs and implements query escaping.

See RFC 3986. This package generally follows RFC 3986.

CONSTANTS

const MaxLen = 10
    MaxLen is a limit.


VARIABLES

var ErrBad = errors.New("bad")

FUNCTIONS

func JoinPath(base string, elem ...string) (result string, err error)
    JoinPath returns a URL string with the provided path elements joined to
    the existing path of base.

func PathEscape(s string) string
    PathEscape escapes the string so it can be safely placed inside a URL path
    segment.


TYPES

type URL struct {
	Scheme string
	Host   string // "host" or "host:port"
}
    A URL represents a parsed URL (technically, a URI reference).

func Parse(rawURL string) (*URL, error)
    Parse parses a raw url into a URL structure.

func (u *URL) Port() string
    Port returns the port part of u.Host, without the leading colon.

func (u *URL) String() string

type Values map[string][]string
    Values maps a string key to a list of values.

func ParseQuery(query string) (Values, error)
    ParseQuery parses the URL-encoded query string.

func (v Values) Get(key string) string
`

func TestSymbolDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		methods    bool
		wantURLs   []string
		wantTitles map[string]string
	}{
		{
			name:    "by type",
			methods: false,
			wantURLs: []string{
				"https://pkg.go.dev/net/url",
				"https://pkg.go.dev/net/url#pkg-constants",
				"https://pkg.go.dev/net/url#pkg-variables",
				"https://pkg.go.dev/net/url#JoinPath",
				"https://pkg.go.dev/net/url#PathEscape",
				"https://pkg.go.dev/net/url#URL",
				"https://pkg.go.dev/net/url#Values",
			},
			wantTitles: map[string]string{
				"https://pkg.go.dev/net/url":               "net/url: Package url parses URLs and implements query escaping.",
				"https://pkg.go.dev/net/url#pkg-constants": "net/url constants",
				"https://pkg.go.dev/net/url#JoinPath":      "net/url.JoinPath: JoinPath returns a URL string with the provided path elements joined to the existing path of base.",
				"https://pkg.go.dev/net/url#URL":           "net/url.URL: A URL represents a parsed URL (technically, a URI reference).",
			},
		},
		{
			name:    "by symbol",
			methods: true,
			wantURLs: []string{
				"https://pkg.go.dev/net/url",
				"https://pkg.go.dev/net/url#pkg-constants",
				"https://pkg.go.dev/net/url#pkg-variables",
				"https://pkg.go.dev/net/url#JoinPath",
				"https://pkg.go.dev/net/url#PathEscape",
				"https://pkg.go.dev/net/url#Parse",
				"https://pkg.go.dev/net/url#URL.Port",
				"https://pkg.go.dev/net/url#URL",
				"https://pkg.go.dev/net/url#ParseQuery",
				"https://pkg.go.dev/net/url#Values",
			},
			wantTitles: map[string]string{
				"https://pkg.go.dev/net/url#URL.Port":   "net/url.URL.Port: Port returns the port part of u.Host, without the leading colon.",
				"https://pkg.go.dev/net/url#ParseQuery": "net/url.ParseQuery: ParseQuery parses the URL-encoded query string.",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			docs := symbolDocuments("net/url", goDocOutput, tt.methods)
			var got []string
			titles := map[string]string{}
			for _, d := range docs {
				got = append(got, d.URL)
				titles[d.URL] = d.Title
				if d.Body == "" {
					t.Errorf("%s: empty body", d.URL)
				}
			}
			if !slices.Equal(got, tt.wantURLs) {
				t.Errorf("URLs:\n got %q\nwant %q", got, tt.wantURLs)
			}
			for url, want := range tt.wantTitles {
				if titles[url] != want {
					t.Errorf("title of %s = %q, want %q", url, titles[url], want)
				}
			}
		})
	}
}

func TestDeclName(t *testing.T) {
	t.Parallel()
	tests := []struct{ line, decl, method string }{
		{"func ParseQuery(query string) (Values, error)", "ParseQuery", ""},
		{"func Sort[S ~[]E, E cmp.Ordered](x S)", "Sort", ""},
		{"type URL struct {", "URL", ""},
		{"type Values map[string][]string", "Values", ""},
		{"type Seq[V any] func(yield func(V) bool)", "Seq", ""},
		{"type Kind", "Kind", ""},
		{"func (s *Server) Shutdown(ctx context.Context) error", "", "Server.Shutdown"},
		{"func (l *List[T]) Push(v T)", "", "List.Push"},
		{"func (Values) Get(key string) string", "", "Values.Get"},
		{"const MaxLen = 10", "", ""},
	}
	for _, tt := range tests {
		if got := declName(tt.line); got != tt.decl {
			t.Errorf("declName(%q) = %q, want %q", tt.line, got, tt.decl)
		}
		if got := methodName(tt.line); got != tt.method {
			t.Errorf("methodName(%q) = %q, want %q", tt.line, got, tt.method)
		}
	}
}
