package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
)

// serveWebSocket upgrades GET /v1/responses and runs the session until the
// client goes away or the server shuts down. A plain GET (no Upgrade) is a
// 400 that says what the endpoint expects.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if !headerContains(r.Header, "Connection", "upgrade") || !headerContains(r.Header, "Upgrade", "websocket") {
		writeError(w, protocol.Invalid(protocol.CodeInvalidValue, "", "GET /v1/responses is the WebSocket endpoint: connect with a WebSocket client, or POST to create a response over HTTP."))
		return
	}
	if perr := s.admitConn(Tenant(r.Context())); perr != nil {
		writeError(w, perr)
		return
	}
	cw := &corkingWriter{ResponseWriter: w}
	conn, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		// Codex offers permessage-deflate (with context takeover); openai-go does not.
		CompressionMode: websocket.CompressionContextTakeover,
		// A client that offers the msgpack subprotocol gets every frame
		// as msgpack binary (see session.encoding); JSON text otherwise.
		Subprotocols: []string{protocol.EncodingMsgpack.String()},
	})
	if err != nil {
		s.mu.Lock()
		s.conns[Tenant(r.Context())]--
		s.mu.Unlock()
		return // Accept has written the HTTP error
	}
	conn.SetReadLimit(s.opts.MaxFrame)
	sess := newSession(s, conn, r)
	sess.cork = cw.conn
	if !s.track(sess) {
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	// The session runs on a goroutine of its own and the handler returns,
	// so that net/http lets go of what it kept for the connection (its
	// write buffer, the handler's deep stack): thousands of idle
	// connections, each holding a parked rollout, feel every KB. Shutdown
	// waits for tracked sessions.
	ctx := context.WithoutCancel(r.Context()) // the request's ends with the handler
	go func() {
		defer s.untrack(sess)
		sess.run(ctx)
	}()
}

// peekFrame is the frame size from which the read loop checks a create
// against the connection's byte budget before decoding it.
const peekFrame = 64 << 10

// readLoop reads frames until the connection fails; it runs on the
// session's own goroutine. Every frame gets an answer: events, or an error event.
func (sess *session) readLoop(ctx context.Context) error {
	for {
		typ, data, err := sess.conn.Read(ctx)
		if err != nil {
			return err
		}
		received := sess.srv.now()
		enc := protocol.EncodingJSON
		switch {
		case typ == websocket.MessageBinary && sess.encoding == protocol.EncodingMsgpack:
			enc = protocol.EncodingMsgpack
		case typ != websocket.MessageText:
			sess.sendError(protocol.Invalid(protocol.CodeBinaryFrame, "",
				"Binary frames are not supported on this connection: send each client event as one JSON text frame (or connect with the msgpack subprotocol)."), "")
			continue
		}
		if len(data) > peekFrame {
			// A large create past the connection's budget is refused
			// before it is decoded (or transcoded) into a copy of itself.
			if typ, lane, ok := protocol.PeekClientEventAs(enc, data); ok && typ == protocol.ClientCreate {
				if perr := sess.overBudget(len(data)); perr != nil {
					sess.sendError(perr, lane)
					continue
				}
			}
		}
		if enc == protocol.EncodingMsgpack {
			if data, err = protocol.MsgpackToJSON(data); err != nil {
				sess.sendError(protocol.Invalid(protocol.CodeInvalidJSON, "",
					"Invalid frame: every client event must be one msgpack map on this connection (%s).", err), "")
				continue
			}
		}
		ev, lane, perr := protocol.DecodeClientEvent(data)
		decodeMicros := sess.srv.now().Sub(received).Microseconds()
		if perr != nil {
			if outOfBand(data) {
				// Answered at once, as when it decodes: in lane order it
				// would wait behind the very response it names.
				sess.sendError(perr, lane)
				continue
			}
			sess.refuse(lane, perr, refusedParent(data, perr), received)
			continue
		}
		switch ev := ev.(type) {
		case *protocol.CreateEvent:
			sess.enqueue(ev, len(data), received, decodeMicros)
		case *protocol.AppendEvent:
			if perr := sess.appendOutputs(ev); perr != nil {
				sess.sendError(perr, lane)
			}
		case *protocol.CancelEvent:
			if perr := sess.cancelResponse(ev); perr != nil {
				sess.sendError(perr, lane)
			}
		case *protocol.ResumeEvent:
			sess.resume(ev, received)
		case *protocol.ProcessedEvent:
			// Codex acknowledges every response it has read: a suspended
			// rollout's tail is no longer needed.
			sess.srv.processed(ev.ResponseID, sess.creds)
		}
	}
}

