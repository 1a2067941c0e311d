package protocol_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// maxTextDeltaAllocs is the allocation budget for json.Marshal of one
// output_text.delta event, the event sent once per sampled token: one
// allocation (the returned slice; encoding/json pools its encode state) and
// a margin of 1 that absorbs toolchain changes, not a design change. A custom MarshalJSON on the event, or an interface or map field,
// would blow it. Raise it only with a benchmark that shows why.
const maxTextDeltaAllocs = 2

func textDelta() protocol.Event {
	return &protocol.TextDeltaEvent{
		EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta, SequenceNumber: 1234, StreamID: "lane-1"},
		ItemID:      "msg_0f60efc621c9344f006957e6b92914819482372070e73583e2",
		OutputIndex: 1,
		Delta:       " capital",
	}
}

func TestMarshalTextDeltaAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	ev := textDelta()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("json.Marshal(*TextDeltaEvent): %.0f allocs", allocs)
	if allocs > maxTextDeltaAllocs {
		t.Fatalf("marshaling a text delta takes %.0f allocations, budget %d: this runs once per token", allocs, maxTextDeltaAllocs)
	}
}

func BenchmarkMarshalTextDelta(b *testing.B) {
	ev := textDelta()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// createBody50 is a create request with a 50-item input: a conversation with
// tool calls, as an agent sends it on every turn without previous_response_id.
func createBody50() []byte {
	items := []string{`{"role":"developer","content":"You are a coding agent. Use the tools."}`}
	for i := 0; len(items) < 50; i++ {
		switch i % 4 {
		case 0:
			items = append(items, fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"Step %d: please read the file and summarize it."}]}`, i))
		case 1:
			items = append(items, fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"read_file","arguments":"{\"path\":\"src/main_%d.go\"}","status":"completed"}`, i, i, i))
		case 2:
			items = append(items, fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"package main\n\nfunc main() { println(%d) }\n"}`, i-1, i))
		case 3:
			items = append(items, fmt.Sprintf(`{"type":"message","id":"msg_%d","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The file prints %d.","annotations":[]}]}`, i, i))
		}
	}
	return []byte(`{"model":"gpt-5","stream":true,"store":false,"tools":[{"type":"function","name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],"input":[` + strings.Join(items, ",") + `]}`)
}

func BenchmarkDecodeCreateRequest(b *testing.B) {
	body := createBody50()
	r, perr := protocol.DecodeCreateRequest(body)
	if perr != nil || len(r.Input) != 50 {
		b.Fatalf("setup: %v, %d items", perr, len(r.Input))
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, perr := protocol.DecodeCreateRequest(body); perr != nil {
			b.Fatal(perr)
		}
	}
}

// BenchmarkDecodeEvent measures a client decoding the events of a suspended
// rollout's step: a text delta (one per token) and the pause's
// response.done, which carries the response object with its tools, the
// step's output and the pending call; in full and lean (without the
// tools, as the client kit reads them).
func BenchmarkDecodeEvent(b *testing.B) {
	req, perr := protocol.DecodeCreateRequest(createBody50())
	if perr != nil {
		b.Fatal(perr)
	}
	call := &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "read_file", Arguments: `{"path":"src/main.go"}`, Status: protocol.StatusCompleted}
	resp := &protocol.Response{ID: "resp_1", Object: "response", Status: protocol.ResponseRequiresAction, Model: "gpt-5",
		Output: req.Input[len(req.Input)-3:], Tools: req.Tools, Metadata: map[string]string{},
		RequiredAction: &protocol.RequiredAction{Type: "submit_tool_outputs", SubmitToolOutputs: protocol.SubmitToolOutputs{
			ToolCalls: []protocol.PendingCall{{CallID: call.CallID, Name: call.Name, Arguments: call.Arguments}}}}}
	resp.Output = append(resp.Output, call)
	for name, ev := range map[string]protocol.Event{
		"text_delta": textDelta(),
		"pause":      &protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventDone, SequenceNumber: 80}, Response: resp},
	} {
		data, err := json.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		for decoder, decode := range map[string]func([]byte) (protocol.Event, *protocol.Error){"": protocol.DecodeEvent, "/lean": protocol.DecodeEventLean} {
			b.Run(name+decoder, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, perr := decode(data); perr != nil {
						b.Fatal(perr)
					}
				}
			})
		}
	}
}

// BenchmarkMarshalDeltaCodec is the same event through protocol.Marshal,
// the way a server writes it: appended straight into its bytes (deltas.go),
// where the v2 engine's reflection takes twice as long
// (BenchmarkMarshalDelta/codec).
func BenchmarkMarshalDeltaCodec(b *testing.B) {
	ev := textDelta()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAppend measures a server decoding a response.append of
// one function_call_output, of a short output and of a 16 KB file's, the
// shape a suspended rollout's client sends at every pause.
func BenchmarkDecodeAppend(b *testing.B) {
	for _, n := range []int{200, 16 << 10} {
		output := strings.Repeat("func main() {\n\tprintln(\"hi\")\n}\n", n/32)
		frame, err := json.Marshal(map[string]any{"type": "response.append", "response_id": "resp_0123456789", "stream_id": "work",
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "call_1", "output": output}}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("output=%dB", len(output)), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, perr := protocol.DecodeClientEvent(frame); perr != nil {
					b.Fatal(perr)
				}
			}
		})
	}
}

// BenchmarkMarshalStepView encodes the response objects a suspended rollout
// sends at every step (its response.in_progress and its pause,
// response.done), decoded from a recorded step of the load workload.
func BenchmarkMarshalStepView(b *testing.B) {
	data, err := os.ReadFile("../clienttools/testdata/suspend-step.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(data) {
		ev, perr := protocol.DecodeEvent(bytes.TrimSpace(line))
		if perr != nil {
			b.Fatal(perr)
		}
		re, ok := ev.(*protocol.ResponseEvent)
		if !ok {
			continue
		}
		// Whole, and with its echo of the request kept, as a rollout
		// keeps it (see Response.KeepEcho).
		for _, kept := range []bool{false, true} {
			name := string(protocol.Type(ev)) + "/whole"
			if kept {
				name = string(protocol.Type(ev)) + "/echo-kept"
				if err := re.Response.KeepEcho(); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(line)))
				b.ReportAllocs()
				var buf []byte // reused, as a server's event buffer is
				for b.Loop() {
					if buf, err = protocol.AppendMarshal(buf[:0], ev); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
