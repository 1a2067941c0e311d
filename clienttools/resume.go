package clienttools

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Reconnection of a suspended rollout: how often, and how long to wait
// between attempts (doubling from the first).
const (
	reconnectAttempts = 6
	reconnectFirst    = 50 * time.Millisecond
	reconnectMax      = 2 * time.Second
)

// DefaultOwnerWait is Client.OwnerWait's default: tether serve's default
// lease (10 s), and a renewal's margin.
const DefaultOwnerWait = 15 * time.Second

// resumingConn is the WebSocket of a suspended rollout, which outlives its
// connections: when one drops, it dials again and sends response.resume with
// the last sequence_number seen. Events the client has seen are not passed
// on again; a pause whose append (or inject) was lost with the connection
// is answered again with the same outputs, and an inject not yet seen
// taken is sent again on the new connection. The caller sees one unbroken
// stream. One goroutine may read (next) while another sends.
type resumingConn struct {
	c    *Client
	keep eventFilter // what its connections decode

	// mu guards what follows; next holds it but while it waits for a
	// frame or backs off.
	mu   sync.Mutex
	conn conn // nil while broken

	id     string                // the response, once response.created has come
	last   int                   // the last sequence_number passed on
	answer *protocol.AppendEvent // the outputs of the current pause, until the rollout moves on
	pause  int                   // the pause's sequence_number
	// injects are the injects sent and not yet seen taken, by the agent
	// they answer ("" for the root): taken once an event of that agent's
	// comes after them (it runs again), or the response ends.
	injects map[string]*protocol.AppendEvent

	reconnects int       // connections dialed after the first
	moved      int       // response_owned_elsewhere in a row
	movedSince time.Time // the first of them
	at         int       // the server it is on: 0 is BaseURL, then Fallbacks
}

func (c *Client) dialResuming(ctx context.Context, keep eventFilter) (*resumingConn, error) {
	conn, err := c.dial(ctx, keep)
	if err != nil {
		return nil, err
	}
	return &resumingConn{c: c, keep: keep, conn: conn, last: -1, pause: -1}, nil
}

func (rc *resumingConn) close() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.conn != nil {
		rc.conn.close()
	}
}

// inject sends an inject of the outputs agent waits for, sent again on a
// new connection until an event shows the agent running again.
func (rc *resumingConn) inject(ctx context.Context, agent string, ev *protocol.AppendEvent) (frameCost, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.injects == nil {
		rc.injects = map[string]*protocol.AppendEvent{}
	}
	rc.injects[agent] = ev
	return rc.sendLocked(ctx, ev)
}

// send sends a create or an append. A send that fails on a broken
// connection is not an error once the response exists: next resumes, and a
// lost append is sent again when the server replays its pause.
func (rc *resumingConn) send(ctx context.Context, ev any) (frameCost, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if a, ok := ev.(*protocol.AppendEvent); ok {
		rc.answer, rc.pause = a, rc.last
	}
	return rc.sendLocked(ctx, ev)
}

func (rc *resumingConn) sendLocked(ctx context.Context, ev any) (frameCost, error) {
	if rc.conn == nil {
		return frameCost{}, nil // next reconnects, and the replayed pause brings the append
	}
	cost, err := rc.conn.send(ctx, ev)
	if err != nil && rc.id != "" && ctx.Err() == nil {
		rc.broken()
		return cost, nil
	}
	return cost, err
}

func (rc *resumingConn) broken() {
	if rc.conn != nil {
		rc.conn.abort()
		rc.conn = nil
	}
}