// refusedParent returns the previous_response_id of a response.create frame
// that failed to decode, so that the failed continuation evicts it. A frame
// with an invalid stream_id names no lane, and so no cached response.
func refusedParent(data []byte, perr *protocol.Error) string {
	if perr.Code == protocol.CodeInvalidStreamID {
		return ""
	}
	var head struct {
		Type               protocol.ClientEventType `json:"type"`
		PreviousResponseID string                   `json:"previous_response_id"`
	}
	if json.Unmarshal(data, &head) != nil || head.Type != protocol.ClientCreate {
		return ""
	}
	return head.PreviousResponseID
}

// outOfBand reports whether a frame that failed to decode is a
// response.append, response.cancel or response.resume: events about a
// response already running, which do not take a place in their lane.
func outOfBand(data []byte) bool {
	var head struct {
		Type protocol.ClientEventType `json:"type"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	switch head.Type {
	case protocol.ClientAppend, protocol.ClientCancel, protocol.ClientResume:
		return true
	}
	return false
}

// writeLoop owns the connection's write side: it writes queued frames in
// order until the session ends. A batch that the client does not take
// within WriteTimeout (it stopped reading, or its connection is gone
// without a word) fails the write, which ends the session: its suspended
// rollouts detach, to be resumed.
func (sess *session) writeLoop(ctx context.Context) error {
	for {
		batch := sess.out.take(ctx)
		if batch == nil {
			return nil
		}
		if err := sess.writeBatch(ctx, batch); err != nil {
			return err
		}
	}
}

// writeBatch writes a batch of frames in one write to the socket (see
// corkedConn). Each frame is charged the time from the end of the one
// before; the last also the write.
func (sess *session) writeBatch(ctx context.Context, batch []queued) error {
	ctx, cancel := context.WithTimeout(ctx, sess.srv.opts.WriteTimeout)
	defer cancel()
	wctx := ctx
	if sess.cork != nil {
		sess.cork.cork()
		// Corked, a frame's write only fills memory: the deadline is the
		// uncork's, and the library need not arm a timer per frame.
		wctx = context.WithoutCancel(ctx)
	}
	start := sess.srv.now()
	var err error
	for i, q := range batch {
		typ, b := websocket.MessageText, q.b
		if sess.encoding == protocol.EncodingMsgpack {
			typ = websocket.MessageBinary
			if b, err = protocol.JSONToMsgpack(b); err != nil {
				break // a frame of ours that is not JSON: a bug, not the client's doing
			}
		}
		if err = sess.conn.Write(wctx, typ, b); err != nil {
			break
		}
		if i < len(batch)-1 {
			end := sess.srv.now()
			sess.srv.wrote(q, start, end)
			start = end
		}
	}
	if sess.cork != nil { // on every path: a close frame the library wrote meanwhile is held too
		deadline, _ := ctx.Deadline()
		if uerr := sess.cork.uncork(deadline); err == nil {
			err = uerr
		}
	}
	if err == nil {
		sess.srv.wrote(batch[len(batch)-1], start, sess.srv.now())
	}
	return err
}

// isNormalClose reports whether err is an ordinary end of a connection.
func isNormalClose(err error) bool {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway, websocket.StatusNoStatusRcvd:
		return true
	}
	return errors.Is(err, context.Canceled)
}

func headerContains(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}
