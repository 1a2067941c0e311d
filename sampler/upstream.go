package sampler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/tether-run/tether/protocol"
)

// UpstreamAPI is the wire API an upstream server speaks.
type UpstreamAPI string

// Upstream APIs.
const (
	// UpstreamChat is POST {BaseURL}/chat/completions, streamed: llama.cpp's
	// server, vLLM, Ollama, OpenAI, tether.
	UpstreamChat UpstreamAPI = "chat"
	// UpstreamResponses is POST {BaseURL}/responses, streamed: OpenAI, tether.
	UpstreamResponses UpstreamAPI = "responses"
)

// DefaultUpstreamTimeout bounds an upstream request when the config leaves
// Timeout zero.
const DefaultUpstreamTimeout = 10 * time.Minute

// UpstreamConfig configures an Upstream. Only BaseURL is required.
type UpstreamConfig struct {
	// BaseURL is the API root the API's path is appended to, as in OpenAI's
	// clients: "http://127.0.0.1:8080/v1".
	BaseURL string
	// API is the wire API; "" is UpstreamChat.
	API UpstreamAPI
	// Model is the model name sent upstream; "" sends the request's own.
	Model string
	// APIKey is sent as "Authorization: Bearer APIKey"; "" sends none.
	APIKey string
	// Timeout bounds each request, from sending it to the end of its
	// stream: 0 is DefaultUpstreamTimeout, negative is no bound but ctx.
	Timeout time.Duration
	// Client sends the requests. Nil is a client of the Upstream's own,
	// whose idle connections CloseIdleConnections closes.
	Client *http.Client
}

// Upstream is a backend that forwards each sample to an OpenAI-compatible
// server and streams its answer back as deltas: a text part per message, a
// call part per function call. It holds no per-request state and is safe for
// concurrent use; Sample blocks on the network.
//
// The request carries the whole context every time (the upstream keeps no
// state: store is false): the instructions as a leading system message (chat)
// or as instructions (responses), the items, the function tools, tool_choice,
// the token limit, the prompt_cache_key and prompt_cache_retention, and the
// service_tier (Result.ServiceTier is the one the server says served it). A hosted tool the request offers (web_search) is
// offered upstream as a function of the same name, so that the upstream model
// calls it and the runtime runs it like any hosted call; its results go back
// upstream as that function's call and output. Reasoning items are not sent.
//
// Output is paced by the upstream itself: no Timing applies, since the
// upstream's latency is the real one being measured. A simulated model in
// front of a real one would wrap Upstream rather than pace it here.
//
// Errors are *protocol.Error values that carry the upstream's own message:
// an HTTP error or an error event becomes code upstream_error (status 400 for
// an upstream 400/413/422, 429 for 429, else 502), the Timeout
// upstream_timeout (504). When ctx ends, the request is aborted and Sample
// returns ctx.Err().
//
// Parts may not interleave, but a chat upstream's parallel tool calls may:
// the oldest unfinished part streams as it arrives and later ones are held
// back until it ends. A tool call ends when a later part has begun and its
// arguments are a complete JSON value, so calls streamed one after another,
// as real servers stream them, pass through without delay; interleaved ones
// are reassembled, at the cost of holding back all but the first.
type Upstream struct {
	api      UpstreamAPI
	endpoint string
	model    string
	apiKey   string
	timeout  time.Duration // <= 0: none
	client   *http.Client
	window   // not known unless set: the upstream's server enforces its own
}

// NewUpstream returns an Upstream for cfg, or an error when cfg is invalid.
// It does not contact the server.
func NewUpstream(cfg UpstreamConfig) (*Upstream, error) {
	base, err := protocol.APIBase(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("sampler: upstream %w", err)
	}
	up := &Upstream{api: cfg.API, model: cfg.Model, apiKey: cfg.APIKey, timeout: cfg.Timeout, client: cfg.Client}
	switch cfg.API {
	case "", UpstreamChat:
		up.api, up.endpoint = UpstreamChat, base+"/chat/completions"
	case UpstreamResponses:
		up.endpoint = base + "/responses"
	default:
		return nil, fmt.Errorf("sampler: upstream API %q: want %q or %q", cfg.API, UpstreamChat, UpstreamResponses)
	}
	if up.timeout == 0 {
		up.timeout = DefaultUpstreamTimeout
	}
	if up.client == nil {
		up.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return up, nil
}

// CloseIdleConnections closes the client's idle keep-alive connections.
func (u *Upstream) CloseIdleConnections() { u.client.CloseIdleConnections() }

// errUpstreamTimeout is the cause of a request's context when Timeout ends it.
var errUpstreamTimeout = errors.New("sampler: upstream timeout")

// Sample sends req upstream and streams the answer through emit, on the
// caller's goroutine. Result.OutputTokens is the upstream's count of output
// tokens when it reports usage, else the number of token deltas; Result
// .Incomplete reports that the upstream stopped at the token limit.
// req.Prompt is not used.
func (u *Upstream) Sample(ctx context.Context, req *Request, emit func(Delta)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if req == nil {
		req = &Request{}
	}
	model := u.model
	if model == "" {
		model = req.Model
	}
	var body []byte
	var err error
	if u.api == UpstreamResponses {
		body, err = responsesBody(model, req)
	} else {
		body, err = chatBody(model, req)
		// Namespaces' members and custom tools went as chat functions:
		// their calls come back as what they stand for.
		_, names := chatFunctions(req.Tools, req.ToolChoice)
		emit = names.mapBack(emit)
	}
	if err != nil {
		return Result{}, err
	}
	rctx := ctx
	if u.timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeoutCause(ctx, u.timeout, errUpstreamTimeout)
		defer cancel()
	}
	res, err := u.send(rctx, body, emit)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	case context.Cause(rctx) == errUpstreamTimeout:
		return res, protocol.Errorf(http.StatusGatewayTimeout, protocol.CodeUpstreamTimeout, "",
			"The upstream model server did not finish within %s.", u.timeout)
	}
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return res, perr
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // the upstream's address is not the client's business
	}
	return res, upstreamError(0, "could not complete the request: "+err.Error())
}

func (u *Upstream) send(ctx context.Context, body []byte, emit func(Delta)) (Result, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if u.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+u.apiKey)
	}
	resp, err := u.client.Do(hreq)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return Result{}, upstreamError(resp.StatusCode, errorBodyMessage(b))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return Result{}, upstreamError(0, "answered with a JSON body instead of an event stream: "+errorBodyMessage(b))
	}
	if u.api == UpstreamResponses {
		return decodeResponsesStream(resp.Body, emit)
	}
	return decodeChatStream(resp.Body, emit)
}

// maxErrorBody bounds the part of an error body that is read.
const maxErrorBody = 64 << 10

// upstreamError is the error of a failed upstream request. status is the
// upstream's HTTP status, 0 for a failure without one (an error event, a
// broken stream). The client's status follows the upstream's where the
// client can act on it (a request too large, a rate limit); any other
// failure is the upstream's, hence a bad gateway.
func upstreamError(status int, msg string) *protocol.Error {
	code := http.StatusBadGateway
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		code = http.StatusBadRequest
	case http.StatusTooManyRequests:
		code = http.StatusTooManyRequests
	}
	if status != 0 {
		return protocol.Errorf(code, protocol.CodeUpstreamError, "", "The upstream model server answered %d %s: %s",
			status, http.StatusText(status), msg)
	}
	return protocol.Errorf(code, protocol.CodeUpstreamError, "", "The upstream model server %s", msg)
}
