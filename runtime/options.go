package runtime

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tether-run/tether/sampler"
)

// Defaults of Options.
const (
	DefaultMaxFrame          = 16 << 20
	DefaultWSMaxAge          = 60 * time.Minute
	DefaultMaxInFlight       = 16
	DefaultMaxLanes          = 32
	DefaultMaxQueued         = 256
	DefaultCacheResponses    = 1
	DefaultWriteTimeout      = 10 * time.Second
	DefaultSlowClient        = 10 * time.Second
	DefaultDrainTimeout      = 10 * time.Second
	DefaultConnBytes         = 16 << 20
	DefaultCacheBytes        = 32 << 20
	DefaultTenantInFlight    = 512
	DefaultBodyTimeout       = 30 * time.Second
	DefaultMaxCallsPerStep   = 256
	DefaultMaxOutputItems    = 4096
	DefaultMaxOutputBytes    = 64 << 20
	DefaultMaxCompactions    = 32
	DefaultSuspendTimeout    = 10 * time.Minute
	DefaultResumeWindow      = 60 * time.Second
	DefaultLeaseTTL          = 10 * time.Second
	DefaultMaxSuspended      = 1024
	DefaultTenantSuspended   = 256
	DefaultMaxConnections    = 4096
	DefaultTenantConns       = 256
	DefaultMaxClientSecrets  = 1 << 18
	DefaultBackgroundWorkers = 64
	DefaultBackgroundQueue   = 256
	DefaultBackgroundRetain  = 10 * time.Minute
)

// Options configure a Server. The zero value serves tether-scripted, unpaced,
// with an in-memory store. The pluggable parts are at the top; the bounds
// are grouped by concern (Limits, Timeouts, Suspension, Tenant,
// MemoryStore), each group's zero value its defaults. NewServer refuses
// negative bounds.
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
	// Store keeps store: true responses. Nil is a MemoryStore bounded by
	// MemoryStore.
	Store Store
	// Checkpoints, when set, makes suspended rollouts durable: each pause
	// is written there before its client sees it, and a response.resume
	// of a rollout this server does not hold takes it over from there.
	// Servers that share it resume each other's rollouts (see
	// [Checkpoints]). Nil keeps a suspended rollout in its process only.
	Checkpoints Checkpoints
	// Backgrounds, when set, keeps background responses where the servers
	// that share it read them (see [BackgroundStore]): any of them polls,
	// cancels or streams again a background response another runs, and
	// takes it over when that server dies. Nil keeps each in the process
	// that runs it.
	Backgrounds BackgroundStore
	// Keys, when set, are the API keys every request must bear (see Keys).
	// Nil admits every request: run such a server on loopback only.
	Keys *Keys
	// CompactionKey seals compaction items (32 bytes). Nil draws a random key:
	// windows then open only on this server process.
	CompactionKey []byte
	// OriginPatterns are the origins, besides the server's own host, whose
	// pages may open a WebSocket or a WebTransport connection: host
	// patterns as path.Match takes them ("localhost:*", "*.example.com").
	OriginPatterns []string
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
	// SecretKey signs the client secrets POST /v1/client_secrets mints for
	// browsers; servers that share a store and take each
	// other's secrets share it. Nil is a random key: this server's secrets
	// are taken by this server alone.
	SecretKey []byte
	// Recorder is given every response's request, events and appends
	// (package runtime/record writes them as a traffic log). Nil records
	// nothing.
	Recorder Recorder
	// Hooks is work around inference a production API does that the core
	// does not (package runtime/cost: a safety classifier, simulated
	// service calls). Nil does none.
	Hooks Hooks
	// EveryDelta sends every text and argument delta as the model made it,
	// never merged, even to a client that is behind (whose queue then
	// grows to its bound): for tests and recordings that compare streams
	// token by token.
	EveryDelta bool
	// EngineLate reports how late the engine that paces the models
	// stepped last (sampler.Engine.Late): past a couple of milliseconds,
	// the server is saturated, and its connections' writers hold each
	// flush briefly to take the next frames with it (Server.FlushHolds
	// counts them; package flushhold is the policy). Called once a write,
	// it must be cheap. Nil: the writers' own wait for the CPU is the only
	// sign of saturation.
	EngineLate func() time.Duration
	// StoreTokens keeps each stored response's rendered tokens with it, so
	// that a previous_response_id the connection has not cached (every
	// chained HTTP request) loads them instead of rendering the whole
	// chain again.
	StoreTokens bool

	// Limits bound frames, connections and what one connection holds.
	Limits Limits
	// Timeouts bound how long the server waits on clients and on itself.
	Timeouts Timeouts
	// Suspension bounds suspended rollouts (suspend: true).
	Suspension SuspensionOptions
	// Tenant bounds each tenant's share of the server, when it has Keys.
	Tenant TenantLimits
	// Background bounds background responses (background: true).
	Background BackgroundOptions
	// MemoryStore bounds the default store, when Store is nil, and the
	// conversations kept in memory, when Store keeps none (each store
	// within these bounds of its own). Its zero bounds are a share of
	// Limits.MaxMemory when that is set (MemoryStoreOptions).
	MemoryStore MemoryStoreOptions
}

