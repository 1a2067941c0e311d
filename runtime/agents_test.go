package runtime_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// treeScript is a root that spawns two sub-agents, each calling one
// client tool, and waits for both.
const treeScript = "Split the work.\n" +
	`spawn: a {"message": "Count the tests.\ncall: grep {\"pattern\":\"func Test\"}"} | b {"message": "List the files.\ncall: list_dir {}"}` + "\n" +
	"wait: a, b\n"

// agentEv is the part of an event the tree's tests read.
type agentEv struct {
	Type  string `json:"type"`
	Seq   int    `json:"sequence_number"`
	Agent *struct {
		Name string `json:"agent_name"`
	} `json:"agent"`
	Item json.RawMessage `json:"item"`
	Resp *struct {
		ID     string            `json:"id"`
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
	} `json:"response"`
}

// TestAgentTree: a root spawns two sub-agents over WebSocket; each one's
// client call comes attributed to it (the events' agent), is answered by
// an inject, the two in the reverse of the order they came, and the root,
// waiting on both, goes on once they have ended, with their answers as
// agent_message items. One gapless sequence throughout, in which no
// event of a sub-agent comes before the spawn_agent call's
// output_item.done that made it; the response's output holds every
// agent's items.
func TestAgentTree(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		c := h.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
		var id string
		seq, created := -1, 0
		calls := map[string]callItem{} // by agent
		spawned := map[string]bool{}   // the agents whose spawn_agent call is done
		for {
			b := c.recv(t)
			var e agentEv
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if e.Seq != seq+1 {
				t.Fatalf("%s has sequence_number %d after %d", b, e.Seq, seq)
			}
			seq = e.Seq
			if e.Agent != nil && !spawned[e.Agent.Name] {
				t.Fatalf("%s comes before the spawn_agent call that made its agent", b)
			}
			switch e.Type {
			case "response.created":
				id = e.Resp.ID
			case "response.output_item.done":
				var spawn struct{ Type, Action, Arguments string }
				if json.Unmarshal(e.Item, &spawn) == nil && spawn.Type == "multi_agent_call" && spawn.Action == "spawn_agent" {
					var args struct {
						TaskName string `json:"task_name"`
					}
					json.Unmarshal([]byte(spawn.Arguments), &args)
					spawned["/root/"+args.TaskName] = true
				}
				it, ok := functionCall(e.Item)
				if !ok {
					continue
				}
				if e.Agent == nil {
					t.Fatalf("a client call without its agent: %s", b)
				}
				calls[e.Agent.Name] = it
				if len(calls) == 2 { // answered in the reverse order
					for _, name := range []string{"/root/b", "/root/a"} {
						c.send(t, injectEv(id, calls[name].output()))
					}
				}
			case "response.inject.created":
				created++
			case "response.completed":
				if created != 2 || len(calls) != 2 || calls["/root/a"].Name != "grep" || calls["/root/b"].Name != "list_dir" {
					t.Fatalf("completed after %d injects taken, calls %v", created, calls)
				}
				var types []string
				for _, raw := range e.Resp.Output {
					var it struct{ Type string }
					json.Unmarshal(raw, &it)
					types = append(types, it.Type)
				}
				for typ, n := range map[string]int{"multi_agent_call": 3, "multi_agent_call_output": 3, "agent_message": 2, "function_call": 2} {
					if got := count(types, typ); got != n {
						t.Errorf("the output holds %d %s items, want %d: %v", got, typ, n, types)
					}
				}
				last := e.Resp.Output[len(e.Resp.Output)-1]
				if !bytes.Contains(last, []byte(`"type":"message"`)) {
					t.Errorf("the output ends with %s, want the root's answer", last)
				}
				for _, raw := range e.Resp.Output {
					if bytes.Contains(raw, []byte(`"type":"agent_message"`)) && !bytes.Contains(raw, []byte(`ran with`)) {
						t.Errorf("an agent's message without its answer: %s", raw)
					}
					// A sub-agent's items name it; the root's name none.
					if it, ok := functionCall(raw); ok {
						want := map[string]string{"grep": "/root/a", "list_dir": "/root/b"}[it.Name]
						if !bytes.Contains(raw, []byte(`"agent":{"agent_name":"`+want+`"}`)) {
							t.Errorf("a sub-agent's call does not name it: %s", raw)
						}
					}
				}
				if root := e.Resp.Output[len(e.Resp.Output)-1]; bytes.Contains(root, []byte(`"agent"`)) {
					t.Errorf("the root's answer names an agent: %s", root)
				}
				for _, name := range []string{"/root/a", "/root/b"} {
					n := 0
					for _, raw := range e.Resp.Output {
						if bytes.Contains(raw, []byte(`"type":"message"`)) && bytes.Contains(raw, []byte(`"agent":{"agent_name":"`+name+`"}`)) {
							n++
						}
					}
					if n != 1 {
						t.Errorf("%d messages of %s in the output, want its answer", n, name)
					}
				}
				return
			case "response.failed", "error", "response.inject.failed":
				t.Fatalf("the tree sent %s", b)
			}
		}
	})
}

