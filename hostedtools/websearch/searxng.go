package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
)

// maxSearXNGResponse bounds the body read from a SearXNG instance.
const maxSearXNGResponse = 8 << 20

// SearXNG searches the web through a SearXNG metasearch instance's JSON API:
// GET {base}/search?q=...&format=json. The instance must allow the json
// format (search.formats in its settings.yml); otherwise it answers 403.
// SearXNG is safe for concurrent use.
type SearXNG struct {
	base   string
	client *http.Client
}

// NewSearXNG returns a searcher for the instance at baseURL (for example
// http://127.0.0.1:8888). A nil client means one with a 10 s timeout.
func NewSearXNG(baseURL string, client *http.Client) *SearXNG {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &SearXNG{base: strings.TrimRight(baseURL, "/"), client: client}
}

// searxngResponse is the part of SearXNG's JSON search response used here.
// See https://docs.searxng.org/dev/search_api.html.
type searxngResponse struct {
	Results []struct {
		URL     string `json:"url"`
		Title   string `json:"title"`
		Content string `json:"content"`
	} `json:"results"`
}

// Search asks the instance for query and returns up to limit results (limit
// <= 0 means SearchLimit), skipping results without a URL. Each result's
// content, whitespace-collapsed and clipped to 300 characters, is the
// snippet. HTTP errors and responses that are not SearXNG JSON are errors.
func (s *SearXNG) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, ErrEmptyQuery
	}
	if limit <= 0 {
		limit = SearchLimit
	}
	u := s.base + "/search?" + url.Values{"q": {query}, "format": {"json"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("websearch: searxng: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("websearch: searxng: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSearXNGResponse+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("websearch: searxng: reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("websearch: searxng: %s: HTTP %s: %s", s.base, resp.Status, clip(collapseSpace(string(body)), 0, 200))
		if resp.StatusCode == http.StatusForbidden {
			msg += " (is the json format enabled in the instance's search.formats?)"
		}
		return nil, errors.New(msg)
	}
	if len(body) > maxSearXNGResponse {
		return nil, fmt.Errorf("websearch: searxng: response larger than %d bytes", maxSearXNGResponse)
	}
	var r searxngResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("websearch: searxng: response is not SearXNG JSON: %w", err)
	}
	if r.Results == nil {
		// A JSON document without "results" is not a search response
		// (an error page, a proxy's answer); "results": [] is.
		return nil, errors.New(`websearch: searxng: response has no "results" array`)
	}
	out := make([]protocol.WebSearchSource, 0, min(limit, len(r.Results)))
	for _, res := range r.Results {
		if len(out) == limit {
			break
		}
		if res.URL == "" {
			continue
		}
		out = append(out, protocol.WebSearchSource{
			Type:    "url",
			URL:     res.URL,
			Title:   collapseSpace(res.Title),
			Snippet: plainSnippet(res.Content),
		})
	}
	return out, nil
}
