package hostedtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-run/tether/protocol"
)

// MCP reaches the MCP servers a request's hosted mcp tools name, through
// the official Go SDK: it lists a server's tools and calls them. A request
// names a server by its URL (Streamable HTTP), which MCP checks against
// its allow-list before any connection (by default loopback hosts only: a
// request must not make the server reach into its network), or by the
// label of a server its operator configured, the only way to run a local
// command (stdio). It bounds each list and call in time and caps what a
// call returns.
//
// It is the client half of the hosted mcp tool; the rollout's side (the
// mcp_list_tools and mcp_call items, approvals) is package runtime's.
type MCP struct {
	opts MCPOptions
}

// MCPOptions configure an MCP; zero fields take the defaults.
type MCPOptions struct {
	// Allow says whether a server URL may be reached; nil: loopback hosts
	// only (127.0.0.0/8, ::1, localhost).
	Allow func(u *url.URL) bool
	// Timeout bounds connecting and each list or call: DefaultMCPTimeout.
	Timeout time.Duration
	// MaxOutput caps a call's output, in bytes: DefaultMCPMaxOutput.
	MaxOutput int
	// HTTPClient makes the requests; nil is http.DefaultClient's transport.
	HTTPClient *http.Client
	// Servers are the servers the operator configured, by label: an mcp
	// tool with that server_label and no server_url uses one.
	Servers map[string]MCPServerConfig
}

// MCPServerConfig is an MCP server the operator configured: a URL (which
// the allow-list does not restrict: the operator chose it) or a command
// that speaks MCP on its stdin and stdout.
type MCPServerConfig struct {
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Command is the program and its arguments; Env is added to this
	// process's environment for it.
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
}

// The defaults of an MCP.
const (
	DefaultMCPTimeout   = 30 * time.Second
	DefaultMCPMaxOutput = 1 << 20
)

// NewMCP returns an MCP client with opts.
func NewMCP(opts MCPOptions) *MCP {
	if opts.Allow == nil {
		opts.Allow = Loopback
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultMCPTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMCPMaxOutput
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	return &MCP{opts: opts}
}

// Loopback allows the servers on this machine: a loopback IP or localhost.
func Loopback(u *url.URL) bool {
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrMCPNotAllowed is a server URL outside the allow-list.
var ErrMCPNotAllowed = errors.New("hostedtools: MCP server URL not allowed")

// MCPSession is a connection to one MCP server.
type MCPSession struct {
	m  *MCP
	cs *mcp.ClientSession
}

// Check says, without connecting, whether a request's mcp tool may reach
// its server: a server_url that is http(s) and allowed, or no server_url
// and a label the operator configured. The error wraps ErrMCPNotAllowed
// for a server the request may not reach.
func (m *MCP) Check(s protocol.MCPServer) error {
	_, _, err := m.target(s)
	return err
}

// target is where s's server is: a URL, or the operator's configuration.
func (m *MCP) target(s protocol.MCPServer) (*url.URL, *MCPServerConfig, error) {
	if s.ServerURL == "" {
		if c, ok := m.opts.Servers[s.ServerLabel]; ok {
			return nil, &c, nil
		}
		return nil, nil, fmt.Errorf("%w: the mcp tool '%s' has no server_url, and no MCP server of that label is configured here", ErrMCPNotAllowed, s.ServerLabel)
	}
	u, err := url.Parse(s.ServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("hostedtools: MCP server URL %q: want http:// or https://", s.ServerURL)
	}
	if !m.opts.Allow(u) {
		return nil, nil, fmt.Errorf("%w: %s (this server reaches only the MCP servers its operator allows)", ErrMCPNotAllowed, u.Host)
	}
	return u, nil, nil
}

// Connect opens a session with s's server: over Streamable HTTP with the
// tool's headers and authorization, or the operator's server of that
// label (a command it starts, which ends with the session).
func (m *MCP) Connect(ctx context.Context, s protocol.MCPServer) (*MCPSession, error) {
	u, conf, err := m.target(s)
	if err != nil {
		return nil, err
	}
	var transport mcp.Transport
	where, headers := "", s.AllHeaders()
	switch {
	case conf != nil && len(conf.Command) > 0:
		// Not CommandContext: ctx bounds the connecting, not the
		// command's life, which is the session's.
		cmd := exec.Command(conf.Command[0], conf.Command[1:]...)
		cmd.Env = append(os.Environ(), conf.Env...)
		transport, where = &mcp.CommandTransport{Command: cmd}, "'"+s.ServerLabel+"'"
	case conf != nil:
		if u, err = url.Parse(conf.URL); err != nil {
			return nil, fmt.Errorf("hostedtools: the configured MCP server '%s': %w", s.ServerLabel, err)
		}
		headers = conf.Headers
		fallthrough
	default:
		hc := *m.opts.HTTPClient
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = headerTransport{base: base, headers: headers}
		// The headers carry credentials, which net/http would strip on a
		// redirect to another host and headerTransport would put back:
		// no redirect leaves the server's host (nor the allow-list).
		hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("hostedtools: MCP server %s redirected to another host, %s: refused", via[0].URL.Host, req.URL.Host)
			}
			if len(via) >= 10 {
				return errors.New("hostedtools: MCP server: stopped after 10 redirects")
			}
			return nil
		}
		transport, where = &mcp.StreamableClientTransport{Endpoint: u.String(), HTTPClient: &hc, MaxRetries: -1}, u.Host
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "tether", Version: "1"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("hostedtools: MCP server %s: %w", where, err)
	}
	return &MCPSession{m: m, cs: cs}, nil
}

// headerTransport adds a request's configured headers (an API key for the
// MCP server, say) to every request of a session.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// Close ends the session.
func (s *MCPSession) Close() error { return s.cs.Close() }

// ListTools lists the server's tools, as an mcp_list_tools item lists
// them.
func (s *MCPSession) ListTools(ctx context.Context) ([]protocol.MCPToolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.m.opts.Timeout)
	defer cancel()
	var out []protocol.MCPToolInfo
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("hostedtools: listing MCP tools: %w", err)
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
func (s *MCPSession) Call(ctx context.Context, name, arguments string) (output, toolErr string, err error) {
	var args map[string]any
	if strings.TrimSpace(arguments) != "" {
		if err := json.Unmarshal([]byte(arguments), &args); err != nil {
			return "", fmt.Sprintf("The arguments of MCP tool %s are not a JSON object: %v", name, err), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.m.opts.Timeout)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("hostedtools: MCP tool %s did not answer within %s", name, s.m.opts.Timeout)
		}
		return "", "", fmt.Errorf("hostedtools: MCP tool %s: %w", name, err)
	}
	text := contentText(res, s.m.opts.MaxOutput)
	if res.IsError {
		return "", text, nil
	}
	return text, "", nil
}

// contentText is the text of a result's content, or its structured
// content as JSON when it has no text, at most limit bytes.
func contentText(res *mcp.CallToolResult, limit int) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
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
