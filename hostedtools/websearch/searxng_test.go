package websearch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
)

// searxngJSON is a response in SearXNG's documented JSON format
// (https://docs.searxng.org/dev/search_api.html, GET /search?format=json),
// shaped like a real instance's answer: top-level query, number_of_results,
// results, answers, corrections, infoboxes, suggestions and
// unresponsive_engines; each result has url, title, content and
// engine-specific fields this package ignores. There is no SearXNG instance
// on the test machines; this fixture stands in for one.
const searxngJSON = `{
  "query": "go maps",
  "number_of_results": 0,
  "results": [
    {"url": "https://go.dev/blog/maps", "title": "Go maps in action", "content": "A map is a hash table.\n  Go provides a built-in map type that implements a hash table.",
     "engine": "duckduckgo", "parsed_url": ["https", "go.dev", "/blog/maps", "", "", ""], "template": "default.html",
     "engines": ["duckduckgo", "bing"], "positions": [1, 2], "score": 3.5, "category": "general"},
    {"url": "", "title": "A result without a URL is skipped", "content": "x", "engine": "wikidata"},
    {"url": "https://pkg.go.dev/maps", "title": "maps package -\n maps - Go Packages", "content": "` + "LONG" + `",
     "engine": "bing", "engines": ["bing"], "positions": [3], "score": 0.3, "category": "general", "publishedDate": null},
    {"url": "https://go.dev/ref/spec#Map_types", "title": "Map types", "content": "", "engine": "google"}
  ],
  "answers": [],
  "corrections": [],
  "infoboxes": [],
  "suggestions": ["golang maps"],
  "unresponsive_engines": [["brave", "timeout"]]
}`

var longContent = strings.Repeat("Package maps defines various functions useful with maps of any type. ", 10)

// searxngServer serves SearXNG-shaped responses: status and body per
// request, and records the request it got.
func searxngServer(t *testing.T, status int, body string) (*httptest.Server, *http.Request) {
	t.Helper()
	var got http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = *r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestSearXNG(t *testing.T) {
	t.Parallel()
	body := strings.Replace(searxngJSON, "LONG", longContent, 1)
	srv, req := searxngServer(t, http.StatusOK, body)
	s := NewSearXNG(srv.URL+"/", srv.Client())
	tests := []struct {
		limit int
		want  []string
	}{
		{5, []string{"https://go.dev/blog/maps", "https://pkg.go.dev/maps", "https://go.dev/ref/spec#Map_types"}},
		{2, []string{"https://go.dev/blog/maps", "https://pkg.go.dev/maps"}},
		{0, []string{"https://go.dev/blog/maps", "https://pkg.go.dev/maps", "https://go.dev/ref/spec#Map_types"}},
	}
	for _, tt := range tests {
		got := search(t, s, "go maps & more", tt.limit)
		if !slices.Equal(urls(got), tt.want) {
			t.Errorf("Search(limit %d) = %v, want %v", tt.limit, urls(got), tt.want)
		}
	}
	if req.URL.Path != "/search" || req.URL.Query().Get("q") != "go maps & more" || req.URL.Query().Get("format") != "json" || req.Method != http.MethodGet {
		t.Errorf("request = %s %s, want GET /search?q=...&format=json", req.Method, req.URL)
	}

	got := search(t, s, "go maps", 5)
	want := []protocol.WebSearchSource{
		{Type: "url", URL: "https://go.dev/blog/maps", Title: "Go maps in action", Snippet: "A map is a hash table. Go provides a built-in map type that implements a hash table."},
		{Type: "url", URL: "https://pkg.go.dev/maps", Title: "maps package - maps - Go Packages"},
		{Type: "url", URL: "https://go.dev/ref/spec#Map_types", Title: "Map types"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if !strings.HasPrefix(got[1].Snippet, "Package maps defines") || !strings.HasSuffix(got[1].Snippet, "…") {
		t.Errorf("long content snippet = %q, want it clipped with an ellipsis", got[1].Snippet)
	}
	checkSource(t, got[1])
	got[1].Snippet = ""
	if !slices.Equal(got, want) {
		t.Errorf("sources:\n got %+v\nwant %+v", got, want)
	}
}

func TestSearXNGErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		query   string
		wantErr string // substring of the error
	}{
		{"server error", http.StatusInternalServerError, "boom", "q", "HTTP 500"},
		{"json format disabled", http.StatusForbidden, "Forbidden", "q", "search.formats"},
		{"rate limited", http.StatusTooManyRequests, "", "q", "HTTP 429"},
		{"HTML instead of JSON", http.StatusOK, "<html><body>SearXNG</body></html>", "q", "not SearXNG JSON"},
		{"truncated JSON", http.StatusOK, `{"results": [{"url": "https://a.test"`, "q", "not SearXNG JSON"},
		{"wrong shape", http.StatusOK, `{"results": {"url": "https://a.test"}}`, "q", "not SearXNG JSON"},
		{"no results array", http.StatusOK, `{"error": "engine failure"}`, "q", `no "results"`},
		{"null", http.StatusOK, `null`, "q", `no "results"`},
		{"empty query", http.StatusOK, searxngJSON, "  ", "empty search query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := searxngServer(t, tt.status, tt.body)
			got, err := NewSearXNG(srv.URL, srv.Client()).Search(context.Background(), tt.query, 5)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Search = %v, %v; want an error containing %q", urls(got), err, tt.wantErr)
			}
		})
	}
}

func TestSearXNGNoResults(t *testing.T) {
	t.Parallel()
	srv, _ := searxngServer(t, http.StatusOK, `{"query":"zzz","number_of_results":0,"results":[],"answers":[],"corrections":[],"infoboxes":[],"suggestions":[],"unresponsive_engines":[]}`)
	got, err := NewSearXNG(srv.URL, srv.Client()).Search(context.Background(), "zzz", 5)
	if err != nil || len(got) != 0 {
		t.Errorf("Search = %v, %v; want no sources and no error", got, err)
	}
}

func TestSearXNGUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if got, err := NewSearXNG(url, nil).Search(context.Background(), "q", 5); err == nil {
		t.Errorf("Search against a closed server = %v, want an error", urls(got))
	}
}

func TestSearXNGHonoursContext(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // a slow engine: answers only when the client gives up
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := NewSearXNG(srv.URL, srv.Client()).Search(ctx, "q", 5)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Search = %v, want context.Canceled", err)
	}
}

func TestNewSearXNGDefaultClient(t *testing.T) {
	t.Parallel()
	if got := NewSearXNG("http://127.0.0.1:1", nil).client.Timeout; got != 10*time.Second {
		t.Errorf("default client timeout = %v, want 10s", got)
	}
}