// Limits bound the server's frames and connections and what one
// connection holds. Zero fields take the defaults.
type Limits struct {
	// MaxFrame bounds a WebSocket frame and an HTTP body, in bytes.
	MaxFrame int64
	// MaxConnections bounds the WebSocket connections open at once
	// (too_many_connections, before the upgrade).
	MaxConnections int
	// MaxInFlight bounds responses running at once on one connection; more wait.
	MaxInFlight int
	// MaxLanes bounds the distinct named stream_ids of one connection.
	MaxLanes int
	// MaxQueued bounds the creates a connection may have accepted and not yet
	// finished (running or waiting); beyond it a create is refused.
	MaxQueued int
	// ConnBytes bounds the bytes of the creates a WebSocket connection has
	// in flight (queued, running or parked), by their frames' size: past it a
	// create is refused (websocket_bytes_in_flight), unless nothing else is
	// in flight, so that any frame up to MaxFrame can be served alone. A
	// request costs a few times its size in memory while it is served.
	ConnBytes int
	// CacheBytes bounds what a WebSocket connection caches (the latest
	// response of each lane, by conversation.bytes' estimate): past it the
	// least recently cached lanes' responses are dropped, all but the newest.
	CacheBytes int
	// CacheResponses is how many of each lane's latest responses a
	// connection caches (1, as OpenAI): previous_response_id may name any
	// of them, to branch from an earlier turn without the store.
	CacheResponses int
	// MaxCallsPerStep bounds the tool calls of one sampling step: a step
	// that makes more fails the response (too_many_tool_calls).
	MaxCallsPerStep int
	// MaxOutputItems, MaxOutputBytes and MaxCompactions bound what one
	// response makes: its output items, the text and arguments its model
	// streams with the compactions' content, and its context compactions
	// (context_management). A response that reaches one ends incomplete
	// before its next step, incomplete_details.reason max_output_items,
	// max_output_bytes or max_compactions: a small request cannot have one
	// response grow without bound (hosted calls looping, a compaction
	// threshold below what one step adds).
	MaxOutputItems int
	MaxOutputBytes int64
	MaxCompactions int
	// MaxMemory is the server's memory budget, in bytes, for all its
	// requests together: each create (HTTP, WebSocket, WebTransport) is
	// admitted with what it will hold while it is served (requestCost of
	// its size), held until it ends, and the connections' caches of
	// responses count too; a WebSocket frame takes its bytes as they are
	// read. A request that does not fit is refused with 503
	// server_memory_full (and Retry-After over HTTP). 0 is none.
	MaxMemory int64
	// MaxClientSecrets bounds the client secrets a server without a
	// OnceStore remembers as used, each until it expires (10 minutes at
	// most; about 60 bytes each). Past it a handshake with a secret is
	// refused (503 too_many_client_secrets) until some expire, rather
	// than a used secret forgotten early, which would let it be used
	// again.
	MaxClientSecrets int
}

