package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tether-run/tether/protocol"
)

// streamSSE runs ro and streams its events as server-sent events
// ("event: TYPE\ndata: JSON\n\n"). The rollout runs on a goroutine of its
// own and the handler's goroutine is the writer, as a WebSocket session's
// writeLoop is: the rollout never holds a lock across a network write.
func streamSSE(ctx context.Context, w http.ResponseWriter, ro *rollout) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve the next request

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := newOutbox(outQueueFrames, ro.srv.now)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		defer out.end()
		ro.run(ctx, sseSink{out})
	}()
	defer func() { <-ran }()
	for {
		batch := out.take(ctx)
		if batch == nil {
			return
		}
		// Each frame is charged its own write; the flush, which puts
		// the batch on the socket, goes to the last. A client that
		// stops reading stalls the writes: past WriteTimeout the stream
		// is cut.
		rc.SetWriteDeadline(time.Now().Add(ro.srv.opts.WriteTimeout))
		start := ro.srv.now()
		for i, q := range batch {
			if _, err := w.Write(q.b); err != nil {
				cancel() // the client is gone: stop the rollout
				return
			}
			if i < len(batch)-1 {
				end := ro.srv.now()
				ro.srv.wrote(q, start, end)
				start = end
			}
		}
		if err := rc.Flush(); err != nil {
			cancel()
			return
		}
		ro.srv.wrote(batch[len(batch)-1], start, ro.srv.now())
	}
}

// sseSink frames a rollout's events for streamSSE's writer.
type sseSink struct{ out *outbox }

func (s sseSink) put(ev protocol.Event, acct *delivery) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	typ := protocol.Type(ev)
	b := make([]byte, 0, len("event: \ndata: \n\n")+len(typ)+len(data))
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return s.out.put(b, acct)
}

// wait holds the rollout back while the writer is behind: HTTP's own flow
// control (a client that reads slowly) reaches the rollout this way.
func (s sseSink) wait(ctx context.Context) error {
	room := s.out.room()
	if room == nil {
		return nil
	}
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