// completeTree runs script as a multi-agent response (multi_agent merged
// into the request's) on a fresh server with opts, nobody answering a
// client call, and returns its events: the last, response.completed.
func completeTree(t *testing.T, opts runtime.Options, script string, multiAgent map[string]any) [][]byte {
	t.Helper()
	ma := map[string]any{"enabled": true}
	for k, v := range multiAgent {
		ma[k] = v
	}
	c := newPipeHarness(t, opts).dial(t, "Bearer alice")
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": ma, "input": script}))
	end := c.untilTerminal(t)
	if last := end[len(end)-1]; eventType(t, last) != "response.completed" {
		t.Fatalf("ended %.3000s", last)
	}
	return end
}

// wantOutput checks that the completed response's event holds each of
// want.
func wantOutput(t *testing.T, completed []byte, want ...string) {
	t.Helper()
	for _, w := range want {
		if !bytes.Contains(completed, []byte(w)) {
			t.Errorf("the output lacks %s: %.4000s", w, completed)
		}
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// TestAgentTreeBound: a spawn past max_concurrent_subagents, and a wait
// on an agent that is not there, get error outputs the model reads; the
// response goes on, and its end interrupts the sub-agent still waiting
// on its client.
func TestAgentTreeBound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		script := "Too many.\n" + `spawn: a {"message": "call: grep {}"}` + "\n" + `spawn: b {"message": "hi"}` + "\nwait: b\n"
		end := completeTree(t, runtime.Options{}, script, map[string]any{"max_concurrent_subagents": 1})
		var outs []string
		for _, f := range end {
			var e agentEv
			json.Unmarshal(f, &e)
			if e.Type != "response.output_item.done" {
				continue
			}
			if bytes.Contains(e.Item, []byte(`"multi_agent_call_output"`)) {
				outs = append(outs, string(e.Item))
			}
		}
		if len(outs) != 3 || !strings.Contains(outs[0], `/root/a`) || !strings.Contains(outs[1], `max_concurrent_subagents`) ||
			!strings.Contains(outs[2], `no agent /root/b`) {
			t.Fatalf("outputs %v: want /root/a spawned, b refused past max_concurrent_subagents, the wait on b refused", outs)
		}
	})
}

// TestAgentTreeSDK: two sub-agents through openai-go's beta WebSocket
// client (Beta.Responses.Connect): each one's client call comes as an
// event the SDK knows, attributed to its agent; two injects, in the
// reverse order, answer them; the response completes with both agents'
// answers, every output item a variant of the SDK's beta union.
func TestAgentTreeSDK(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx := sdkContext(t)
	conn := betaConnect(ctx, t, h)
	b, _ := json.Marshal(create(map[string]any{"model": sdkModel, "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
	if err := conn.SendRaw(ctx, b); err != nil {
		t.Fatal(err)
	}
	var id string
	calls := map[string]callItem{}
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := ev.AsAny(); v == nil {
			t.Fatalf("an event the SDK does not know: %s", ev.RawJSON())
		}
		var e agentEv
		json.Unmarshal([]byte(ev.RawJSON()), &e)
		switch ev.Type {
		case "response.created":
			id = e.Resp.ID
		case "response.output_item.done":
			it, ok := functionCall(e.Item)
			if !ok {
				continue
			}
			if e.Agent == nil {
				t.Fatalf("a client call without its agent: %s", ev.RawJSON())
			}
			calls[e.Agent.Name] = it
			if len(calls) < 2 {
				continue
			}
			for _, name := range []string{"/root/b", "/root/a"} {
				c := calls[name]
				err := conn.Send(ctx, openai.BetaResponsesClientEventUnionParam{OfResponseInject: &openai.BetaResponseInjectEventParam{ResponseID: id,
					Input: []openai.BetaResponseInputItemUnionParam{{OfFunctionCallOutput: &openai.BetaResponseInputItemFunctionCallOutputParam{
						CallID: openai.String(c.CallID), Output: openai.BetaResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(toolOutput(c.Name, c.Arguments))}}}}}})
				if err != nil {
					t.Fatal(err)
				}
			}
		case "response.completed":
			done := ev.AsResponseCompleted()
			answers := map[string]string{}
			for _, it := range done.Response.Output {
				if it.AsAny() == nil {
					t.Fatalf("an output item the SDK does not know: %s", it.RawJSON())
				}
				if it.Type == "agent_message" {
					m := it.AsAgentMessage()
					answers[m.Author] = m.Content[0].Text
				}
			}
			for name, c := range calls {
				if !strings.Contains(answers[name], toolOutput(c.Name, c.Arguments)) {
					t.Errorf("%s answered %q, want its tool's output", name, answers[name])
				}
			}
			if len(calls) != 2 {
				t.Fatalf("completed after %d calls, want 2", len(calls))
			}
			return
		case "response.failed", "error", "response.inject.failed":
			t.Fatalf("the tree sent %s", ev.RawJSON())
		}
	}
}

// TestAgentTreeTimeout: a sub-agent whose client call waits past the
// suspend timeout fails, as a pause does; the root waiting on it learns
// so (its wait's output) and goes on to complete. Fake time.
func TestAgentTreeTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		script := "Wait for a.\n" + `spawn: a {"message": "call: grep {}"}` + "\nwait: a\n"
		end := completeTree(t, runtime.Options{Suspension: runtime.SuspensionOptions{Timeout: 10 * time.Second}}, script, nil)
		wantOutput(t, end[len(end)-1], `{\"status\":{\"/root/a\":\"failed\"}}`)
	})
}