// Timeouts bound how long the server waits on its clients and on itself.
// Zero fields take the defaults.
type Timeouts struct {
	// WSMaxAge is the WebSocket connection age limit.
	WSMaxAge time.Duration
	// Write is how long one batch of writes to a WebSocket or an SSE
	// stream may stall before the connection is cut (on a WebSocket,
	// between half of it and all of it: a deadline set for one batch
	// serves those that follow while half of it is left).
	Write time.Duration
	// SlowClient is how far behind a client may fall: when a frame
	// queued for it longer ago is still not written, the connection is
	// closed with a policy violation (1008) after an error event
	// (client_too_slow), and an SSE stream is cut. Until then a rollout
	// never waits for its client: it merges the deltas the client has not
	// yet taken into fewer, larger ones.
	SlowClient time.Duration
	// Body bounds reading an HTTP request's body: a body trickled
	// slower is refused (408) and its connection closed.
	Body time.Duration
	// Drain is how long Shutdown lets running responses finish
	// before it ends them with server_shutting_down.
	Drain time.Duration
}

// SuspensionOptions bound suspended rollouts. Zero fields take the
// defaults.
type SuspensionOptions struct {
	// Timeout ends a suspended rollout that waits longer than this for
	// client tool outputs (failed, client_tool_timeout).
	Timeout time.Duration
	// ResumeWindow is how long a suspended rollout outlives its connection,
	// waiting for response.resume on a new one.
	ResumeWindow time.Duration
	// Max bounds the suspended rollouts a server holds at once
	// (running, parked, detached or hibernated); beyond it a suspended
	// create is refused.
	Max int
	// HibernateAfter, with Checkpoints, takes a rollout parked this long
	// at a checkpointed pause out of memory: its goroutine ends, its state
	// lives in the checkpoint alone, and the append, cancel or resume that
	// names it next rebuilds it on whichever server receives it. 0 never
	// hibernates (the default); a nanosecond hibernates at once.
	HibernateAfter time.Duration
	// LeaseTTL, with Checkpoints, is how long the lease a server holds on
	// a durable rollout it runs (or whose client it serves) outlives the
	// server's last renewal, every third of it: while it lasts, no other
	// server takes the rollout over (response_owned_elsewhere); a dead
	// server's rollouts are taken over once it has run out.
	LeaseTTL time.Duration
}

// TenantLimits bound what one tenant (the tenant of a request's key) takes
// of a server that has Keys, so that one key cannot take it all; without
// Keys they bound nothing. Zero fields take the defaults.
// BackgroundOptions bound background responses (background: true over
// HTTP). Zero fields take the defaults.
type BackgroundOptions struct {
	// Workers bounds the background responses running at once; the rest
	// wait, queued, the most urgent first.
	Workers int
	// Queue bounds one tenant's background responses queued or running
	// (the keyless server's, without Keys): past it a create is refused,
	// background_queue_full.
	Queue int
	// Retention is how long an ended background response is kept to be
	// polled, its stream resumed, or cancelled again: 10 minutes, as
	// OpenAI keeps them. Past it only the store has it, when it was
	// stored (store: true).
	Retention time.Duration
}

type TenantLimits struct {
	// InFlight bounds the responses one tenant has in progress at
	// once, over every connection and HTTP (suspended rollouts, parked or
	// not, included).
	InFlight int
	// Suspended bounds the suspended rollouts of one tenant
	// (tenant_suspended_limit).
	Suspended int
	// Conns bounds the WebSocket connections one tenant holds at once
	// (tenant_connection_limit).
	Conns int
	// RPM bounds each tenant's HTTP requests and WebSocket upgrades per
	// minute (rate_limit_exceeded, 429); 0 is no bound.
	RPM int
}

