package runtime

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tether-run/tether/internal/flushers"
	"github.com/tether-run/tether/runtime/internal/ids"
	"github.com/tether-run/tether/runtime/internal/seal"

	"github.com/tether-run/tether/protocol"
)

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/responses", s.serveWebSocket)
	m.HandleFunc("POST /v1/responses", s.handleCreate)
	m.HandleFunc("POST /v1/responses/compact", s.handleCompact)
	m.HandleFunc("POST /v1/responses/input_tokens", s.handleInputTokens)
	m.HandleFunc("GET /v1/responses/{id}", s.handleGet)
	m.HandleFunc("DELETE /v1/responses/{id}", s.handleDelete)
	m.HandleFunc("POST /v1/responses/{id}/cancel", s.handleCancel)
	m.HandleFunc("GET /v1/responses/{id}/input_items", s.handleInputItems)
	m.HandleFunc("POST /v1/conversations", s.handleConversationCreate)
	m.HandleFunc("GET /v1/conversations/{id}", s.handleConversationGet)
	m.HandleFunc("POST /v1/conversations/{id}", s.handleConversationUpdate)
	m.HandleFunc("DELETE /v1/conversations/{id}", s.handleConversationDelete)
	m.HandleFunc("GET /v1/conversations/{id}/items", s.handleConversationItems)
	m.HandleFunc("POST /v1/conversations/{id}/items", s.handleConversationAdd)
	m.HandleFunc("GET /v1/conversations/{id}/items/{item}", s.handleConversationItem)
	m.HandleFunc("DELETE /v1/conversations/{id}/items/{item}", s.handleConversationItemDelete)
	m.HandleFunc("GET /v1/models", s.handleModels)
	m.HandleFunc("GET /v1/models/{id}", s.handleModel)
	m.HandleFunc("POST /v1/chat/completions", s.handleChat)
	m.HandleFunc("POST /v1/client_secrets", s.handleClientSecret)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux = m
}

// Handle serves h on pattern (as http.ServeMux takes it) beside the API,
// behind the server's keys and access log: an embedder mounts there what
// the runtime does not serve itself, such as /debug/pprof/. Call it before
// the server serves; it panics on a pattern the API already serves, as
// http.ServeMux does.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// TLSListener returns l ready to go under the TLS server that serves the
// runtime's WebSockets (http.Server.ServeTLS(TLSListener(l), ...)): the
// server's flushers then seal a connection's frames into TLS records in
// memory and write those without waiting, as they write a plain
// WebSocket's. Under any other listener, a TLS connection's batches are
// written by a writer goroutine of the connection's own, each time frames
// come. Connections that are not WebSockets are written as they would be
// over l itself.
func TLSListener(l net.Listener) net.Listener { return flushers.Listener(l) }

// readBody reads at most Limits.MaxFrame bytes of a request body, within
// Timeouts.Body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *protocol.Error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.Timeouts.Body)) // not every ResponseWriter can: then there is none
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.Limits.MaxFrame))
	rc.SetReadDeadline(time.Time{})
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, protocol.Errorf(http.StatusRequestTimeout, protocol.CodeRequestTimeout, "",
			"The request body did not arrive within %s.", s.opts.Timeouts.Body)
	case errors.As(err, &tooBig):
		return nil, protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeRequestTooLarge, "",
			"The request body exceeds the %d-byte limit of this server (Limits.MaxFrame).", tooBig.Limit)
	case err != nil:
		return nil, protocol.Invalid(protocol.CodeInvalidJSON, "", "Could not read the request body: %v.", err)
	}
	return body, nil
}

// readHeldBody is readBody for a request that is served from its body (a
// create, a chat completion): the memory budget is taken for it (by its
// Content-Length before it is read, when it has one) and held until done
// is called, when the request has been served.
func (s *Server) readHeldBody(w http.ResponseWriter, r *http.Request) (body []byte, done func(), perr *protocol.Error) {
	var held int64
	done = func() { s.mem.Refund(held) }
	if n := r.ContentLength; n > 0 && n <= s.opts.Limits.MaxFrame {
		if perr := s.mem.Charge(requestCost(int(n))); perr != nil {
			return nil, done, perr
		}
		held = requestCost(int(n))
	}
	if body, perr = s.readBody(w, r); perr != nil {
		return nil, done, perr
	}
	if more := requestCost(len(body)) - held; more > 0 { // a body of no stated length
		if perr := s.mem.Charge(more); perr != nil {
			return nil, done, perr
		}
		held += more
	}
	return body, done, nil
}