// TestAgentTreeNested: a sub-agent spawns a child of its own
// (/root/a/c), waits for it by its task name, and ends; the root waiting
// on it completes.
func TestAgentTreeNested(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		script := "Delegate.\n" + `spawn: a {"message": "spawn: c {\"message\": \"Say hi.\"}\nwait: c"}` + "\nwait: a\n"
		end := completeTree(t, runtime.Options{}, script, nil)
		wantOutput(t, end[len(end)-1], `{\"task_name\":\"/root/a/c\"}`, `{\"status\":{\"/root/a/c\":\"completed\"}}`, `{\"status\":{\"/root/a\":\"completed\"}}`)
	})
}

// TestAgentTreeActions: send_message puts a message in a waiting agent's
// context, list_agents lists it running, interrupt_agent ends it, and a
// wait on it then tells it interrupted.
func TestAgentTreeActions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		script := "Act.\n" + `spawn: a {"message": "call: grep {}"}` + "\n" + `send: a "and the benchmarks"` + "\nlist:\ninterrupt: a\nwait: a\n"
		end := completeTree(t, runtime.Options{}, script, nil)
		wantOutput(t, end[len(end)-1], `{\"delivered\":\"/root/a\"}`, `{\"agents\":[{\"agent_name\":\"/root/a\",\"status\":\"running\"}]}`,
			`{\"interrupted\":\"/root/a\"}`, `{\"status\":{\"/root/a\":\"interrupted\"}}`)
	})
}

// TestAgentTreeCancel: response.cancel of a response whose sub-agent waits
// on its client ends it cancelled, the sub-agent interrupted with it.
func TestAgentTreeCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		c := h.dial(t, "Bearer alice")
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
		var id string
		for {
			var e agentEv
			json.Unmarshal(c.recv(t), &e)
			if e.Type == "response.created" {
				id = e.Resp.ID
			}
			if _, ok := functionCall(e.Item); ok && e.Type == "response.output_item.done" {
				break // a sub-agent waits on it
			}
		}
		c.send(t, map[string]any{"type": "response.cancel", "response_id": id})
		for {
			b := c.recv(t)
			switch eventType(t, b) {
			case "response.cancelled":
				return
			case "response.completed", "response.failed", "error":
				t.Fatalf("ended %.2000s, want cancelled", b)
			}
		}
	})
}

// TestAgentTreeResume: a client whose connection drops while its
// sub-agents wait resumes the response on a new connection, gets what it
// missed after its last sequence number, answers both agents' calls there,
// and the response completes.
func TestAgentTreeResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute}})
		c1 := h.dial(t, "Bearer alice")
		c1.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": treeScript}))
		var id string
		last := -1
		calls := map[string]callItem{} // by agent
		for len(calls) == 0 {
			var e agentEv
			json.Unmarshal(c1.recv(t), &e)
			last = e.Seq
			if e.Type == "response.created" {
				id = e.Resp.ID
			}
			if it, ok := functionCall(e.Item); ok && e.Type == "response.output_item.done" {
				calls[e.Agent.Name] = it
			}
		}
		c1.drop()
		synctest.Wait()
		c2 := h.dial(t, "Bearer alice")
		c2.send(t, map[string]any{"type": "response.resume", "response_id": id, "sequence_number": last})
		created := 0
		for {
			b := c2.recv(t)
			var e agentEv
			json.Unmarshal(b, &e)
			if e.Seq != last+1 {
				t.Fatalf("%s after sequence number %d", b, last)
			}
			last = e.Seq
			switch e.Type {
			case "response.output_item.done":
				if it, ok := functionCall(e.Item); ok {
					calls[e.Agent.Name] = it
					if len(calls) == 2 {
						for _, it := range calls {
							c2.send(t, injectEv(id, it.output()))
						}
					}
				}
			case "response.inject.created":
				created++
			case "response.completed":
				if created != 2 {
					t.Fatalf("completed after %d injects taken, want 2", created)
				}
				return
			case "response.failed", "error", "response.inject.failed":
				t.Fatalf("%s", b)
			}
		}
	})
}

