package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
)

// This file is a session's reading and writing, the same on every
// transport (FrameConn): a read loop that answers every client frame, and
// a writer that owns the write side.

// peekFrame is the frame size from which the read loop checks a create
// against the connection's byte budget before decoding it.
const peekFrame = 64 << 10

// readLoop reads frames until the connection fails; it runs on the
// session's own goroutine. Every frame gets an answer: events, or an error event.
func (sess *session) readLoop(ctx context.Context) error {
	recycle, _ := sess.conn.(frameRecycler)
	for {
		data, binary, err := sess.conn.Read(ctx)
		var refused *FrameRefused
		if errors.As(err, &refused) {
			sess.sendError(refused.Err, "") // read and dropped: the connection goes on
			continue
		}
		var perr *protocol.Error
		if errors.As(err, &perr) {
			// A frame the connection cannot skip (a WebTransport length
			// prefix past Limits.MaxFrame): the client is told, then the
			// connection closes.
			sess.fail(perr, CloseTooBig, "frame too large")
			<-sess.out.Done()
			return nil
		}
		if err != nil {
			return err
		}
		sess.answerFrame(data, binary)
		if recycle != nil {
			recycle.Recycle(data)
		}
	}
}

// frameRecycler is a FrameConn that reads its frames into buffers it can
// read into again once the session is done with one: a decoded client
// event keeps no reference to its frame (protocol.DecodeClientEvent).
type frameRecycler interface{ Recycle(b []byte) }

// answerFrame decodes a client frame and answers it, or refuses it; data
// is not kept.
func (sess *session) answerFrame(data []byte, binary bool) {
	received := sess.srv.now()
	enc := protocol.EncodingJSON
	switch {
	case binary && sess.encoding == protocol.EncodingMsgpack:
		enc = protocol.EncodingMsgpack
	case binary:
		sess.sendError(protocol.Invalid(protocol.CodeBinaryFrame, "",
			"Binary frames are not supported on this connection: send each client event as one JSON text frame (or connect with the msgpack subprotocol)."), "")
		return
	}
	var decoding int64 // the server's memory budget taken while the frame is decoded
	if len(data) > peekFrame {
		// A large create past the connection's budget is refused
		// before it is decoded (or transcoded) into a copy of itself;
		// a large frame of any kind takes its cost from the server's
		// budget while it is decoded (a create takes it again as it
		// is admitted, for as long as it is served).
		typ, lane, ok := protocol.PeekClientEventAs(enc, data)
		if ok && typ == protocol.ClientCreate {
			if perr := sess.scope.overBudget(len(data), &sess.srv.opts); perr != nil {
				sess.sendError(perr, lane)
				return
			}
		}
		decoding = requestCost(len(data))
		if enc == protocol.EncodingMsgpack {
			decoding += int64(len(data)) // transcoded to JSON first: one more copy
		}
		if perr := sess.srv.mem.Charge(decoding); perr != nil {
			sess.sendError(perr, lane)
			return
		}
	}
	if enc == protocol.EncodingMsgpack {
		var err error
		if data, err = protocol.MsgpackToJSON(data); err != nil {
			sess.srv.mem.Refund(decoding)
			sess.sendError(protocol.Invalid(protocol.CodeInvalidJSON, "",
				"Invalid frame: every client event must be one msgpack map on this connection (%s).", err), "")
			return
		}
	}
	ev, lane, perr := protocol.DecodeClientEvent(data)
	sess.srv.mem.Refund(decoding)
	decodeMicros := sess.srv.now().Sub(received).Microseconds()
	if perr != nil {
		if outOfBand(data) {
			// Answered at once, as when it decodes: in lane order it
			// would wait behind the very response it names.
			sess.sendError(perr, lane)
			return
		}
		sess.refuse(lane, perr, refusedParent(data, perr), received)
		return
	}
	sess.handle(laneEvent{ev: ev, size: len(data), received: received, decodeUS: decodeMicros}, false)
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
	case protocol.ClientAppend, protocol.ClientCancel, protocol.ClientResume, protocol.ClientFork:
		return true
	}
	return false
}

// writeFailed ends the session when its socket cannot be written: now,
// rather than let the queue fill and blame a slow client.
func (sess *session) WriteFailed(error) {
	sess.stop(0, "")
	sess.conn.Abort()
}

