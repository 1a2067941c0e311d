package clienttools

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tether-run/tether/protocol"
)

// cutAfter is the event after which a background turn's stream is cut, on
// every turn. It is the first event of every response after which the
// server has taken the response up (queued, then in progress) and before
// anything the model makes: every output event of the turn, the call
// items the client acts on among them, then comes through the resume,
// first what the server kept while no one read, then live. Cutting every
// turn at the same event makes the comparison with ModeChained, whose turns
// are the same requests to the same store, read as one resume a turn: a
// cut every k-th turn would average the resume's cost into a figure that
// depends on k and on the rollout's length.
const cutAfter = protocol.EventInProgress

// backgroundStream is the events of one background response (a turn of
// ModeBackground) as one stream, read over two: the create's, which it
// closes once cutAfter has come, and the resume's, GET
// /v1/responses/{id}?stream=true&starting_after=N, N the last
// sequence_number read, which it opens on the next read. Closing the
// create's body drops its connection; the server runs the response on. The
// resume's round trip falls between two of the turn's events, so the turn's
// timing counts it as API overhead, which it is. Every event's
// sequence_number must be one more than the last's, from 0: a gap or a
// repeat across the cut (or anywhere) is an error. It is read by one
// goroutine.
type backgroundStream struct {
	c       *Client
	keep    eventFilter // what its streams decode
	st      *sseStream  // the stream being read; nil between the cut and the resume
	id      string      // the response's, from response.created
	seq     int         // the sequence_number the next event must have
	cut     bool        // the create's stream has been cut
	resumes int         // streams opened to resume: 0 or 1
}

// next reads the response's next event, resuming its stream first if it
// was cut.
func (b *backgroundStream) next(ctx context.Context) (protocol.Event, frameCost, error) {
	resumed := b.st == nil
	if resumed {
		st, err := b.c.resume(ctx, b.id, b.seq-1, b.keep)
		if err != nil {
			return nil, frameCost{}, err
		}
		b.st = st
		b.resumes++
	}
	ev, cost, err := b.st.next()
	if err != nil {
		return nil, cost, err
	}
	if got := protocol.Header(ev).SequenceNumber; got != b.seq {
		return nil, cost, b.disorder(got, resumed)
	}
	b.seq++
	if ev, ok := ev.(*protocol.ResponseEvent); ok && ev.Type == protocol.EventCreated {
		b.id = ev.Response.ID
	}
	if !b.cut && protocol.Type(ev) == cutAfter {
		if b.id == "" {
			return nil, cost, fmt.Errorf("the server sent %s before response.created: no response to resume", cutAfter)
		}
		b.st.close()
		b.st, b.cut = nil, true
	}
	return ev, cost, nil
}

// disorder is the error of an event numbered got where b.seq was due; the
// resumed stream's first, when resumed.
func (b *backgroundStream) disorder(got int, resumed bool) error {
	where := ""
	if resumed {
		where = " across the resume"
	}
	switch {
	case got < b.seq:
		return fmt.Errorf("background response %s: the server sent sequence_number %d again%s (%d was due)", b.id, got, where, b.seq)
	case b.seq == 0:
		return fmt.Errorf("background response: the server's first event is numbered %d, not 0", got)
	}
	return fmt.Errorf("background response %s: the server skipped from sequence_number %d to %d%s", b.id, b.seq-1, got, where)
}

func (b *backgroundStream) close() {
	if b.st != nil {
		b.st.close()
	}
}

// resume opens the stream of the events of the background response id
// after the one numbered after: those the server kept, then live ones up
// to the response's end. id is known: the stream is only cut after
// response.created.
func (c *Client) resume(ctx context.Context, id string, after int, keep eventFilter) (*sseStream, error) {
	base, err := protocol.APIBase(c.BaseURL)
	if err != nil {
		return nil, err
	}
	q := url.Values{"stream": {"true"}, "starting_after": {strconv.Itoa(after)}}
	return c.openStream(ctx, http.MethodGet, base+"/responses/"+url.PathEscape(id)+"?"+q.Encode(), nil, keep)
}
