package protocol_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/tether-run/tether/protocol"
)

// multiAgentItems are the multi-agent beta's items in the shapes OpenAI's
// reference gives them.
var multiAgentItems = []string{
	`{"type":"multi_agent_call","id":"mac_1","call_id":"call_spawn_a","action":"spawn_agent","arguments":"{\"task_name\":\"agent_a\",\"fork_turns\":\"all\",\"message\":\"Count the tests.\"}","agent":{"agent_name":"/root"}}`,
	`{"type":"multi_agent_call_output","id":"maco_1","call_id":"call_spawn_a","action":"spawn_agent","output":[{"type":"output_text","annotations":[],"text":"{\"task_name\":\"/root/agent_a\"}"}],"agent":{"agent_name":"/root"}}`,
	`{"type":"agent_message","id":"amsg_1","author":"/root/agent_a","recipient":"/root","content":[{"type":"output_text","annotations":[],"text":"12 tests."}],"agent":{"agent_name":"/root"}}`,
	`{"type":"multi_agent_call","call_id":"call_wait","action":"wait_agent","arguments":"{\"targets\":[\"/root/agent_a\"]}"}`,
}

// TestMultiAgentItems: each multi-agent item decodes, validates and
// encodes back to its JSON (id and agent optional, as the beta has them
// sent back); what lacks a required field, or names an action the beta
// has not, is refused with the field named.
func TestMultiAgentItems(t *testing.T) {
	t.Parallel()
	for _, raw := range multiAgentItems {
		sameItem(t, raw)
	}
	for raw, param := range map[string]string{
		`{"type":"multi_agent_call","action":"spawn_agent","arguments":"{}"}`:                  "input[0].call_id",
		`{"type":"multi_agent_call","call_id":"c","arguments":"{}"}`:                           "input[0].action",
		`{"type":"multi_agent_call","call_id":"c","action":"fly","arguments":"{}"}`:            "input[0].action",
		`{"type":"multi_agent_call_output","call_id":"c","action":"wait_agent","output":[7]}`:  "input[0].output[0]",
		`{"type":"agent_message","recipient":"/root","content":[]}`:                            "input[0].author",
		`{"type":"agent_message","author":"/root/a","content":[]}`:                             "input[0].recipient",
		`{"type":"multi_agent_call","call_id":"c","action":"list_agents","arguments":{"x":1}}`: "input[0]",
	} {
		_, perr := protocol.DecodeItem(json.RawMessage(raw), "input[0]")
		if perr == nil || perr.Param != param {
			t.Errorf("%s: %v, want an error about %s", raw, perr, param)
		}
	}
}

// TestMultiAgentItemsSDK: what tether encodes, openai-go's beta output
// union reads as the same variant with the same fields.
func TestMultiAgentItemsSDK(t *testing.T) {
	t.Parallel()
	for _, raw := range multiAgentItems[:3] {
		it, perr := protocol.DecodeItem(json.RawMessage(raw), "output[0]")
		if perr != nil {
			t.Fatal(perr)
		}
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		var u openai.BetaResponseOutputItemUnion
		if err := json.Unmarshal(b, &u); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		switch v := u.AsAny().(type) {
		case openai.BetaResponseOutputItemMultiAgentCall:
			if v.CallID != "call_spawn_a" || v.Action != protocol.ActionSpawnAgent || v.Agent.AgentName != protocol.RootAgent {
				t.Errorf("%s read as %+v", b, v)
			}
		case openai.BetaResponseOutputItemMultiAgentCallOutput:
			if len(v.Output) != 1 || v.Output[0].Text != `{"task_name":"/root/agent_a"}` {
				t.Errorf("%s read as %+v", b, v)
			}
		case openai.BetaResponseOutputItemAgentMessage:
			if v.Author != "/root/agent_a" || v.Recipient != protocol.RootAgent || len(v.Content) != 1 || v.Content[0].Text != "12 tests." {
				t.Errorf("%s read as %+v", b, v)
			}
		default:
			t.Errorf("%s read as %T", b, v)
		}
	}
}