// WriteBatch writes a batch of frames, taken at start, which leave in one
// write to the socket where the transport can (see corkedConn); the
// outbox's writer on demand calls it. While the server is saturated, the
// write waits briefly for the frames queued next and takes them with it,
// once (Outbox.More, package flushhold); otherwise it goes at once. A batch
// that the client does not take within Timeouts.Write (it stopped reading,
// or its connection is gone without a word) fails the write, which ends
// the session: its suspended rollouts detach, to be resumed. The write,
// hold and flush included, is shared among its frames: corked, a frame's
// own part is a copy into the batch, cheaper than reading the clock for
// it, which is read once a batch (its start is the last one's end).
func (sess *session) WriteBatch(batch []outbox.Frame, start time.Time) (time.Time, error) {
	deadline := sess.writeDeadline(start)
	err := sess.addBatch(batch, deadline)
	if err == nil {
		if more := sess.out.More(); more != nil {
			sess.writing = append(sess.writing, more...)
			err = sess.writeFrames(more, sess.encoding == protocol.EncodingMsgpack, deadline)
		}
	}
	if ferr := sess.conn.Flush(deadline); err == nil {
		err = ferr
	}
	return sess.wroteBatch(start, err)
}

// TryBatch is WriteBatch on a flusher (package flushers), which waits on no
// client: no flush is held, and the batch goes out as far as the socket
// takes it at once (wsConn.TryFlush). When it did not take it all, TryBatch
// reports blocked, and FinishBatch, on a goroutine of the outbox's, writes
// the rest.
func (sess *session) TryBatch(batch []outbox.Frame, start time.Time) (end time.Time, blocked bool, err error) {
	err = sess.addBatch(batch, sess.writeDeadline(start))
	if err == nil && sess.conn.(tryFlusher).TryFlush() {
		return start, true, nil // FinishBatch writes the rest, or fails as the connection does
	}
	end, err = sess.wroteBatch(start, err)
	return end, false, err
}

// FinishBatch writes what TryBatch left of its batch, within the write's
// deadline, and returns as WriteBatch does.
func (sess *session) FinishBatch(start time.Time) (time.Time, error) {
	return sess.wroteBatch(start, sess.conn.Flush(sess.writeDeadline(start)))
}

// tryFlusher is a FrameConn that can write its batch without waiting (a
// WebSocket that has a socket to try: wsConn.CanTry): TryFlush writes what the
// socket takes at once, and reports blocked when it did not take it all.
type tryFlusher interface {
	TryFlush() (blocked bool)
}

// writeDeadline is the deadline of a batch taken at start: Timeouts.Write
// after it, by the network's clock.
func (sess *session) writeDeadline(start time.Time) time.Time {
	wall := start // the network's clock, not Options.Now
	if sess.srv.ownClock {
		wall = time.Now()
	}
	return wall.Add(sess.srv.opts.Timeouts.Write)
}

// addBatch adds a batch's frames to the connection's write, and keeps them
// for wroteBatch to charge.
func (sess *session) addBatch(batch []outbox.Frame, deadline time.Time) error {
	sess.writing = append(sess.writing[:0], batch...) // the outbox reuses batch once asked for more
	return sess.writeFrames(batch, sess.encoding == protocol.EncodingMsgpack, deadline)
}

// wroteBatch charges the frames written, once err says they were, and
// returns when it was done: the next batch's start.
func (sess *session) wroteBatch(start time.Time, err error) (time.Time, error) {
	end := sess.srv.tick()
	if err == nil {
		share := end.Sub(start) / time.Duration(len(sess.writing))
		for _, q := range sess.writing {
			sess.srv.wrote(q, start, share)
		}
	}
	clear(sess.writing) // an idle connection keeps no frames
	return end, err
}

// writeFrames adds a batch's frames to the connection's write.
func (sess *session) writeFrames(batch []outbox.Frame, binary bool, deadline time.Time) error {
	for _, q := range batch {
		b := q.Bytes
		var err error
		if binary {
			if b, err = protocol.JSONToMsgpack(b); err != nil {
				return err // a frame of ours that is not JSON: a bug, not the client's doing
			}
		}
		if err = sess.conn.Write(b, binary, deadline); err != nil {
			return err
		}
		sess.written.Add(int64(len(b)))
	}
	return nil
}
