package sampler

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// callIDShape is a local model's call id.
var callIDShape = regexp.MustCompile(`^call_[0-9]{18}$`)

// TestCallIDsByResponse: both local models draw a call's id from the
// response its request names (Request.Response) and the call's place in
// it. The same request sampled again (a step run again after a takeover)
// gives the same ids; the same context under other responses, or in
// another agent, gives others, all distinct; a request that names no
// response gets the context's alone (Replay: Trace.CallID's). Every id is
// "call_" and 18 digits, and every one costs a prompt the same tokens, so
// that one rollout's prompts have one length whatever ids its responses
// drew.
func TestCallIDsByResponse(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	tr := &Trace{Name: "ids", Steps: []TraceStep{
		{Calls: []TraceCall{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{}`}}},
		{Text: "Done."},
	}}
	replay := NewReplay(r, Timing{}, tr)
	for _, tc := range []struct {
		name   string
		sample func(context.Context, *Request, func(Delta)) (Result, error)
		task   string
		bare   []string // the ids of a request that names no response, when known
	}{
		{"scripted", NewScripted(r, Timing{}).Sample, "call: a {\"x\":1} | b {}", nil},
		{"replay", replay.Sample, "Go.", []string{tr.CallID(0, 0), tr.CallID(0, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ids := func(resp, agent string) []string {
				t.Helper()
				req := &Request{Items: protocol.Items{userMsg(tc.task)}, Response: resp, Agent: agent, MultiAgent: agent != ""}
				var out []string
				open := ""
				_, err := tc.sample(context.Background(), req, func(d Delta) {
					switch {
					case d.Kind == CallStart:
						open = d.CallID
						out = append(out, d.CallID)
					case (d.Kind == ArgsDelta || d.Kind == PartEnd) && d.CallID != open:
						t.Errorf("a delta of call %s names %s", open, d.CallID)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != 2 {
					t.Fatalf("%d calls, want 2", len(out))
				}
				return out
			}
			first := ids("resp_a", "")
			if again := ids("resp_a", ""); !slices.Equal(again, first) {
				t.Errorf("the same request gave ids %q, then %q", first, again)
			}
			bare := ids("", "")
			if tc.bare != nil && !slices.Equal(bare, tc.bare) {
				t.Errorf("without a response: ids %q, want %q", bare, tc.bare)
			}
			if again := ids("", ""); !slices.Equal(again, bare) {
				t.Errorf("without a response, the same request gave ids %q, then %q", bare, again)
			}
			seen := map[string]string{}
			cost := len(r.Item(&protocol.FunctionCallOutput{CallID: first[0], Output: protocol.ToolOutput{Text: "ok"}}))
			check := func(where string, got []string) {
				t.Helper()
				for _, id := range got {
					if before, dup := seen[id]; dup {
						t.Errorf("%s: id %s, as %s", where, id, before)
					}
					seen[id] = where
					if !callIDShape.MatchString(id) {
						t.Errorf("%s: id %q is not call_ and 18 digits", where, id)
					}
					if n := len(r.Item(&protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: "ok"}})); n != cost {
						t.Errorf("%s: an output naming %s is %d tokens, naming %s %d", where, id, n, first[0], cost)
					}
				}
			}
			check("resp_a", first)
			check("no response", bare)
			check("/root/x of resp_a", ids("resp_a", "/root/x"))
			for i := range 300 {
				check(fmt.Sprintf("resp_%d", i), ids(fmt.Sprintf("resp_%d", i), ""))
			}
			if len(seen) != 2*303 {
				t.Errorf("%d ids checked, want %d", len(seen), 2*303)
			}
		})
	}
}