// validate refuses options no server can run with, naming the option.
func (o *Options) validate() error {
	for name, m := range o.Models {
		if m == nil {
			return fmt.Errorf("runtime: Models[%q] is nil", name)
		}
	}
	for i, t := range o.HostedTools {
		if t == nil {
			return fmt.Errorf("runtime: HostedTools[%d] is nil", i)
		}
	}
	if o.CompactionKey != nil && len(o.CompactionKey) != 32 {
		return fmt.Errorf("runtime: CompactionKey of %d bytes: want 32, or nil for a random one", len(o.CompactionKey))
	}
	return errors.Join(o.Limits.validate(), o.Timeouts.validate(), o.Suspension.validate(),
		o.Tenant.validate(), o.Background.validate(), o.MemoryStore.validate())
}

// setDefaults fills in every zero field that has a default.
func (o *Options) setDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Hooks == nil {
		o.Hooks = noHooks{}
	}
	o.Limits.setDefaults()
	o.Timeouts.setDefaults()
	o.Suspension.setDefaults()
	o.Tenant.setDefaults()
	o.Background.setDefaults()
	o.MemoryStore.setServerDefaults(o.Limits.MaxMemory, o.Keys != nil)
}

func (l *Limits) validate() error {
	return errors.Join(
		atLeast0("Limits.MaxFrame", l.MaxFrame),
		atLeast0("Limits.MaxConnections", l.MaxConnections),
		atLeast0("Limits.MaxInFlight", l.MaxInFlight),
		atLeast0("Limits.MaxLanes", l.MaxLanes),
		atLeast0("Limits.MaxQueued", l.MaxQueued),
		atLeast0("Limits.ConnBytes", l.ConnBytes),
		atLeast0("Limits.CacheBytes", l.CacheBytes),
		atLeast0("Limits.CacheResponses", l.CacheResponses),
		atLeast0("Limits.MaxCallsPerStep", l.MaxCallsPerStep),
		atLeast0("Limits.MaxOutputItems", l.MaxOutputItems),
		atLeast0("Limits.MaxOutputBytes", l.MaxOutputBytes),
		atLeast0("Limits.MaxCompactions", l.MaxCompactions),
		atLeast0("Limits.MaxClientSecrets", l.MaxClientSecrets))
}

func (l *Limits) setDefaults() {
	orDefault(&l.MaxFrame, DefaultMaxFrame)
	orDefault(&l.MaxConnections, DefaultMaxConnections)
	orDefault(&l.MaxInFlight, DefaultMaxInFlight)
	orDefault(&l.MaxLanes, DefaultMaxLanes)
	orDefault(&l.MaxQueued, DefaultMaxQueued)
	orDefault(&l.ConnBytes, DefaultConnBytes)
	orDefault(&l.CacheBytes, DefaultCacheBytes)
	orDefault(&l.CacheResponses, DefaultCacheResponses)
	orDefault(&l.MaxCallsPerStep, DefaultMaxCallsPerStep)
	orDefault(&l.MaxOutputItems, DefaultMaxOutputItems)
	orDefault(&l.MaxOutputBytes, DefaultMaxOutputBytes)
	orDefault(&l.MaxCompactions, DefaultMaxCompactions)
	orDefault(&l.MaxClientSecrets, DefaultMaxClientSecrets)
}

func (t *Timeouts) validate() error {
	return errors.Join(
		atLeast0("Timeouts.WSMaxAge", t.WSMaxAge),
		atLeast0("Timeouts.Write", t.Write),
		atLeast0("Timeouts.SlowClient", t.SlowClient),
		atLeast0("Timeouts.Body", t.Body),
		atLeast0("Timeouts.Drain", t.Drain))
}

func (t *Timeouts) setDefaults() {
	orDefault(&t.WSMaxAge, DefaultWSMaxAge)
	orDefault(&t.Write, DefaultWriteTimeout)
	orDefault(&t.SlowClient, DefaultSlowClient)
	orDefault(&t.Body, DefaultBodyTimeout)
	orDefault(&t.Drain, DefaultDrainTimeout)
}

func (s *SuspensionOptions) validate() error {
	return errors.Join(
		atLeast0("Suspension.Timeout", s.Timeout),
		atLeast0("Suspension.ResumeWindow", s.ResumeWindow),
		atLeast0("Suspension.Max", s.Max),
		atLeast0("Suspension.HibernateAfter", s.HibernateAfter),
		atLeast0("Suspension.LeaseTTL", s.LeaseTTL))
}