// handleCreate serves POST /v1/responses: JSON, or SSE when stream is true.
// The state comes from the request alone (stateless) or from the store
// (previous_response_id): HTTP has no connection to cache it on.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	if s.closing() {
		writeError(w, errShutdown())
		return
	}
	body, done, perr := s.readHeldBody(w, r)
	defer done()
	if perr != nil {
		writeError(w, perr)
		return
	}
	t0 := s.now()
	req, perr := protocol.DecodeCreateRequest(body)
	if perr != nil {
		writeError(w, perr)
		return
	}
	if perr := checkBackground(req); perr != nil {
		writeError(w, perr)
		return
	}
	if req.Suspend != nil && *req.Suspend {
		writeError(w, protocol.Invalid(protocol.CodeUnsupportedParameter, "suspend",
			"Suspended rollouts need a connection to park on: use the WebSocket endpoint (GET /v1/responses)."))
		return
	}
	t1 := s.now()
	tm := protocol.Timings{DecodeMicros: t1.Sub(t0).Microseconds()}
	var parent *conversation
	path := ServePath{Transport: transportHTTP, Design: designStateless, State: stateNone}
	if parent, perr = s.parentOf(r.Context(), req); perr != nil {
		writeError(w, perr)
		return
	}
	if parent != nil {
		path.Design, path.State = designChained, stateStore
		tm.LoadMicros = s.now().Sub(t1).Microseconds()
	}
	tenant := Tenant(r.Context())
	if perr := s.admission.Response(tenant); perr != nil {
		writeError(w, perr)
		return
	}
	ro, perr := s.prepare(r.Context(), req, parent, t0, tm)
	if perr != nil {
		s.admission.ResponseDone(tenant)
		writeError(w, perr)
		return
	}
	ro.tenant, ro.inFlightHeld = tenant, true
	ro.path = path
	served(r)
	if req.InBackground() {
		s.createInBackground(w, r, ro, len(body))
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if !req.Streaming() {
		_, err := ro.run(ctx, discard{})
		switch {
		case err != nil && (s.ctx.Err() == nil || r.Context().Err() != nil):
			return // the client went away
		case err != nil || ro.resp.Error != nil && ro.resp.Error.Code == protocol.CodeShuttingDown:
			writeError(w, errShutdown()) // cut by Shutdown
			return
		}
		writeJSON(w, http.StatusOK, ro.resp)
		return
	}
	streamSSE(ctx, w, ro)
}

// requestContext is r's context, ended by Shutdown too: http.Server.Shutdown
// would otherwise wait for the longest stream.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		writeError(w, protocol.AsError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (s *Server) storedOr404(w http.ResponseWriter, r *http.Request) *Record {
	id := r.PathValue("id")
	rec, err := s.store.Get(r.Context(), id)
	if err != nil {
		if errors.Is(err, ErrNotStored) {
			writeError(w, protocol.Errorf(http.StatusNotFound, protocol.CodeResponseNotFound, "response_id",
				"Response with id '%s' not found.", id))
		} else {
			writeError(w, protocol.AsError(err))
		}
		return nil
	}
	return rec
}

// handleGet serves GET /v1/responses/{id}: the response as it stands (a
// background one's, while it is kept, or the stored one's), or with
// stream=true a background response's events again (resumeStream).
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	q, perr := getQueryOf(r)
	if perr != nil {
		writeError(w, perr)
		return
	}
	e := s.bg.find(Tenant(r.Context()), r.PathValue("id"))
	switch {
	case q.stream:
		s.resumeStream(w, r, e, q.after)
	case e != nil:
		writeBackground(w, e)
	default:
		rec, perr := s.remote(r.Context(), Tenant(r.Context()), r.PathValue("id"))
		if perr != nil {
			writeError(w, perr)
			return
		} else if rec != nil {
			writeRecord(w, rec)
			return
		}
		if rec := s.storedOr404(w, r); rec != nil {
			writeJSON(w, http.StatusOK, rec.Response)
		}
	}
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.storedOr404(w, r) == nil {
		return
	}
	if err := s.store.Delete(r.Context(), id); err != nil && !errors.Is(err, ErrNotStored) {
		writeError(w, protocol.AsError(err))
		return
	}
	writeJSON(w, http.StatusOK, protocol.Deleted{ID: id, Object: "response.deleted", Deleted: true})
}

// handleInputItems lists a stored response's input items (writeItemPage).
func (s *Server) handleInputItems(w http.ResponseWriter, r *http.Request) {
	rec := s.storedOr404(w, r)
	if rec == nil {
		return
	}
	writeItemPage(w, r, rec.inputs())
}

// writeItemPage writes a page of items as the API lists them
// (itemPageOf, pageOf).
func writeItemPage(w http.ResponseWriter, r *http.Request, all protocol.Items) {
	q, perr := itemPageOf(r)
	if perr != nil {
		writeError(w, perr)
		return
	}
	writePage(w, all, q)
}

