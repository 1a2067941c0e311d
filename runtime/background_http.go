package runtime

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is background responses' HTTP surface: the create, its
// stream, a stream resumed, a poll and a cancel (background.go runs them).

// checkBackground refuses background_options a request may not have, as
// OpenAI's API does: a window it does not name, or a discounted one ("2h",
// "8h") off the background, streamed, or on a tier other than standard.
func checkBackground(req *protocol.CreateRequest) *protocol.Error {
	o := req.BackgroundOptions
	if o == nil {
		return nil
	}
	const param = "background_options.completion_window"
	switch o.CompletionWindow {
	case "", protocol.WindowSoonest:
		return nil
	case protocol.Window2h, protocol.Window8h:
	default:
		return protocol.Invalid(protocol.CodeInvalidValue, param,
			"Invalid value: '%s'. Supported values are: 'soonest', '2h' and '8h'.", o.CompletionWindow)
	}
	switch {
	case !req.InBackground():
		return protocol.Invalid(protocol.CodeInvalidValue, param,
			"The '%s' completion window requires background: true.", o.CompletionWindow)
	case req.Streaming():
		return protocol.Invalid(protocol.CodeInvalidValue, param,
			"The '%s' completion window requires stream to be false or omitted.", o.CompletionWindow)
	case req.ServiceTier != "" && req.ServiceTier != "auto" && req.ServiceTier != "default":
		return protocol.Invalid(protocol.CodeInvalidValue, param,
			"The '%s' completion window requires standard processing (service_tier 'auto' or 'default', not '%s').", o.CompletionWindow, req.ServiceTier)
	}
	return nil
}

// createInBackground serves a create with background: true, admitted and
// prepared as ro (handleCreate), from a body of size bytes: the response is
// queued, and the client gets it as it stands (queued), or with stream its
// events as they come, while it waits and runs. The response runs on
// whether or not the client stays; what it holds of the memory budget is
// its request's, until it ends, and its log's, while it is kept.
func (s *Server) createInBackground(w http.ResponseWriter, r *http.Request, ro *rollout, size int) {
	held := requestCost(size)
	refuse := func(perr *protocol.Error) {
		s.admission.ResponseDone(ro.tenant) // it never runs: ended does not give it back
		writeError(w, perr)
	}
	if perr := s.mem.Charge(held); perr != nil {
		refuse(perr)
		return
	}
	log := newBGLog(s.mem, ro.req.Streaming())
	ro.announceQueued(log)
	e, perr := s.bg.enqueue(ro, log, held, ro.req.BackgroundOptions, false)
	if perr == nil && s.opts.Backgrounds != nil {
		if perr = s.bg.share(e); perr != nil {
			s.bg.forget(e)
		}
	}
	if perr != nil {
		log.drop()
		s.mem.Refund(held)
		refuse(perr)
		return
	}
	if !ro.req.Streaming() {
		writeBackground(w, e)
		return
	}
	s.streamLog(w, r, e.log, -1)
}

// getQuery is what a GET /v1/responses/{id} asks: stream=true, to have a
// background response's events again after sequence number after
// (starting_after; -1, every one, without it).
type getQuery struct {
	stream bool
	after  int
}

// getQueryOf reads a GET's query, and the JSON body openai-go sends with
// it: its GetStreaming asks for the stream there ({"stream": true}).
func getQueryOf(r *http.Request) (getQuery, *protocol.Error) {
	q := getQuery{after: -1}
	if r.ContentLength != 0 {
		var body struct {
			Stream *bool `json:"stream"`
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxGetBody))
		if len(bytes.TrimSpace(b)) > 0 {
			if err == nil {
				err = protocol.Unmarshal(b, &body)
			}
			if err != nil {
				return q, protocol.Invalid(protocol.CodeInvalidJSON, "", "Could not read the request body: %v.", err)
			}
		}
		q.stream = body.Stream != nil && *body.Stream
	}
	v := r.URL.Query()
	if s := v.Get("stream"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, protocol.Invalid(protocol.CodeInvalidValue, "stream", "Invalid value for 'stream': '%s'. Expected true or false.", s)
		}
		q.stream = b
	}
	if s := v.Get("starting_after"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, protocol.Invalid(protocol.CodeInvalidValue, "starting_after",
				"Invalid value for 'starting_after': '%s'. Expected a sequence number, 0 or more.", s)
		}
		q.after = n
	}
	return q, nil
}

