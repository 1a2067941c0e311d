package mcp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/protocol"
)

// An MCP server on this machine (here the official SDK's, serving one
// tool), listed and called as a request's mcp tool names it.
func ExampleClient() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "calc", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct{ A, B int }) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true}))
	defer hs.Close()

	m := mcp.NewClient(mcp.Options{}) // loopback servers only
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
	fmt.Println(m.Check(protocol.MCPServer{ServerLabel: "web", ServerURL: "https://sdk.example.com"}) != nil)
	// Output:
	// add 42
	// true
}
