package runtime

import (
	"context"
	"net/http"
	"time"

	"github.com/tether-run/tether/runtime/internal/outbox"

	"github.com/tether-run/tether/protocol"
)

// streamSSE runs ro and streams its events as server-sent events
// ("event: TYPE\ndata: JSON\n\n"). The rollout runs on a goroutine of its
// own and the handler's goroutine is the writer, as a WebSocket session's
// writer is: the rollout never holds a lock across a network write.
//
// A stream that Shutdown ends before its terminal event gets what was
// queued and then an error event (server_shutting_down), while its client
// is still there to read it.
func streamSSE(ctx context.Context, w http.ResponseWriter, ro *rollout) {
	client := context.WithoutCancel(ctx) // for the last words; the stream itself ends with ctx
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve the next request

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := ro.srv.newOutbox()
	defer out.Close() // last, once the rollout has ended: what the writer did not write is let go
	ran := make(chan struct{})
	var runErr error
	go func() {
		defer close(ran)
		defer out.End()
		_, runErr = ro.run(ctx, &sseSink{out: out})
	}()
	defer func() { <-ran }()
	for {
		batch := out.Next(ctx)
		if batch == nil {
			if ro.srv.ctx.Err() != nil {
				<-ran
				lastWords(client, w, rc, out, ro, runErr)
			}
			return
		}
		// The write, flush included, is shared among the batch's frames,
		// as a WebSocket's is (session.WriteBatch). A client that stops
		// reading stalls the writes: past Timeouts.Write the stream is cut.
		rc.SetWriteDeadline(time.Now().Add(ro.srv.opts.Timeouts.Write))
		start := ro.srv.now()
		for _, q := range batch {
			if _, err := w.Write(q.Bytes); err != nil {
				cancel() // the client is gone: stop the rollout
				return
			}
		}
		if err := rc.Flush(); err != nil {
			cancel()
			return
		}
		share := ro.srv.now().Sub(start) / time.Duration(len(batch))
		for _, q := range batch {
			ro.srv.wrote(q, start, share)
		}
	}
}

// lastWords ends a stream that Shutdown cut: the frames still queued, then,
// unless the rollout ended on its own terminal event, an error event.
func lastWords(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, out *outbox.Outbox, ro *rollout, runErr error) {
	rc.SetWriteDeadline(time.Now().Add(ro.srv.opts.Timeouts.Write))
	for batch := out.Next(ctx); batch != nil; batch = out.Next(ctx) {
		for _, q := range batch {
			if _, err := w.Write(q.Bytes); err != nil {
				return
			}
		}
	}
	if runErr != nil {
		ev := errShutdown().StreamError()
		ev.SequenceNumber = ro.order.seq
		if b, err := sseFrame(ev); err == nil {
			w.Write(b)
		}
	}
	rc.Flush()
}

// sseSink frames a rollout's events for streamSSE's writer.
type sseSink struct {
	out *outbox.Outbox
	enc outbox.EventBuf // under the rollout's lock
}

func (s *sseSink) put(ev protocol.Event, acct *outbox.Delivery) error {
	b, err := s.enc.EncodeWith(appendSSE, ev)
	if err != nil {
		return err
	}
	return s.out.PutCopy(b, acct)
}

// sseFrame is ev as a server-sent event: "event: TYPE\ndata: JSON\n\n".
func sseFrame(ev protocol.Event) ([]byte, error) { return appendSSE(nil, ev) }

// appendSSE appends ev to b as a server-sent event.
func appendSSE(b []byte, ev protocol.Event) ([]byte, error) {
	b = append(b, "event: "...)
	b = append(b, protocol.Type(ev)...)
	b = append(b, "\ndata: "...)
	b, err := protocol.AppendMarshal(b, ev)
	if err != nil {
		return nil, err
	}
	return append(b, "\n\n"...), nil
}

func (s *sseSink) behind(acct *outbox.Delivery) bool { return acct.Behind() }
