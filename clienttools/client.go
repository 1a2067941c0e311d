package clienttools

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Mode is the design a rollout runs in.
type Mode int

// The modes, one per design, in the order a comparison lists them.
const (
	// ModeSuspend runs the rollout as one suspended response over WebSocket:
	// each pause (response.done) is answered with one response.append.
	ModeSuspend Mode = iota
	// ModeInject runs the rollout as one response in the dialect of
	// OpenAI's Responses multi-agent beta, over WebSocket: the response
	// stays in_progress while it waits on the client's calls, and each
	// wait is answered with one response.inject. The kit asks for
	// response.waiting (protocol.IncludeWaits, tether's own) to learn
	// where each step ends and what it cost: it runs against tether.
	ModeInject
	// ModeTurns runs each turn as a WebSocket response.create with
	// previous_response_id and store false: the server's connection cache
	// holds the state.
	ModeTurns
	// ModeChained runs each turn as an HTTP POST with store true and
	// previous_response_id: the server's store holds the state.
	ModeChained
	// ModeBackground runs each turn as ModeChained does, as a background
	// response (background true), which the server runs whether or not
	// its client reads: on every turn the client cuts the stream once the
	// response is in progress and resumes it with GET
	// /v1/responses/{id}?stream=true&starting_after=N, N the last
	// sequence_number it read, checking that the events go on without a
	// gap or a repeat (Result.Resumes counts the resumes). What it costs
	// beside chained is the server's handling of a background response
	// and one resume a turn.
	ModeBackground
	// ModeStateless runs each turn as an HTTP POST with the whole history
	// and store false: the baseline.
	ModeStateless
)

// Modes lists every mode.
var Modes = []Mode{ModeSuspend, ModeInject, ModeTurns, ModeChained, ModeBackground, ModeStateless}

var modeNames = [...]string{"suspend", "inject", "turns", "chained", "background", "stateless"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return modeNames[m]
}

// ParseMode returns the mode named s (suspend, inject, turns, chained,
// background, stateless).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want suspend, inject, turns, chained, background or stateless)", s)
}

// DefaultMaxParallel is how many client tool calls of one step run at once
// when Client.MaxParallel is 0.
const DefaultMaxParallel = 8

// Client runs rollouts against a Responses server: tether, or any server
// that speaks the modes used. The zero value with a BaseURL is usable; a
// Client is safe for concurrent use.
type Client struct {
	// BaseURL is the API base as OpenAI clients take it: http://HOST:PORT/v1.
	// The WebSocket endpoint is derived from it.
	BaseURL string
	// Fallbacks are the bases of other servers that share BaseURL's store
	// (tether serve --store redis://…, where suspended rollouts are
	// durable): a suspended rollout whose connection drops, or closes
	// with 1012 as its server restarts, is resumed on the server it was
	// on, and when that fails on the next of them (BaseURL among them, in
	// turn).
	Fallbacks []string
	// OwnerWait is how long a suspended rollout whose servers keep
	// answering response_owned_elsewhere is resumed, on each in turn,
	// before Run gives up: another server runs the rollout, or a dead
	// one's lease has yet to run out (tether serve --lease-ttl). Zero is
	// DefaultOwnerWait.
	OwnerWait time.Duration
	// APIKey is sent as a bearer token when set.
	APIKey string
	// HTTPClient makes the HTTP requests and WebSocket handshakes; nil is
	// http.DefaultClient.
	HTTPClient *http.Client
	// MaxParallel bounds the client tool calls of one step that run at
	// once; 0 means DefaultMaxParallel.
	MaxParallel int
	// Encoding is the frames' encoding on a WebSocket (turns and suspended
	// rollouts): JSON, the zero value, or msgpack, asked for with the
	// msgpack subprotocol (binary frames of the same objects). HTTP is
	// JSON whatever it says.
	Encoding protocol.Encoding
	// Transport carries the WebSocket designs: a WebSocket (the zero
	// value), or WebTransport, for which BaseURL is the server's
	// WebTransport address, https://HOST:PORT/v1 (tether serve --wt-addr),
	// and each rollout runs on a stream of a connection of its own.
	Transport Transport
	// CertHash pins the WebTransport server's certificate by its SHA-256,
	// in hex, as tether serve prints it: the certificate need not chain to
	// a root (a self-signed one). TLSConfig, if set, is used instead;
	// neither: the system's roots.
	CertHash  string
	TLSConfig *tls.Config
	// Eager starts a client call as soon as its function_call item is done,
	// before the step's pause (or the turn's end), so that the tool
	// overlaps the rest of the step.
	Eager bool
}

