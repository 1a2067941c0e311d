package clienttools

import (
	"cmp"
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
	// Resumes counts the streams of background responses resumed after
	// the client cut them (ModeBackground: one a turn).
	Resumes int
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
// client tools it called for. In a multi-agent rollout in inject mode each
// agent's round trips are turns of their own, and a sub-agent's first
// (Spawned) is its first run, from its first event to its first wait.
type Turn struct {
	Agent         string // the sub-agent whose round trip it is; "" for the root's
	Spawned       bool   // a sub-agent's first run: no request of the client's began it
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
// protocol.IncludeTimings in the request's Include. A multi-agent
// rollout's agents sample and wait on their tools side by side: its model
// and tool time are those of its critical path, the chain of agents (the
// root, a sub-agent it waited on, one that waited on…) whose own sampling
// (while none of their sub-agents ran: Timings.AgentSampleMicros) and
// tool time add up to the most, as they would in a rollout with no
// overhead at all.
func (r *Result) Breakdown() Breakdown {
	var b Breakdown
	if len(r.Server.AgentSampleMicros) > 0 {
		b.Model, b.Tools = r.criticalPath(protocol.RootAgent)
	} else {
		for _, t := range r.Turns {
			b.Tools += t.Tools
		}
		b.Model = time.Duration(r.Server.SampleMicros) * time.Microsecond
	}
	b.Overhead = r.Elapsed - b.Tools - b.Model
	return b
}

// criticalPath is the model and tool time of the longest chain of agents
// from the agent at path down its tree: its own sampling, its own tools
// (each turn's calls run at once: the longest of them), then the longest
// of its children's chains.
func (r *Result) criticalPath(path string) (model, tools time.Duration) {
	model = time.Duration(r.Server.AgentSampleMicros[path]) * time.Microsecond
	longest := map[int]time.Duration{} // by turn
	for _, c := range r.Calls {
		if cmp.Or(c.Agent, protocol.RootAgent) == path {
			longest[c.Turn] = max(longest[c.Turn], c.Duration)
		}
	}
	for _, d := range longest {
		tools += d
	}
	var best, bestModel, bestTools time.Duration
	for child := range r.agents() {
		if name, ok := strings.CutPrefix(child, path+"/"); !ok || name == "" || strings.Contains(name, "/") {
			continue // not a child of path's
		}
		if m, t := r.criticalPath(child); m+t > best {
			best, bestModel, bestTools = m+t, m, t
		}
	}
	return model + bestModel, tools + bestTools
}

// agents are the paths of the rollout's sub-agents: those that sampled or
// called a tool.
func (r *Result) agents() map[string]bool {
	paths := map[string]bool{}
	for p := range r.Server.AgentSampleMicros {
		paths[p] = true
	}
	for _, c := range r.Calls {
		if c.Agent != "" {
			paths[c.Agent] = true
		}
	}
	return paths
}
