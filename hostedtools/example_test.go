package hostedtools_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tether-run/tether/hostedtools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

func ExampleIndex() {
	ix, err := hostedtools.NewIndex([]hostedtools.Document{
		{URL: "https://example.com/tea", Title: "Making tea", Body: "Boil water. Steep the leaves for three minutes."},
		{URL: "https://example.com/coffee", Title: "Making coffee", Body: "Grind the beans. Pour hot water over them."},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	sources, err := ix.Search(context.Background(), "how long to steep tea", 5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sources[0].URL)
	fmt.Println(sources[0].Snippet)
	// Output:
	// https://example.com/tea
	// Boil water. Steep the leaves for three minutes.
}

func ExampleWebSearch() {
	docs, err := hostedtools.DefaultCorpus() // the Go standard library documentation
	if err != nil {
		log.Fatal(err)
	}
	ix, err := hostedtools.NewIndex(docs)
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	var tool runtime.Tool = hostedtools.NewWebSearch(ix) // as a tether server calls it
	call := protocol.Call{Type: protocol.ItemFunctionCall, ID: "ws_1", CallID: "call_1", Name: "web_search", Input: `{"query":"parse a URL query string"}`}
	item, err := tool.Call(context.Background(), call, func(e protocol.Event) {
		fmt.Println(protocol.Header(e).Type)
	})
	if err != nil {
		log.Fatal(err)
	}
	ws := item.(*protocol.WebSearchCall)
	fmt.Println(ws.Status, ws.Action.Query, len(ws.Action.Sources))
	// Output:
	// response.web_search_call.in_progress
	// response.web_search_call.searching
	// response.web_search_call.completed
	// completed parse a URL query string 5
}

// An MCP server on this machine (here the official SDK's, serving one
// tool), listed and called as a request's mcp tool names it.
func ExampleMCP() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct{ A, B int }) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer hs.Close()

	m := hostedtools.NewMCP(hostedtools.MCPOptions{}) // loopback servers only
	ctx := context.Background()
	s, err := m.Connect(ctx, protocol.MCPServer{ServerLabel: "calc", ServerURL: hs.URL})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	out, _, err := s.Call(ctx, tools[0].Name, `{"A": 40, "B": 2}`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tools[0].Name, out)
	fmt.Println(m.Check(protocol.MCPServer{ServerLabel: "web", ServerURL: "https://mcp.example.com"}) != nil)
	// Output:
	// add 42
	// true
}
