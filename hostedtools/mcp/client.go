package mcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// Client reaches the MCP servers a request's hosted mcp tools name,
// through the official Go SDK: it lists a server's tools and calls them. A
// request names a server by its URL (Streamable HTTP), which Client checks
// against its allow-list before any connection (by default loopback hosts
// only: a request must not make the server reach into its network), or by
// the label of a server its operator configured, the only way to run a
// local command (stdio). It bounds each list and call in time and caps
// what a call returns.
//
// A Client is a runtime.MCPClient: safe for concurrent use, and its
// sessions too.
type Client struct {
	opts Options
}

var _ runtime.MCPClient = (*Client)(nil)

// Options configure a Client; zero fields take the defaults.
type Options struct {
	// Allow says whether a server URL may be reached; nil: loopback hosts
	// only (127.0.0.0/8, ::1, localhost).
	Allow func(u *url.URL) bool
	// Timeout bounds connecting and each list or call: DefaultTimeout.
	Timeout time.Duration
	// MaxOutput caps a call's output, in bytes: DefaultMaxOutput.
	MaxOutput int
	// HTTPClient makes the requests; nil is http.DefaultClient's transport.
	HTTPClient *http.Client
	// Servers are the servers the operator configured, by label: an mcp
	// tool with that server_label and no server_url uses one.
	Servers map[string]ServerConfig
}

// ServerConfig is an MCP server the operator configured: a URL (which the
// allow-list does not restrict: the operator chose it) or a command that
// speaks MCP on its stdin and stdout.
type ServerConfig struct {
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Command is the program and its arguments; Env is added to this
	// process's environment for it.
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
}

// The defaults of a Client.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 1 << 20
)

// NewClient returns a Client with opts.
func NewClient(opts Options) *Client {
	if opts.Allow == nil {
		opts.Allow = Loopback
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	return &Client{opts: opts}
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

// Check says, without connecting, whether a request's mcp tool may reach
// its server: a server_url that is http(s) and allowed, or no server_url
// and a label the operator configured. The error wraps
// runtime.ErrMCPNotAllowed for a server the request may not reach.
func (c *Client) Check(s protocol.MCPServer) error {
	_, _, err := c.target(s)
	return err
}

// target is where s's server is: a URL, or the operator's configuration.
func (c *Client) target(s protocol.MCPServer) (*url.URL, *ServerConfig, error) {
	if s.ServerURL == "" {
		if conf, ok := c.opts.Servers[s.ServerLabel]; ok {
			return nil, &conf, nil
		}
		return nil, nil, fmt.Errorf("%w: the mcp tool '%s' has no server_url, and no MCP server of that label is configured here", runtime.ErrMCPNotAllowed, s.ServerLabel)
	}
	u, err := url.Parse(s.ServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, fmt.Errorf("mcp: MCP server URL %q: want http:// or https://", s.ServerURL)
	}
	if !c.opts.Allow(u) {
		return nil, nil, fmt.Errorf("%w: %s (this server reaches only the MCP servers its operator allows)", runtime.ErrMCPNotAllowed, u.Host)
	}
	return u, nil, nil
}

// Connect opens a session with s's server: over Streamable HTTP with the
// tool's headers and authorization, or the operator's server of that
// label (a command it starts, which ends with the session).
// The session is a *Session.
func (c *Client) Connect(ctx context.Context, s protocol.MCPServer) (runtime.MCPSession, error) {
	u, conf, err := c.target(s)
	if err != nil {
		return nil, err
	}
	var transport sdk.Transport
	where, headers := "", s.AllHeaders()
	switch {
	case conf != nil && len(conf.Command) > 0:
		// Not CommandContext: ctx bounds the connecting, not the
		// command's life, which is the session's.
		cmd := exec.Command(conf.Command[0], conf.Command[1:]...)
		cmd.Env = append(os.Environ(), conf.Env...)
		transport, where = &sdk.CommandTransport{Command: cmd}, "'"+s.ServerLabel+"'"
	case conf != nil:
		if u, err = url.Parse(conf.URL); err != nil {
			return nil, fmt.Errorf("mcp: the configured MCP server '%s': %w", s.ServerLabel, err)
		}
		headers = conf.Headers
		fallthrough
	default:
		hc := *c.opts.HTTPClient
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
				return fmt.Errorf("mcp: MCP server %s redirected to another host, %s: refused", via[0].URL.Host, req.URL.Host)
			}
			if len(via) >= 10 {
				return errors.New("mcp: MCP server: stopped after 10 redirects")
			}
			return nil
		}
		transport, where = &sdk.StreamableClientTransport{Endpoint: u.String(), HTTPClient: &hc, MaxRetries: -1}, u.Host
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "tether", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: MCP server %s: %w", where, err)
	}
	return &Session{c: c, cs: cs}, nil
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
