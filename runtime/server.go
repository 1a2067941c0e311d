package runtime

import (
	"container/list"
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Sampler is a model backend: it samples one step for req, streaming deltas
// through emit on the caller's goroutine. The sampler package provides them.
type Sampler interface {
	Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error)
}

// FixedToolSampler is a Sampler whose calls do not follow the tools a
// request offers: it calls the functions RequiredTools names, whatever it
// is offered (sampler.Replay replays a recorded rollout's calls). The
// server refuses, before anything starts, a request for it that samples and
// does not offer them all as function tools: the client would get calls it
// cannot answer.
type FixedToolSampler interface {
	Sampler
	RequiredTools() []string
}

// offersRequired refuses a request for the model named name, offering
// tools, when the model is a FixedToolSampler whose functions the request
// does not all offer as top-level function tools. tool_choice "none" lets
// the model call nothing, so it needs nothing offered.
func (s *Server) offersRequired(name string, model Sampler, tools []protocol.Tool, choice protocol.ToolChoice) *protocol.Error {
	fixed, ok := model.(FixedToolSampler)
	if !ok || choice.Mode == "none" {
		return nil
	}
	required := fixed.RequiredTools()
	var missing []string
	for _, fn := range required {
		// Offered as a function, and one tool_choice lets it call.
		callable := func(t protocol.Tool) bool {
			return t.Type == protocol.ToolFunction && t.Name == fn && choice.Allows(t) &&
				(choice.Function == "" || choice.Function == fn) && choice.Custom == "" && choice.Builtin == ""
		}
		if !slices.ContainsFunc(tools, callable) {
			missing = append(missing, fn)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	instead := "."
	if _, ok := s.models[sampler.ScriptedModel]; ok {
		instead = ", or use " + sampler.ScriptedModel + ", which calls the tools it is offered."
	}
	return protocol.Invalid(protocol.CodeToolNotOffered, "tools",
		"Model '%s' replays a rollout that calls %s; the request does not offer %s (or its tool_choice does not let the model call them). Offer them as function tools (tether run does)%s",
		name, andList(required), andList(missing), instead)
}

// Defaults of Options.
const (
	DefaultMaxFrame        = 16 << 20
	DefaultWSMaxAge        = 60 * time.Minute
	DefaultMaxInFlight     = 16
	DefaultMaxLanes        = 32
	DefaultMaxQueued       = 256
	DefaultWriteTimeout    = 10 * time.Second
	DefaultSlowClient      = 10 * time.Second
	DefaultDrainTimeout    = 10 * time.Second
	DefaultConnBytes       = 16 << 20
	DefaultCacheBytes      = 32 << 20
	DefaultTenantInFlight  = 512
	DefaultBodyTimeout     = 30 * time.Second
	DefaultMaxCallsPerStep = 256
	DefaultSuspendTimeout  = 10 * time.Minute
	DefaultResumeWindow    = 60 * time.Second
	DefaultMaxSuspended    = 1024
	DefaultTenantSuspended = 256
	DefaultMaxConnections  = 4096
	DefaultTenantConns     = 256
)

// Options configure a Server. The zero value serves tether-scripted, unpaced,
// with an in-memory store.
type Options struct {
	// Models maps model names to backends. Nil serves "tether-scripted" only.
	Models map[string]Sampler
	// Renderer renders items to tokens. Nil creates one (o200k_base).
	Renderer *sampler.Renderer
	// HostedTools run inside the loop when a request offers their type (for
	// example web_search). Nil serves none.
	HostedTools []Tool
	// MCP reaches the servers of requests' hosted mcp tools (its
	// allow-list and the operator's servers decide which). Nil refuses
	// mcp tools.
	MCP MCPClient
	// SuspendTimeout ends a suspended rollout that waits longer than this for
	// client tool outputs (failed, client_tool_timeout).
	SuspendTimeout time.Duration
	// MaxSuspended bounds the suspended rollouts a server holds at once
	// (running, parked or detached); beyond it a suspended create is refused.
	MaxSuspended int
	// TenantSuspended bounds those of one tenant, when the server has Keys
	// (tenant_suspended_limit), so that one key cannot take every slot.
	TenantSuspended int
	// MaxConnections bounds the WebSocket connections open at once
	// (too_many_connections, before the upgrade); TenantConns those of one
	// tenant, with Keys (tenant_connection_limit).
	MaxConnections, TenantConns int
	// TenantRPM, with Keys, bounds each tenant's HTTP requests and
	// WebSocket upgrades per minute (rate_limit_exceeded, 429); 0 is no
	// bound.
	TenantRPM int
	// ResumeWindow is how long a suspended rollout outlives its connection,
	// waiting for response.resume on a new one.
	ResumeWindow time.Duration
	// Store keeps store: true responses. Nil is a MemoryStore bounded by
	// StoreBytes and TenantStoreBytes (its defaults when zero).
	Store                        Store
	StoreBytes, TenantStoreBytes int
	// OriginPatterns are the origins, besides the server's own host, whose
	// pages may open a WebSocket or a WebTransport connection: host
	// patterns as path.Match takes them ("localhost:*", "*.example.com").
	OriginPatterns []string
	// MaxFrame bounds a WebSocket frame and an HTTP body, in bytes.
	MaxFrame int64
	// WSMaxAge is the WebSocket connection age limit.
	WSMaxAge time.Duration
	// MaxInFlight bounds responses running at once on one connection; more wait.
	MaxInFlight int
	// MaxLanes bounds the distinct named stream_ids of one connection.
	MaxLanes int
	// MaxQueued bounds the creates a connection may have accepted and not yet
	// finished (running or waiting); beyond it a create is refused.
	MaxQueued int
	// TenantInFlight bounds the responses one tenant has in progress at
	// once, over every connection and HTTP (suspended rollouts, parked or
	// not, included), with Keys.
	TenantInFlight int
	// CacheResponses is how many of each lane's latest responses a
	// connection caches (1, as OpenAI): previous_response_id may name any
	// of them, to branch from an earlier turn without the store.
	CacheResponses int
	// CacheBytes bounds what a WebSocket connection caches (the latest
	// response of each lane, by conversation.bytes' estimate): past it the
	// least recently cached lanes' responses are dropped, all but the newest.
	CacheBytes int
	// ConnBytes bounds the bytes of the creates a WebSocket connection has
	// in flight (queued, running or parked), by their frames' size: past it a
	// create is refused (websocket_bytes_in_flight), unless nothing else is
	// in flight, so that any frame up to MaxFrame can be served alone. A
	// request costs a few times its size in memory while it is served.
	ConnBytes int
	// DrainTimeout is how long Shutdown lets running responses finish
	// before it ends them with server_shutting_down.
	DrainTimeout time.Duration
	// WriteTimeout is how long one batch of writes to a WebSocket or an SSE
	// stream may stall before the connection is cut.
	WriteTimeout time.Duration
	// SlowClientTimeout is how far behind a client may fall: when a frame
	// queued for it longer ago is still not written, the connection is
	// closed with a policy violation (1008) after an error event
	// (client_too_slow), and an SSE stream is cut. Until then a rollout
	// never waits for its client: it merges the deltas the client has not
	// yet taken into fewer, larger ones.
	SlowClientTimeout time.Duration
	// EveryDelta sends every text and argument delta as the model made it,
	// never merged, even to a client that is behind (whose queue then
	// grows to its bound): for tests and recordings that compare streams
	// token by token.
	EveryDelta bool
	// BodyTimeout bounds reading an HTTP request's body: a body trickled
	// slower is refused (408) and its connection closed.
	BodyTimeout time.Duration
	// MaxCallsPerStep bounds the tool calls of one sampling step: a step
	// that makes more fails the response (too_many_tool_calls).
	MaxCallsPerStep int
	// Keys, when set, are the API keys every request must bear (see Keys).
	// Nil admits every request: run such a server on loopback only.
	Keys *Keys
	// CompactionKey seals compaction items (32 bytes). Nil draws a random key:
	// windows then open only on this server process.
	CompactionKey []byte
	// Logger receives operational logs. Nil discards them.
	Logger *slog.Logger
	// AccessLog logs one line (at Info, message "access") per HTTP request
	// and per WebSocket session when it ends: method, path, status, bytes
	// written, duration, responses served, never a key or a body.
	AccessLog bool
	// Now is the clock. Nil is time.Now.
	Now func() time.Time
	// Observer receives what the server measures (package
	// runtime/prommetrics exports it to Prometheus). Nil observes nothing.
	Observer Observer
	// Hooks is work around inference a production API does that the core
	// does not (package runtime/cost: a safety classifier, simulated
	// service calls). Nil does none.
	Hooks Hooks
	// StoreTokens keeps each stored response's rendered tokens with it, so
	// that a previous_response_id the connection has not cached (every
	// chained HTTP request) loads them instead of rendering the whole
	// chain again.
	StoreTokens bool
}

// Server serves the Responses API over WebSocket and HTTP. It is an
// http.Handler; call Shutdown to drain WebSocket sessions.
type Server struct {
	opts     Options
	models   map[string]Sampler
	renderer *sampler.Renderer
	hosted   map[protocol.ToolType]Tool
	store    Store
	sealer   *sealer
	log      *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
	obs      Observer
	hooks    Hooks

	ctx    context.Context    // parent of suspended rollouts; cancelled by Shutdown
	cancel context.CancelFunc //

	mu         sync.Mutex
	sessions   map[*session]struct{}  // guarded by mu
	conns      map[string]int         // live sessions by tenant, guarded by mu
	suspended  map[string]*suspension // suspended rollouts by response id, guarded by mu
	tails      map[string]*tail       // the ends of settled suspended rollouts, by response id (tail.go); guarded by mu
	tailOrder  *list.List             // of *tail, oldest first; guarded by mu
	tailBytes  int                    // guarded by mu
	rollouts   map[*rollout]struct{}  // every rollout running, for Shutdown to drain (shutdown.go); guarded by mu
	inFlightBy map[string]int         // those rollouts by tenant (TenantInFlight); guarded by mu
	changed    chan struct{}          // 1-buffered: a rollout ended or parked
	closed     bool                   // Shutdown has begun; guarded by mu
	aborting   bool                   // and its drain is over; guarded by mu
	limiters   sync.Map               // tenant -> *rate.Limiter, with TenantRPM
	wg         sync.WaitGroup         // one per live session and per suspended rollout
}

// NewServer returns a Server with opts' defaults filled in.
func NewServer(opts Options) (*Server, error) {
	s := &Server{opts: opts, sessions: make(map[*session]struct{}), conns: map[string]int{}, suspended: make(map[string]*suspension),
		tails: make(map[string]*tail), tailOrder: list.New(), rollouts: map[*rollout]struct{}{}, inFlightBy: map[string]int{}, changed: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.opts.MaxFrame <= 0 {
		s.opts.MaxFrame = DefaultMaxFrame
	}
	if s.opts.WSMaxAge <= 0 {
		s.opts.WSMaxAge = DefaultWSMaxAge
	}
	if s.opts.MaxInFlight <= 0 {
		s.opts.MaxInFlight = DefaultMaxInFlight
	}
	if s.opts.MaxLanes <= 0 {
		s.opts.MaxLanes = DefaultMaxLanes
	}
	if s.opts.MaxQueued <= 0 {
		s.opts.MaxQueued = DefaultMaxQueued
	}
	if s.opts.SuspendTimeout <= 0 {
		s.opts.SuspendTimeout = DefaultSuspendTimeout
	}
	if s.opts.MaxSuspended <= 0 {
		s.opts.MaxSuspended = DefaultMaxSuspended
	}
	if s.opts.TenantSuspended <= 0 {
		s.opts.TenantSuspended = DefaultTenantSuspended
	}
	if s.opts.MaxConnections <= 0 {
		s.opts.MaxConnections = DefaultMaxConnections
	}
	if s.opts.TenantConns <= 0 {
		s.opts.TenantConns = DefaultTenantConns
	}
	if s.opts.ResumeWindow <= 0 {
		s.opts.ResumeWindow = DefaultResumeWindow
	}
	s.hosted = make(map[protocol.ToolType]Tool, len(opts.HostedTools))
	for _, t := range opts.HostedTools {
		s.hosted[t.Definition().Type] = t
	}
	if s.opts.TenantInFlight <= 0 {
		s.opts.TenantInFlight = DefaultTenantInFlight
	}
	if s.opts.CacheResponses <= 0 {
		s.opts.CacheResponses = 1
	}
	if s.opts.CacheBytes <= 0 {
		s.opts.CacheBytes = DefaultCacheBytes
	}
	if s.opts.ConnBytes <= 0 {
		s.opts.ConnBytes = DefaultConnBytes
	}
	if s.opts.DrainTimeout <= 0 {
		s.opts.DrainTimeout = DefaultDrainTimeout
	}
	if s.opts.WriteTimeout <= 0 {
		s.opts.WriteTimeout = DefaultWriteTimeout
	}
	if s.opts.SlowClientTimeout <= 0 {
		s.opts.SlowClientTimeout = DefaultSlowClient
	}
	if s.opts.BodyTimeout <= 0 {
		s.opts.BodyTimeout = DefaultBodyTimeout
	}
	if s.opts.MaxCallsPerStep <= 0 {
		s.opts.MaxCallsPerStep = DefaultMaxCallsPerStep
	}
	s.now = opts.Now
	if s.now == nil {
		s.now = time.Now
	}
	s.log = opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.renderer = opts.Renderer
	if s.renderer == nil {
		r, err := sampler.NewRenderer()
		if err != nil {
			return nil, err
		}
		s.renderer = r
	}
	s.models = opts.Models
	if s.models == nil {
		s.models = map[string]Sampler{"tether-scripted": sampler.NewScripted(s.renderer, sampler.Timing{})}
	}
	inner := opts.Store
	if inner == nil {
		inner = NewMemoryStore(MemoryStoreOptions{MaxBytes: opts.StoreBytes, MaxTenantBytes: opts.TenantStoreBytes})
	}
	s.store = scopedStore{inner}
	sl, err := newSealer(opts.CompactionKey)
	if err != nil {
		return nil, err
	}
	s.sealer = sl
	s.obs = opts.Observer
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	s.hooks = opts.Hooks
	if s.hooks == nil {
		s.hooks = noHooks{}
	}
	s.routes()
	return s, nil
}

// ModelNames lists the served models, sorted.
func (s *Server) ModelNames() []string {
	names := make([]string, 0, len(s.models))
	for n := range s.models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// model resolves a model name, or says which models exist.
func (s *Server) model(name string) (Sampler, *protocol.Error) {
	if m, ok := s.models[name]; ok {
		return m, nil
	}
	return nil, protocol.Errorf(http.StatusNotFound, protocol.CodeModelNotFound, "model",
		"The model '%s' does not exist. Models served here: %s.", name, strings.Join(s.ModelNames(), ", "))
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.AccessLog {
		s.serveLogged(w, r, s.serve)
		return
	}
	s.serve(w, r)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	r, ok := s.authenticate(w, r)
	if ok {
		authenticated(r)
		s.mux.ServeHTTP(w, r)
	}
}

// admitConn takes a connection slot for tenant, or says why there is none.
// The slot is given back by untrack.
func (s *Server) admitConn(tenant string) *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, n := range s.conns {
		total += n
	}
	switch {
	case s.closed:
		return errShutdown()
	case total >= s.opts.MaxConnections:
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeTooManyConnections, "",
			"This server already holds %d WebSocket connections, its limit (--max-connections). Retry later.", total)
	case tenant != "" && s.conns[tenant] >= s.opts.TenantConns:
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantConnections, "",
			"Your key's tenant already holds %d WebSocket connections, its limit on this server (--tenant-connections). Close one first.", s.conns[tenant])
	}
	s.conns[tenant]++
	return nil
}

// releaseConn gives back the place admitConn took.
func (s *Server) releaseConn(tenant string) {
	s.mu.Lock()
	s.conns[tenant]--
	s.mu.Unlock()
}

// track lists a session, so that Shutdown closes it and waits for it.
func (s *Server) track(sess *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.sessions[sess] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.mu.Unlock()
	s.wg.Done()
}

// register lists a suspended rollout, so that response.resume finds it and
// Shutdown waits for it; it counts against MaxSuspended until it settles or
// expires.
func (s *Server) register(sp *suspension) *protocol.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errShutdown()
	}
	if len(s.suspended) >= s.opts.MaxSuspended {
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTooManySuspended, "suspend",
			"This server already holds %d suspended rollouts. Finish or cancel one, or retry without 'suspend'.", s.opts.MaxSuspended)
	}
	if t := sp.ro.tenant; t != "" {
		n := 0
		for _, other := range s.suspended {
			if other.ro.tenant == t {
				n++
			}
		}
		if n >= s.opts.TenantSuspended {
			return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantSuspended, "suspend",
				"Your key's tenant already holds %d suspended rollouts, its limit on this server. Finish or cancel one, or retry without 'suspend'.", n)
		}
	}
	s.suspended[sp.id] = sp
	s.wg.Add(1)
	return nil
}

func (s *Server) unregister(sp *suspension) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.suspended[sp.id] == sp {
		delete(s.suspended, sp.id)
	}
}

func (s *Server) lookupSuspended(id string) *suspension {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended[id]
}

// writeError writes an HTTP error body.
func writeError(w http.ResponseWriter, perr *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(perr.Status)
	w.Write(perr.HTTPErrorBody())
}