// TestAgentTreeSameCalls: two sub-agents that make the same call at the
// same place of the same context get call ids of their own, and each
// output goes to its agent: each one's answer is its own.
func TestAgentTreeSameCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newPipeHarness(t, runtime.Options{})
		c := h.dial(t, "Bearer alice")
		script := "Twice.\n" + `spawn: a {"message": "call: grep {}"} | b {"message": "call: grep {}"}` + "\nwait: a, b\n"
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": script}))
		var id string
		calls := map[string]callItem{}
		for {
			b := c.recv(t)
			var e agentEv
			json.Unmarshal(b, &e)
			switch e.Type {
			case "response.created":
				id = e.Resp.ID
			case "response.output_item.done":
				it, ok := functionCall(e.Item)
				if !ok {
					continue
				}
				calls[e.Agent.Name] = it
				if len(calls) < 2 {
					continue
				}
				if calls["/root/a"].CallID == calls["/root/b"].CallID {
					t.Fatalf("both agents' calls are %s", calls["/root/a"].CallID)
				}
				for name, it := range calls {
					c.send(t, injectEv(id, fco(it.CallID, "answer for "+name)))
				}
			case "response.completed":
				for _, name := range []string{"/root/a", "/root/b"} {
					if !bytes.Contains(b, []byte(`"author":"`+name+`","recipient":"/root","content":[{"type":"output_text","text":"grep returned: answer for `+name)) {
						t.Errorf("%s's answer is not its own: %.4000s", name, b)
					}
				}
				return
			case "response.failed", "error", "response.inject.failed":
				t.Fatalf("%s", b)
			}
		}
	})
}

// TestAgentTreeTypedCall: a sub-agent's typed call (a shell_call) names
// it, in the output as in its event, when its item is made again with its
// payload.
func TestAgentTreeTypedCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newPipeHarness(t, runtime.Options{Suspension: runtime.SuspensionOptions{Timeout: 10 * time.Second}}).dial(t, "Bearer alice")
		script := "Run it.\n" + `spawn: a {"message": "call: shell {\"commands\":[\"ls\"]}"}` + "\nwait: a\n"
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true},
			"tools": []any{map[string]any{"type": "shell"}}, "input": script}))
		end := c.untilTerminal(t)
		last := end[len(end)-1]
		if eventType(t, last) != "response.completed" {
			t.Fatalf("ended %.3000s", last)
		}
		var shell json.RawMessage
		for _, f := range end {
			var e agentEv
			json.Unmarshal(f, &e)
			if e.Type == "response.output_item.done" && bytes.Contains(e.Item, []byte(`"type":"shell_call"`)) {
				shell = e.Item
			}
		}
		if !bytes.Contains(shell, []byte(`"agent":{"agent_name":"/root/a"}`)) {
			t.Fatalf("the sub-agent's shell call %s does not name it", shell)
		}
		wantOutput(t, last, `"type":"shell_call"`, `{\"status\":{\"/root/a\":\"failed\"}}`)
	})
}

// TestAgentTreeEarly: a sub-agent's client calls answered as soon as each
// one's output_item.done comes, as the beta's clients do, while the step
// still streams its next call: each inject is taken, and the response
// completes. Fake time: the model is paced.
func TestAgentTreeEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := runtime.Options{Models: map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(renderer(t), sampler.Timing{TPS: 50})}}
		c := newPipeHarness(t, o).dial(t, "Bearer alice")
		sub := "Look around.\ncall: grep {\"pattern\":\"x\"}\ncall: list_dir {}"
		subJSON, _ := json.Marshal(map[string]string{"message": sub})
		input := "Split the work.\nspawn: a " + string(subJSON) + "\nwait: a\n"
		c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "multi_agent": map[string]any{"enabled": true}, "input": input}))
		var id string
		calls, created := 0, 0
		for {
			b := c.recv(t)
			e := decodeEv(t, b)
			if e.Response != nil {
				id = e.Response.ID
			}
			switch e.Type {
			case "response.output_item.done":
				it, ok := functionCall(e.Item)
				if !ok {
					continue
				}
				calls++
				c.send(t, injectEv(id, it.output()))
			case "response.inject.created":
				created++
			case "response.completed":
				if calls != 2 || created != 2 {
					t.Fatalf("the response completed after %d calls and %d injects taken; want 2 and 2", calls, created)
				}
				return
			case "response.failed", "error", "response.inject.failed":
				t.Fatalf("the tree sent %s", b)
			}
		}
	})
}
