package runtime

import (
	"context"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/internal/flushhold"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/admission"
	"github.com/tether-run/tether/runtime/internal/budget"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/runtime/internal/seal"
	"github.com/tether-run/tether/sampler"
)

// Sampler is a model backend: it samples one step for req, streaming deltas
// through emit on the caller's goroutine. The sampler package provides them.
type Sampler interface {
	Sample(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error)
}

// LogprobSampler is a Sampler that can give its text's log probabilities
// (include message.output_text.logprobs, top_logprobs): the simulated
// models' are synthetic (see sampler.SyntheticLogprob). A request for them
// to a model that cannot give them is refused.
type LogprobSampler interface {
	Logprobs() bool
}

// AgentSampler is a Sampler that runs in a multi-agent response (OpenAI's
// Responses multi-agent beta): the simulated models, whose directives act
// on the agent tree. A multi-agent request to any other is refused: an
// upstream model is offered no agent tools, and tether does not drive each
// agent's steps upstream.
type AgentSampler interface {
	Agents() bool
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

// customCaller is a FixedToolSampler that calls some of its tools as
// custom (freeform) tools: those must be offered as custom tools.
type customCaller interface {
	CustomTool(name string) bool
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
	custom, _ := model.(customCaller)
	var missing []string
	for _, fn := range required {
		// Offered as a function (or a custom tool, for a custom call), and
		// one tool_choice lets it call.
		callable := func(t protocol.Tool) bool {
			if custom != nil && custom.CustomTool(fn) {
				return t.Type == protocol.ToolCustom && t.Name == fn && choice.Allows(t) &&
					(choice.Custom == "" || choice.Custom == fn) && choice.Function == "" && choice.Builtin == ""
			}
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
		"Model '%s' replays a rollout that calls %s; the request does not offer %s (or its tool_choice does not let the model call them). Offer them as function tools, or custom tools where the rollout called one (tether run does)%s",
		name, andList(required), andList(missing), instead)
}

// Server serves the Responses API over WebSocket and HTTP. It is an
// http.Handler; call Shutdown to drain WebSocket sessions.
type Server struct {
	opts     Options
	models   map[string]Sampler
	renderer *sampler.Renderer
	hosted   map[protocol.ToolType]Tool
	store    Store
	convs    ConversationStore // the Conversations API's: the Store's when it is one
	sealer   *seal.Sealer
	segments CompactionSegments // the Store's, when it keeps them (contextsegments.go)
	windows  *windowCache       // compaction windows opened or sealed lately
	log      *slog.Logger
	now      func() time.Time
	tick     func() time.Time // the clock for a frame's timings: now, or monoNow when now is time.Now
	ownClock bool             // Options.Now was given: now and tick are not the network's clock
	mux      *http.ServeMux
	obs      Observer
	hooks    Hooks
	holds    *flushhold.Policy  // when the connections' writers hold their flushes (Options.EngineLate)
	flushers *flushers.Flushers // the WebSocket connections' writers, a few goroutines for all (one a P)

	ctx    context.Context    // parent of suspended rollouts; cancelled by Shutdown
	cancel context.CancelFunc //

	admission *admission.Admission // connections, responses in progress, request rates
	mem       *budget.Budget       // Limits.MaxMemory: what requests in progress and connection caches hold
	secrets   *clientSecrets       // POST /v1/client_secrets, redeemed by browsers' sessions
	suspended *suspendedSet        // suspended rollouts by id, and their tails
	leases    *leases              // on the durable rollouts it runs (lease.go)
	bg        *backgrounds         // background responses, queued, running and kept (background.go)

	// What Shutdown drains (shutdown.go).
	mu       lockrank.Mutex[lockrank.Server]
	sessions map[*session]struct{} // guarded by mu
	rollouts map[*rollout]struct{} // every rollout running; guarded by mu
	changed  chan struct{}         // 1-buffered: a rollout ended or parked
	closed   bool                  // Shutdown has begun; guarded by mu
	aborting bool                  // and its drain is over; guarded by mu
	wg       sync.WaitGroup        // one per live session, per suspended rollout and per hook's later work
}

// monoStart and monoNow: time.Now read off the monotonic clock alone, one
// clock read where time.Now makes two (the wall clock's too). Each frame's
// timings (its encoding, its wait in the outbox, its write) read the clock
// several times, and at 500 streams time.Now was 4.5% of the server's CPU.
// Its wall reading is the process start's plus the time since, which a
// change of the system clock does not move: for durations and deadlines,
// not for timestamps.
var monoStart = time.Now()

func monoNow() time.Time { return monoStart.Add(time.Since(monoStart)) }

// NewServer returns a Server with opts' defaults filled in.
func NewServer(opts Options) (*Server, error) {
	s := &Server{opts: opts, sessions: make(map[*session]struct{}), rollouts: map[*rollout]struct{}{}, changed: make(chan struct{}, 1)}
	s.mem = budget.New(s.opts.Limits.MaxMemory)
	s.suspended = newSuspendedSet(&s.opts, func() time.Time { return s.now() }, s.mem)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.opts.validate(); err != nil {
		s.cancel()
		return nil, err
	}
	s.tick, s.ownClock = opts.Now, opts.Now != nil
	if s.tick == nil {
		s.tick = monoNow
	}
	s.opts.setDefaults()
	s.secrets = newClientSecrets(s.opts.SecretKey, s.opts.Store, s.opts.Limits.MaxClientSecrets)
	s.leases = newLeases(s)
	s.bg = newBackgrounds(s)
	s.admission = admission.New(admission.Limits{Conns: s.opts.Limits.MaxConnections, TenantConns: s.opts.Tenant.Conns,
		TenantInFlight: s.opts.Tenant.InFlight, TenantRPM: s.opts.Tenant.RPM})
	s.hosted = make(map[protocol.ToolType]Tool, len(s.opts.HostedTools))
	for _, t := range s.opts.HostedTools {
		s.hosted[t.Definition().Type] = t
	}
	s.now, s.log, s.obs, s.hooks = s.opts.Now, s.opts.Logger, s.opts.Observer, s.opts.Hooks
	s.holds = flushhold.New(flushhold.Options{Late: s.opts.EngineLate})
	s.flushers = flushers.New(goruntime.GOMAXPROCS(0))
	s.renderer = s.opts.Renderer
	if s.renderer == nil {
		r, err := sampler.NewRenderer()
		if err != nil {
			return nil, err
		}
		s.renderer = r
	}
	s.models = s.opts.Models
	if s.models == nil {
		s.models = map[string]Sampler{"tether-scripted": sampler.NewScripted(s.renderer, sampler.Timing{})}
	}
	inner := s.opts.Store
	if inner == nil {
		inner = NewMemoryStore(s.opts.MemoryStore)
	}
	s.store = scopedStore{inner}
	s.convs, _ = inner.(ConversationStore)
	if s.convs == nil {
		s.convs = NewMemoryConversations(s.opts.MemoryStore.MaxBytes, s.opts.MemoryStore.MaxTenantBytes)
	}
	sl, err := seal.New(s.opts.CompactionKey)
	if err != nil {
		return nil, err
	}
	s.sealer = sl
	s.segments, _ = inner.(CompactionSegments)
	s.windows = newWindowCache(s.opts.Limits.MaxMemory)
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
	if !ok {
		return
	}
	authenticated(r)
	if h, pattern := s.mux.Handler(r); pattern == "" {
		notRouted(w, r, h)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// admitConn takes a connection slot for tenant, or says why there is none
// (the server is shutting down, or at a limit); releaseConn gives it back.
func (s *Server) admitConn(tenant string) *protocol.Error {
	if s.closing() {
		return errShutdown()
	}
	return s.admission.Conn(tenant)
}

func (s *Server) releaseConn(tenant string) { s.admission.ConnDone(tenant) }

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
// Shutdown waits for it (until it settles or expires).
func (s *Server) register(sp *suspension) *protocol.Error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errShutdown()
	}
	s.wg.Add(1) // done when its goroutine ends (start)
	s.mu.Unlock()
	if perr := s.suspended.add(sp); perr != nil {
		s.wg.Done()
		return perr
	}
	return nil
}

// unregister takes back the registration of a rollout that will not start
// (a takeover that lost its race for the rollout).
func (s *Server) unregister(sp *suspension) {
	s.suspended.remove(sp)
	s.wg.Done() // added by register
}

// writeError writes an HTTP error body.
func writeError(w http.ResponseWriter, perr *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	if perr.Code == protocol.CodeServerMemory {
		w.Header().Set("Retry-After", "1") // requests in progress end within seconds, most of them
	}
	w.WriteHeader(perr.Status)
	w.Write(perr.HTTPErrorBody())
}