func (s *SuspensionOptions) setDefaults() {
	orDefault(&s.Timeout, DefaultSuspendTimeout)
	orDefault(&s.ResumeWindow, DefaultResumeWindow)
	orDefault(&s.Max, DefaultMaxSuspended)
	orDefault(&s.LeaseTTL, DefaultLeaseTTL)
}

func (t *TenantLimits) validate() error {
	var rpm error
	if t.RPM < 0 {
		rpm = fmt.Errorf("runtime: Tenant.RPM %d: want 0 (no bound) or more", t.RPM)
	}
	return errors.Join(
		atLeast0("Tenant.InFlight", t.InFlight),
		atLeast0("Tenant.Suspended", t.Suspended),
		atLeast0("Tenant.Conns", t.Conns),
		rpm)
}

// setDefaults leaves RPM alone: its zero is no bound.
func (t *TenantLimits) setDefaults() {
	orDefault(&t.InFlight, DefaultTenantInFlight)
	orDefault(&t.Suspended, DefaultTenantSuspended)
	orDefault(&t.Conns, DefaultTenantConns)
}

// validate is Options.validate's: NewMemoryStore, which returns no error,
// takes a negative bound as zero.
func (b *BackgroundOptions) validate() error {
	return errors.Join(
		atLeast0("Background.Workers", b.Workers),
		atLeast0("Background.Queue", b.Queue),
		atLeast0("Background.Retention", b.Retention))
}

func (b *BackgroundOptions) setDefaults() {
	orDefault(&b.Workers, DefaultBackgroundWorkers)
	orDefault(&b.Queue, DefaultBackgroundQueue)
	orDefault(&b.Retention, DefaultBackgroundRetain)
}

func (m *MemoryStoreOptions) validate() error {
	return errors.Join(
		atLeast0("MemoryStore.MaxRecords", m.MaxRecords),
		atLeast0("MemoryStore.MaxBytes", m.MaxBytes),
		atLeast0("MemoryStore.MaxTenantBytes", m.MaxTenantBytes))
}

// The memory stores' share of the server's memory budget, and a tenant's
// of a store. The budget (Limits.MaxMemory; serve's default, half the
// process's memory limit) bounds what requests in flight hold; the stores
// are held besides it. A quarter of the budget each, for the response
// store and for the conversation store, keeps requests and stores
// together within three quarters of serve's memory limit, the last
// quarter left to connections, suspended rollouts and the garbage the
// collector has yet to take. A tenant's quarter of a store: no one tenant
// holds more, and three quarters stay the others'.
const (
	storeShareOfBudget = 4
	tenantShareOfStore = 4
)

// setServerDefaults fills the zero bounds of a server's stores: MaxBytes
// a share of a memory budget of budget bytes (DefaultStoreBytes when 0);
// MaxTenantBytes all of MaxBytes on a server without keys, whose requests
// are all one tenant's; then setDefaults.
func (m *MemoryStoreOptions) setServerDefaults(budget int64, keys bool) {
	if m.MaxBytes <= 0 && budget > 0 {
		m.MaxBytes = int(max(budget/storeShareOfBudget, 1))
	}
	orDefault(&m.MaxBytes, DefaultStoreBytes)
	if !keys {
		orDefault(&m.MaxTenantBytes, m.MaxBytes)
	}
	m.setDefaults()
}

// setDefaults fills the zero bounds of a store on its own:
// MaxTenantBytes a quarter of MaxBytes.
func (m *MemoryStoreOptions) setDefaults() {
	orDefault(&m.MaxRecords, DefaultStoreMax)
	orDefault(&m.MaxBytes, DefaultStoreBytes)
	orDefault(&m.MaxTenantBytes, max(m.MaxBytes/tenantShareOfStore, 1))
}

// atLeast0 refuses a negative bound, naming its option.
func atLeast0[T int | int64 | time.Duration](name string, v T) error {
	if v < 0 {
		return fmt.Errorf("runtime: %s %v: want 0 (the default) or more", name, v)
	}
	return nil
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