// next returns the rollout's next event, resuming on a new connection when
// one drops.
func (rc *resumingConn) next(ctx context.Context) (protocol.Event, frameCost, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for {
		if rc.conn == nil {
			if err := rc.resume(ctx); err != nil {
				return nil, frameCost{}, err
			}
		}
		c := rc.conn
		rc.mu.Unlock()
		ev, n, err := c.next(ctx)
		rc.mu.Lock()
		if c != rc.conn { // a send found it broken meanwhile
			continue
		}
		if err != nil {
			if rc.id == "" || ctx.Err() != nil {
				return nil, n, err
			}
			rc.broken()
			continue
		}
		if e, ok := ev.(*protocol.ErrorEvent); ok {
			if c := e.Error.Code; c != nil && *c == protocol.CodeResponseOwnedElsewhere && rc.id != "" {
				// Another server runs the rollout: this one closes the
				// connection (1012), or refused to take it over while the
				// other's lease lasts (a dead server's runs out within
				// its TTL). Resumed on the next server, after a back-off
				// that grows while servers keep saying so, for OwnerWait.
				if rc.moved++; rc.moved == 1 {
					rc.movedSince = time.Now()
				} else if waited := time.Since(rc.movedSince); waited > cmp.Or(rc.c.OwnerWait, DefaultOwnerWait) {
					return nil, n, fmt.Errorf("resume %s: servers said another owns it %d times in %v", rc.id, rc.moved, waited.Round(time.Millisecond))
				}
				rc.broken()
				rc.at = (rc.at + 1) % (1 + len(rc.c.Fallbacks))
				rc.mu.Unlock()
				err := sleepCtx(ctx, min(reconnectFirst<<(rc.moved-1), reconnectMax))
				rc.mu.Lock()
				if err != nil {
					return nil, n, err
				}
				continue
			}
			return ev, n, nil
		}
		seq := protocol.Header(ev).SequenceNumber
		if rc.id != "" && seq <= rc.last {
			// Seen before the drop. The pause comes again when the server
			// never got its answer: answer it again.
			if protocol.Type(ev) == protocol.EventDone && seq == rc.pause && rc.answer != nil {
				if _, err := rc.sendLocked(ctx, rc.answer); err != nil {
					return nil, n, err
				}
			}
			continue
		}
		if re, ok := ev.(*protocol.ResponseEvent); ok && re.Type == protocol.EventCreated {
			rc.id = re.Response.ID
		}
		rc.last, rc.moved = seq, 0
		if rc.answer != nil && seq > rc.pause {
			rc.answer = nil // the rollout went on: the server had the outputs
		}
		rc.taken(ev)
		return ev, n, nil
	}
}

// resume dials again, with bounded backoff, and asks for the events after
// the last one seen: on the same server, or with Fallbacks on the next.
func (rc *resumingConn) resume(ctx context.Context) error {
	wait := reconnectFirst
	var err error
	for attempt := range reconnectAttempts {
		at, c := rc.server(attempt)
		var nc conn
		if nc, err = c.dial(ctx, rc.keep); err == nil {
			after := rc.last
			_, err = nc.send(ctx, &protocol.ResumeEvent{ResponseID: rc.id, After: &after})
			// A waiting multi-agent response replays no pause to answer
			// again: the injects not seen taken are sent again now (one
			// taken already is refused, and changes nothing).
			for _, ev := range rc.injects {
				if err == nil {
					_, err = nc.send(ctx, ev)
				}
			}
			if err == nil {
				rc.conn, rc.at = nc, at
				rc.reconnects++
				return nil
			}
			nc.abort()
		}
		rc.mu.Unlock()
		err := sleepCtx(ctx, wait)
		rc.mu.Lock()
		if err != nil {
			return err
		}
		wait = min(2*wait, reconnectMax)
	}
	return fmt.Errorf("resume %s after %d attempts: %w", rc.id, reconnectAttempts, err)
}

// taken lets go of the injects ev shows taken: its agent's (an agent runs
// again only once its outputs are in), or all of them at the response's
// end.
func (rc *resumingConn) taken(ev protocol.Event) {
	if len(rc.injects) == 0 {
		return
	}
	if re, ok := ev.(*protocol.ResponseEvent); ok && ended(re) {
		clear(rc.injects)
		return
	}
	agent := ""
	if a := protocol.Header(ev).Agent; a != nil {
		agent = a.AgentName
	}
	switch protocol.Type(ev) {
	case protocol.EventInjectCreated, protocol.EventInjectFailed, protocol.EventWaiting:
		// Not the agent running: an inject's answer, or a wait, which
		// names the agent whose outputs are not in.
	default:
		delete(rc.injects, agent)
	}
}

// server is the server a resume's attempt dials: the one it was on first
// (a dropped connection is most often the network's), then with Fallbacks
// each attempt the next in turn (as when that one restarts, or is gone).
func (rc *resumingConn) server(attempt int) (int, *Client) {
	n := 1 + len(rc.c.Fallbacks)
	if n == 1 {
		return 0, rc.c
	}
	at := (rc.at + attempt) % n
	if at == 0 {
		return 0, rc.c
	}
	c := *rc.c
	c.BaseURL = rc.c.Fallbacks[at-1]
	return at, &c
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
