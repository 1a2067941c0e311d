package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-run/tether/protocol"
)

// Session is a connection to one MCP server, which Client.Connect opens.
// ListTools and Call may be called concurrently; Close ends the session
// (and the command of a stdio server).
type Session struct {
	c  *Client
	cs *sdk.ClientSession
}

// Close ends the session.
func (s *Session) Close() error { return s.cs.Close() }

// ListTools lists the server's tools, as an mcp_list_tools item lists
// them.
func (s *Session) ListTools(ctx context.Context) ([]protocol.MCPToolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.opts.Timeout)
	defer cancel()
	var out []protocol.MCPToolInfo
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: listing MCP tools: %w", err)
		}
		info := protocol.MCPToolInfo{Name: t.Name}
		if t.Description != "" {
			d := t.Description
			info.Description = &d
		}
		if info.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
			return nil, err
		}
		if t.Annotations != nil {
			info.Annotations, _ = json.Marshal(t.Annotations)
		}
		out = append(out, info)
	}
	return out, nil
}

// Call calls the tool name with arguments (a JSON object, as the model
// wrote it). A tool that reports an error (isError), and arguments that
// are not an object (the model's mistake), return it in toolErr, for the
// mcp_call item; err is a failure to reach the tool at all (the server is
// down, the call timed out).
// The output is the text of the result's content, capped at MaxOutput.
func (s *Session) Call(ctx context.Context, name, arguments string) (output, toolErr string, err error) {
	var args map[string]any
	if strings.TrimSpace(arguments) != "" {
		if err := json.Unmarshal([]byte(arguments), &args); err != nil {
			return "", fmt.Sprintf("The arguments of MCP tool %s are not a JSON object: %v", name, err), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.opts.Timeout)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("mcp: MCP tool %s did not answer within %s", name, s.c.opts.Timeout)
		}
		return "", "", fmt.Errorf("mcp: MCP tool %s: %w", name, err)
	}
	text := contentText(res, s.c.opts.MaxOutput)
	if res.IsError {
		return "", text, nil
	}
	return text, "", nil
}

// contentText is the text of a result's content, or its structured
// content as JSON when it has no text, at most limit bytes.
func contentText(res *sdk.CallToolResult, limit int) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		} else if raw, err := json.Marshal(c); err == nil {
			b.Write(raw)
		}
		if b.Len() > limit {
			break
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		b.Write(raw)
	}
	s := b.String()
	if len(s) > limit {
		s = s[:limit] + fmt.Sprintf("\n[truncated: the output exceeded %d bytes]", limit)
	}
	return s
}