// handleInputTokens serves POST /v1/responses/input_tokens: how many
// tokens the request's first step would read, counted as its response's
// usage.input_tokens is (instructions and tools, the stored chain of
// previous_response_id, the input). The request is checked as a create's
// is; nothing runs. Without a model it is counted as for the first one
// served: they share one tokenizer.
func (s *Server) handleInputTokens(w http.ResponseWriter, r *http.Request) {
	req, done, ok := s.readCreateRequest(w, r)
	defer done()
	if !ok {
		return
	}
	var perr *protocol.Error
	if req.Model == "" {
		req.Model = s.ModelNames()[0]
	}
	parent, perr := s.parentOf(r.Context(), req)
	if perr != nil {
		writeError(w, perr)
		return
	}
	ro, perr := s.prepare(r.Context(), req, parent, s.now(), protocol.Timings{})
	if perr != nil {
		writeError(w, perr)
		return
	}
	_, prompt := ro.read() // truncated to the model's window, with truncation auto
	writeJSON(w, http.StatusOK, protocol.InputTokens{Object: "response.input_tokens", InputTokens: len(ro.header) + prompt.Len()})
}

// readCreateRequest reads and decodes a request body of a create's form
// (compact and input_tokens take one), holding the memory budget for it
// until done is called, or answers the error and reports false.
func (s *Server) readCreateRequest(w http.ResponseWriter, r *http.Request) (req *protocol.CreateRequest, done func(), ok bool) {
	body, done, perr := s.readHeldBody(w, r)
	if perr == nil {
		if req, perr = protocol.DecodeCreateRequest(body); perr == nil {
			return req, done, true
		}
	}
	writeError(w, perr)
	return nil, done, false
}

// notRouted answers a request no route takes, with the API's JSON error
// where http.ServeMux would write plain text: 404 for a path it does not
// serve (as OpenAI: "Invalid URL"), 405 with Allow for a method the path
// does not take. h is the mux's own handler for it, whose status it keeps.
func notRouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		writeError(w, protocol.Errorf(http.StatusNotFound, "", "", "Invalid URL (%s %s)", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeError(w, protocol.Errorf(http.StatusMethodNotAllowed, "", "", "Method %s is not allowed on %s (it takes %s).",
			r.Method, r.URL.Path, rec.header.Get("Allow")))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	}
}

// statusRecorder keeps what the mux's fallback handler wrote.
type statusRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, b...)
	return len(b), nil
}

// handleCompact seals the whole context (stored chain + input) into one
// compaction item. A later request that sends the item as input sees the
// compacted items again, in order.
func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	req, done, ok := s.readCreateRequest(w, r)
	defer done()
	if !ok {
		return
	}
	if strings.TrimSpace(req.Model) == "" {
		writeError(w, protocol.Invalid(protocol.CodeMissingRequired, "model", "Missing required parameter: 'model'."))
		return
	}
	if req.MultiAgentEnabled() {
		writeError(w, protocol.Invalid(protocol.CodeUnsupportedParameter, "multi_agent",
			"Unsupported parameter: 'multi_agent' is not supported by /responses/compact: a multi-agent response compacts its context itself (context_management sets the threshold)."))
		return
	}
	if _, perr := s.model(req.Model); perr != nil {
		writeError(w, perr)
		return
	}
	if perr := protocol.ValidateItems(req.Input, "input"); perr != nil {
		writeError(w, perr)
		return
	}
	var items protocol.Items
	parent, perr := s.parentOf(r.Context(), req)
	if perr != nil {
		writeError(w, perr)
		return
	}
	if parent != nil {
		items = parent.items
	}
	input, _, perr := s.expand(req.Input, items, "input", s.storedItems(r.Context()))
	if perr != nil {
		writeError(w, perr)
		return
	}
	items = append(append(protocol.Items{}, items...), input...)
	if len(items) == 0 {
		writeError(w, protocol.Invalid(protocol.CodeMissingRequired, "input", "Missing required parameter: 'input': there is nothing to compact."))
		return
	}
	sealed, err := s.sealer.Seal(seal.Payload{Items: items})
	if err != nil {
		writeError(w, protocol.AsError(err))
		return
	}
	tokens := 0
	for _, it := range items {
		tokens += len(s.renderer.Item(it))
	}
	out := protocol.CompactResponse{
		ID:        ids.New("resp"),
		Object:    "response.compaction",
		CreatedAt: s.now().Unix(),
		Output:    protocol.Items{&protocol.Compaction{ID: ids.New("cmp"), EncryptedContent: sealed}},
		Usage:     protocol.Usage{InputTokens: tokens, TotalTokens: tokens},
	}
	writeJSON(w, http.StatusOK, out)
}
