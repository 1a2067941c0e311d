// Package hostedtools indexes the tools tether runs on the server side,
// one package each, which plug into the seams package runtime declares
// (runtime imports none of them; cmd/tether wires them in):
//
//   - websearch: the hosted web_search tool, a runtime.Tool, searching an
//     embedded corpus with bleve, a directory of files, or SearXNG.
//   - mcp: the client half of the hosted mcp tool, a runtime.MCPClient,
//     reaching MCP servers through the official Go SDK.
//
// This package itself holds no code.
package hostedtools
