// Package mcp is the client half of tether's hosted mcp tool: a Client
// reaches the MCP servers requests name, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk, imported here as sdk), and
// lists and calls their tools with a timeout and an output cap. A Client
// is the runtime.MCPClient a server's Options.MCP takes.
//
// A request names a server by URL (Streamable HTTP), checked against an
// allow-list before any connection, or by the label of a server the
// operator configured (stdio commands included).
//
// The rollout's side of the tool (the mcp_list_tools and mcp_call items,
// approvals, one session per server and connection) is package runtime's.
// This package is not an MCP server.
package mcp