// Rollout is one rollout to run.
type Rollout struct {
	Mode Mode
	// Request is the first request: model, instructions, input, tools and
	// sampling options. The client sets what the mode decides (suspend,
	// store, stream, background, previous_response_id) and declares Funcs
	// in tools unless the request already does.
	Request *protocol.CreateRequest
	// Funcs are the client tools the model may call.
	Funcs []Func
	// OnEvent, if set, sees every server event in order, on the goroutine
	// that called Run (responses without their tools, as Result.Response).
	OnEvent func(protocol.Event)
	// Events, if set, are the event types OnEvent sees (Branch: every
	// OnEvent). The client then decodes only those and the events it
	// reads itself (the items done, a response's pauses and ends): a client
	// that watches the deltas does not decode the response objects, parts
	// and texts it would never look at, most of its decoding. Without
	// OnEvent, only the client's own are decoded.
	Events []protocol.EventType
	// OnCall, if set, sees every client call once it has run, in the order
	// of the calls of its step, on the goroutine that called Run, before
	// the outputs are sent.
	OnCall func(Call)
	// Approve, if set, answers the approval requests of the server's
	// hosted mcp tools (a Call of Type protocol.ItemMCPApprovalRequest,
	// whose Namespace is the server's label): true lets the call run on
	// the MCP server. Nil denies them all: nothing runs on an MCP server
	// unless the client lets it.
	Approve func(ctx context.Context, call Call) bool
}

// ResponseError is the error of a rollout whose response failed or was
// cancelled; Run returns it with the Result.
type ResponseError struct {
	Status protocol.ResponseStatus
	Code   string
	Msg    string
}

func (e *ResponseError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("response %s", e.Status)
	}
	return fmt.Sprintf("response %s: %s: %s", e.Status, e.Code, e.Msg)
}

// Run runs one rollout to its end and returns what it left. A response
// that fails or is cancelled returns the Result so far with a
// *ResponseError; one that ends incomplete is a normal end (see
// Result.Response.Status). A request the server refuses (an error event)
// returns an error that wraps its *protocol.Error. Tool goroutines are joined before Run returns.
func (c *Client) Run(ctx context.Context, ro Rollout) (*Result, error) {
	if ro.Request == nil {
		return nil, fmt.Errorf("clienttools: Rollout.Request is nil")
	}
	r := c.newRun(ro)
	ctx, cancel := context.WithCancel(ctx)
	defer r.exec.wait()
	defer cancel()
	var err error
	switch ro.Mode {
	case ModeSuspend:
		err = r.suspended(ctx)
	case ModeInject:
		err = r.injected(ctx)
	case ModeTurns:
		err = r.turns(ctx)
	case ModeChained, ModeBackground, ModeStateless:
		err = r.http(ctx)
	default:
		err = fmt.Errorf("clienttools: unknown mode %d", int(ro.Mode))
	}
	r.res.Elapsed = time.Since(r.start)
	if err == nil {
		err = r.endErr()
	}
	return &r.res, err
}

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

func (c *Client) header() http.Header {
	h := http.Header{}
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
	return h
}

// run is one Run's state, owned by Run's goroutine.
type run struct {
	c        *Client
	ro       Rollout
	exec     *executor
	start    time.Time
	res      Result
	turn     *Turn
	last     time.Time        // the current turn's last event
	paid     protocol.Usage   // the current response's usage counted in turns so far, every agent's
	rootPaid protocol.Usage   // its root agent's usage at its last pause (or wait)
	paidTime protocol.Timings // its server timings then
	// agents are a multi-agent response's sub-agents' usage and timings
	// at their last waits, by agent; callAgents the sub-agent that made
	// each call, by call_id.
	agents     map[string]spent
	callAgents map[string]string
}

// filter is what a rollout's connections decode whole: the events the
// client reads itself and those OnEvent is to see; nil, when that is every
// event.
func (ro *Rollout) filter() eventFilter {
	if ro.OnEvent != nil && ro.Events == nil {
		return nil
	}
	var shown []protocol.EventType
	if ro.OnEvent != nil {
		shown = ro.Events
	}
	return func(t protocol.EventType) bool { return readsEvent(t) || slices.Contains(shown, t) }
}

