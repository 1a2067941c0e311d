package sampler_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// TestCitesWebSearch: after a web search, the answer cites its sources'
// titles with url_citation annotations whose indices span the title in the
// streamed text, each emitted once the span has streamed.
func TestCitesWebSearch(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	items := protocol.Items{
		&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: `call: web_search {"query":"parse url"}`}}},
		&protocol.WebSearchCall{ID: "ws_1", Status: protocol.StatusCompleted, Action: &protocol.WebSearchAction{Type: "search", Query: "parse url",
			Sources: []protocol.WebSearchSource{
				{Type: "url", URL: "https://pkg.go.dev/net/url", Title: "net/url: Package url parses URLs — ünïcode"},
				{Type: "url", URL: "https://pkg.go.dev/net/http", Title: "net/http"},
			}}},
	}
	var text strings.Builder
	var cites []protocol.Annotation
	_, err = sampler.NewScripted(r, sampler.Timing{}).Sample(context.Background(), &sampler.Request{Items: items}, func(d sampler.Delta) {
		switch d.Kind {
		case sampler.TextDelta:
			text.WriteString(d.Text)
		case sampler.Citation:
			if d.Annotation.EndIndex > utf8.RuneCountInString(text.String()) {
				t.Errorf("citation %+v emitted before its span streamed", d.Annotation)
			}
			cites = append(cites, *d.Annotation)
		case sampler.CallStart:
			t.Fatalf("called %s after the search; want an answer", d.Name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cites) != 2 {
		t.Fatalf("%d citations in %q", len(cites), text.String())
	}
	runes := []rune(text.String())
	for _, c := range cites {
		if c.Type != "url_citation" || string(runes[c.StartIndex:c.EndIndex]) != c.Title {
			t.Errorf("citation %+v spans %q", c, string(runes[c.StartIndex:c.EndIndex]))
		}
	}
}

// TestSearchOnlyStep: a step that only searches is one step, even though the
// next step's calls follow its web_search_call items directly.
func TestSearchOnlyStep(t *testing.T) {
	t.Parallel()
	r, err := sampler.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	items := protocol.Items{
		&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{
			Text: "call: web_search {\"query\":\"a\"}\ncall: read_file {\"path\":\"x\"}"}}},
		&protocol.WebSearchCall{ID: "ws_1", Status: protocol.StatusCompleted, Action: &protocol.WebSearchAction{Type: "search", Query: "a"}},
	}
	next := func() []string {
		var calls []string
		sampler.NewScripted(r, sampler.Timing{}).Sample(context.Background(), &sampler.Request{Items: items}, func(d sampler.Delta) {
			if d.Kind == sampler.CallStart {
				calls = append(calls, d.Name)
			}
		})
		return calls
	}
	if got := next(); len(got) != 1 || got[0] != "read_file" {
		t.Fatalf("after the search step: calls %v, want [read_file]", got)
	}
	items = append(items,
		&protocol.FunctionCall{CallID: "c1", Name: "read_file", Arguments: `{"path":"x"}`},
		&protocol.FunctionCallOutput{CallID: "c1", Output: protocol.ToolOutput{Text: "contents"}})
	if got := next(); len(got) != 0 {
		t.Fatalf("after both steps: calls %v, want an answer", got)
	}
}
