// Package mcptest runs real MCP servers (the official Go SDK's) for tests:
// over Streamable HTTP on a loopback port, and over stdio as a subprocess
// (the test binary itself, run again with an environment variable set).
//
// Every server has the same tools: add sums two numbers (read-only), fail
// reports an error, hang answers only when its call is abandoned, big
// returns 3 MB, and whoami returns the Authorization header it was sent
// (over HTTP).
package mcptest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewServer is an MCP server with the package's tools; a hanging call
// returns when stop is closed (or its call is cancelled).
func NewServer(stop <-chan struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	type addIn struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Add two numbers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(in.A + in.B)}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the disk is full")
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "Never answers."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		return nil, nil, errors.New("gave up")
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Returns 3 MB."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 3<<20)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Says who the caller is."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		who := "nobody"
		if req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get("Authorization") != "" {
			who = req.Extra.Header.Get("Authorization")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
	})
	return srv
}

// HTTP serves a server over Streamable HTTP on a loopback port until the
// test ends, and returns its URL and how many sessions clients have opened
// with it (initialize or server/discover requests).
func HTTP(t testing.TB) (url string, sessions func() int64) {
	t.Helper()
	stop := make(chan struct{})
	srv := NewServer(stop)
	var n atomic.Int64
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// A session begins with initialize, or with server/discover in
		// the protocol's newer versions.
		if bytes.Contains(body, []byte(`"method":"initialize"`)) || bytes.Contains(body, []byte(`"method":"server/discover"`)) {
			n.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) }) // first: hs.Close waits for a hanging call
	return hs.URL + "/mcp", n.Load
}

// stdioEnv marks the test binary run as a stdio MCP server.
const stdioEnv = "TETHER_MCPTEST_STDIO"

// ServeStdioIfChild serves the MCP server over stdin and stdout and exits
// when the process was started by StdioCommand; a test package's TestMain
// calls it first.
func ServeStdioIfChild() {
	if os.Getenv(stdioEnv) == "" {
		return
	}
	err := NewServer(nil).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, context.Canceled) {
		os.Stderr.WriteString("mcptest: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioCommand is the command and environment that run the test binary
// as a stdio MCP server (its TestMain must call ServeStdioIfChild).
func StdioCommand() (command []string, env []string) {
	return []string{os.Args[0]}, []string{stdioEnv + "=1"}
}
