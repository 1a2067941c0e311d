package clienttools

import (
	"strings"
	"time"

	"github.com/tether-run/tether/protocol"
)

// Result is what a rollout left.
type Result struct {
	// Response is the last response: the one suspended response, or the
	// last turn's. Its Tools is nil: the kit decodes responses without the
	// tools they echo, which the client sent (protocol.DecodeEventLean).
	// A rollout that failed at a pause leaves the pause's, whose Output is
	// nil unless Rollout.OnEvent was to see response.done: the step's items
	// are in Output.
	Response *protocol.Response
	// Output is every output item of the rollout, in order, over all turns.
	Output protocol.Items
	// Calls is every client tool call run, in order.
	Calls []Call
	// Usage is summed over the rollout's responses.
	Usage protocol.Usage
	// Server is the server's own timing of the rollout, summed over its
	// responses, when it reports it (tether does when the request includes
	// "tether.timings").
	Server protocol.Timings
	// Turns are the client's timings of each request and what answered it.
	Turns []Turn
	// Elapsed is the rollout's wall time, end to end.
	Elapsed time.Duration
	// Reconnects counts the connections dialed after the first: a
	// suspended rollout resumed after a drop, turns continued past the
	// connection age limit.
	Reconnects int
}

// Text is the text of the rollout's last message (its root agent's): the
// model's answer.
func (r *Result) Text() string {
	for i := len(r.Output) - 1; i >= 0; i-- {
		if m, ok := r.Output[i].(*protocol.Message); ok && m.Agent == nil { // not a sub-agent's
			var b strings.Builder
			for _, c := range m.Content {
				if t, ok := c.(*protocol.OutputText); ok {
					b.WriteString(t.Text)
				}
			}
			return b.String()
		}
	}
	return ""
}

// Turn is one request of a rollout and its answer, timed on the client: a
// create or an append, up to the next pause or the response's end, then the
// client tools it called for.
type Turn struct {
	Start         time.Time
	FirstEvent    time.Duration // from sending the request to the first event
	Stream        time.Duration // from the first event to the pause or the end
	Tools         time.Duration // from the pause or the end until every output was ready: what the rollout waited on client tools
	Calls         int
	BytesSent     int
	BytesReceived int
	Events        int // server events received
	// Encode and Decode are the client's JSON time: encoding the request,
	// decoding the turn's events (most of which arrive while the model
	// streams).
	Encode, Decode time.Duration
	// Usage is what the turn's sampling steps read and wrote: the tokens
	// the model's time depends on.
	Usage protocol.Usage
	// Server is the server's timing of the turn's work, when the request
	// includes protocol.IncludeTimings.
	Server protocol.Timings
}

// Breakdown is where a rollout's wall time went: the model, the client
// tools, and the rest, the API's overhead.
type Breakdown struct {
	// Model is the server's sampling time, summed over the rollout's
	// responses, as the server reports it (Result.Server); 0 when it
	// reports no timings.
	Model time.Duration
	// Tools is the time the rollout waited on client tools (every
	// Turn.Tools).
	Tools time.Duration
	// Overhead is the rest of Elapsed: transport, encoding, the server's
	// own work around the model. When Model is 0 (no timings) it holds
	// the model's time too.
	Overhead time.Duration
}

// Breakdown splits Elapsed into the model's time, the tools' and the API
// overhead. The model's is the server's report: ask for it with
// protocol.IncludeTimings in the request's Include.
func (r *Result) Breakdown() Breakdown {
	var b Breakdown
	for _, t := range r.Turns {
		b.Tools += t.Tools
	}
	b.Model = time.Duration(r.Server.SampleMicros) * time.Microsecond
	b.Overhead = r.Elapsed - b.Tools - b.Model
	return b
}