// maxGetBody bounds the body of a GET read for its stream field.
const maxGetBody = 4 << 10

// resumeStream serves GET /v1/responses/{id}?stream=true: every event of
// background response e after sequence number after, then its events as
// they come, to its end. Only a response created with stream: true keeps
// its events, and only while it is kept (Background.Retention).
func (s *Server) resumeStream(w http.ResponseWriter, r *http.Request, e *bgResponse, after int) {
	id := r.PathValue("id")
	if e == nil {
		rec, perr := s.remote(r.Context(), Tenant(r.Context()), id)
		switch {
		case perr != nil:
			writeError(w, perr)
			return
		case rec != nil && !rec.Stream:
			writeError(w, protocol.Invalid(protocol.CodeNotBackground, "stream",
				"Response '%s' was not created with stream: true: its events were not kept. Poll it without stream.", id))
			return
		case rec != nil && rec.Ended && after > rec.Events-1:
			// Until it has ended, its server may have sent the client
			// events the store does not have yet: they are waited for.
			writeError(w, protocol.Invalid(protocol.CodeInvalidValue, "starting_after",
				"starting_after %d is past the last event of response '%s' so far (sequence number %d).", after, id, rec.Events-1))
			return
		case rec != nil:
			s.followRemote(w, r, rec, after)
			return
		}
	}
	switch {
	case e == nil && s.storedOr404(w, r) != nil:
		writeError(w, protocol.Invalid(protocol.CodeNotBackground, "stream",
			"Response '%s' has no events to stream again: only a background response created with stream: true keeps them, for %s after it ends.", id, s.opts.Background.Retention))
		return
	case e == nil:
		return // storedOr404 answered
	case !e.log.events:
		writeError(w, protocol.Invalid(protocol.CodeNotBackground, "stream",
			"Response '%s' was not created with stream: true: its events were not kept. Poll it without stream.", id))
		return
	}
	if last := e.log.last(); after > last {
		writeError(w, protocol.Invalid(protocol.CodeInvalidValue, "starting_after",
			"starting_after %d is past the last event of response '%s' so far (sequence number %d).", after, id, last))
		return
	}
	s.streamLog(w, r, e.log, after)
}

// streamLog writes log's events after sequence number after as server-sent
// events, and then its events as they come, until its end or its client's.
// A stream Shutdown ends gets what the log holds by then.
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, log *bgLog, after int) {
	startSSE(w)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve the next request
	ctx, cancel := s.requestContext(r)
	defer cancel()
	for {
		frames, ended := log.since(ctx, after)
		if ctx.Err() != nil && r.Context().Err() == nil {
			// Shutdown, once its rollouts have ended: what the log holds,
			// their terminal events with it (since does not wait on a
			// context that has ended).
			frames, ended = log.since(ctx, after)
		}
		rc.SetWriteDeadline(time.Now().Add(s.opts.Timeouts.Write))
		for _, f := range frames {
			if _, err := w.Write(f); err != nil {
				return
			}
		}
		if rc.Flush() != nil || ended || ctx.Err() != nil {
			return
		}
		after += len(frames)
	}
}

// startSSE begins an answer of server-sent events.
func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// writeBackground answers with background response e as it stands.
func writeBackground(w http.ResponseWriter, e *bgResponse) {
	resp, err := e.log.response()
	if err != nil {
		writeError(w, protocol.AsError(err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleCancel serves POST /v1/responses/{id}/cancel: a background
// response, queued or running, ends cancelled, and the client gets it as
// it ended, with the output items it had completed. Cancelling it again
// answers the same; one that had ended otherwise is answered as it ended.
// A response that did not run in the background cannot be cancelled.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	e := s.bg.find(Tenant(r.Context()), r.PathValue("id"))
	if e == nil {
		rec, perr := s.remote(r.Context(), Tenant(r.Context()), r.PathValue("id"))
		if rec != nil {
			rec, perr = s.cancelRemote(r.Context(), rec)
		}
		switch {
		case perr != nil:
			writeError(w, perr)
			return
		case rec != nil:
			writeRecord(w, rec)
			return
		}
		if s.storedOr404(w, r) != nil {
			writeError(w, protocol.Invalid(protocol.CodeNotBackground, "response_id",
				"Cannot cancel a synchronous response: only a background response (background: true) can be cancelled."))
		}
		return
	}
	s.bg.cancel(r.Context(), e)
	writeBackground(w, e)
}