// readsEvent reports whether the client reads events of type t itself (in
// readTurn, resumingConn), whole. It reads a pause (response.done) too, but
// only its calls and usage: unless OnEvent is to see it, it is decoded
// without its output (protocol.DecodeEventSkipping), whose items the
// step's output_item.done events brought.
func readsEvent(t protocol.EventType) bool {
	switch t {
	case protocol.EventOutputItemDone, protocol.EventCreated, protocol.EventCompleted,
		protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled,
		protocol.EventStepRestarted, protocol.EventWaiting, protocol.EventError:
		return true
	}
	return false
}

// shows reports whether OnEvent is to see ev.
func (ro *Rollout) shows(ev protocol.Event) bool {
	if ro.OnEvent == nil {
		return false
	}
	if _, skipped := ev.(*protocol.SkippedEvent); skipped {
		return false
	}
	return ro.Events == nil || slices.Contains(ro.Events, protocol.Type(ev))
}

// request is the rollout's request for one turn: the caller's, with the
// client tools declared.
func (r *run) request(input protocol.Items) *protocol.CreateRequest {
	req := *r.ro.Request
	req.Input = input
	req.Tools = slices.Clone(req.Tools)
	for _, f := range r.ro.Funcs {
		def := f.Definition()
		if !slices.ContainsFunc(req.Tools, func(t protocol.Tool) bool { return t.Type == def.Type && t.Name == def.Name }) {
			req.Tools = append(req.Tools, def)
		}
	}
	return &req
}

// runCalls runs the turn's client calls (those Eager started are only
// waited for) and returns their outputs, in the calls' order.
func (r *run) runCalls(ctx context.Context, calls []protocol.Call) (protocol.Items, error) {
	done, err := r.exec.finish(ctx, len(r.res.Turns)-1, calls)
	if err != nil {
		return nil, err
	}
	return r.finished(done), nil
}

// finished counts the current turn's calls, done, and returns their
// outputs, in the calls' order.
func (r *run) finished(done []Call) protocol.Items {
	for i := range done {
		done[i].Agent = r.callAgents[done[i].CallID]
	}
	r.turn.Tools = time.Since(r.last)
	r.turn.Calls = len(done)
	outs := make(protocol.Items, len(done))
	for i := range done {
		outs[i] = done[i].output()
	}
	r.res.Calls = append(r.res.Calls, done...)
	if r.ro.OnCall != nil {
		for _, c := range done {
			r.ro.OnCall(c)
		}
	}
	return outs
}

// openCalls lists the calls a finished response left for the client (of
// every client type), in output order.
func openCalls(resp *protocol.Response) []protocol.Call {
	var calls []protocol.Call
	for _, it := range resp.Output {
		if c, ok := protocol.CallOf(it); ok && c.Status != protocol.StatusIncomplete {
			calls = append(calls, c)
		}
	}
	return calls
}

// endErr is the error of a rollout whose last response did not end well.
func (r *run) endErr() error {
	resp := r.res.Response
	if resp == nil {
		return nil
	}
	switch resp.Status {
	case protocol.ResponseFailed, protocol.ResponseCancelled:
		e := &ResponseError{Status: resp.Status}
		if resp.Error != nil {
			e.Code, e.Msg = resp.Error.Code, resp.Error.Message
		}
		return e
	}
	return nil
}

// addUsage counts a finished response's usage and server timings.
func (r *run) addUsage(resp *protocol.Response) {
	if resp.Usage != nil {
		r.res.Usage.Add(*resp.Usage)
	}
	if t := resp.Timings; t != nil {
		r.res.Server.Add(*t)
	}
}

// errorOf is the error of an error event: a request the server refused, or
// a stream it ended with an error. errors.As finds its *protocol.Error.
func errorOf(ev *protocol.ErrorEvent) error {
	return fmt.Errorf("the server sent an error: %w", payloadError(ev.Error, 0))
}

// payloadError is the *protocol.Error of an error's wire form, with the
// HTTP status it came with (0 when it came in an event).
func payloadError(p protocol.ErrorPayload, status int) *protocol.Error {
	pe := &protocol.Error{Status: status, Type: p.Type, Message: p.Message}
	if p.Code != nil {
		pe.Code = *p.Code
	}
	if p.Param != nil {
		pe.Param = *p.Param
	}
	return pe
}

// ended reports whether a response event ends its response.
func ended(ev *protocol.ResponseEvent) bool { return ev.Type != protocol.EventDone }

func ptr[T any](v T) *T { return &v }
