package protocol_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tether-run/tether/protocol"
)

// A WebSocket read loop decodes each frame, dispatches on its type, and on a
// refusal answers on the lane the frame named, without closing the connection.
func ExampleDecodeClientEvent() {
	frames := []string{
		`{"type":"response.create","stream_id":"lane-1","model":"gpt-5","input":"Hi!","stream":true}`,
		`{"type":"response.append","stream_id":"lane-1","response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"72F"}]}`,
		`{"type":"response.cancel","stream_id":"lane-2"}`,
	}
	for _, frame := range frames {
		ev, lane, perr := protocol.DecodeClientEvent([]byte(frame))
		if perr != nil {
			fmt.Printf("refused on lane %q: %s (param %s)\n", lane, perr.Code, perr.Param)
			continue
		}
		switch ev := ev.(type) {
		case *protocol.CreateEvent:
			fmt.Printf("create on %s: model %s, %d input item(s), %q\n", ev.Lane(), ev.Request.Model, len(ev.Request.Input), ev.Request.Input[0].(*protocol.Message).Content.Text())
		case *protocol.AppendEvent:
			out := ev.Input[0].(*protocol.FunctionCallOutput)
			fmt.Printf("append to %s: %s = %s\n", ev.ResponseID, out.CallID, out.Output)
		}
	}
	// Output:
	// create on lane-1: model gpt-5, 1 input item(s), "Hi!"
	// append to resp_1: call_1 = 72F
	// refused on lane "lane-2": missing_required_parameter (param response_id)
}

// Every refusal has one wire form per transport; on a WebSocket it carries
// the HTTP-like status and the lane.
func ExampleError_WebSocketError() {
	_, lane, perr := protocol.DecodeClientEvent([]byte(`{"type":"response.create","stream_id":"lane-1","model":"m","input":[{"role":"user","content":[{"type":"image","url":"x"}]}]}`))
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(perr.WebSocketError(lane)); err != nil {
		panic(err)
	}
	// Output:
	// {
	//   "type": "error",
	//   "status": 400,
	//   "stream_id": "lane-1",
	//   "error": {
	//     "type": "invalid_request_error",
	//     "code": "invalid_value",
	//     "message": "Invalid value: 'image'. Supported content types are: 'input_text', 'input_image', 'input_file', 'input_video', 'output_text', 'refusal', 'text', 'summary_text' and 'reasoning_text'.",
	//     "param": "input[0].content[0].type"
	//   }
	// }
}

// A msgpack connection carries the very same objects: an event written as
// msgpack is its JSON, transcoded, and reads back as that JSON byte for
// byte.
func ExampleMarshalAs() {
	ev := &protocol.TextDeltaEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputTextDelta, SequenceNumber: 7},
		ItemID: "msg_1", Delta: "Hello <world>", Logprobs: &[]protocol.LogProb{}}
	js, _ := protocol.MarshalAs(protocol.EncodingJSON, ev)
	mp, _ := protocol.MarshalAs(protocol.EncodingMsgpack, ev)
	back, _ := protocol.ToJSON(protocol.EncodingMsgpack, mp)
	fmt.Printf("%s\n%d bytes of JSON, %d of msgpack; the same after the trip: %v\n", js, len(js), len(mp), string(back) == string(js))
	// Output:
	// {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello \u003cworld\u003e","logprobs":[]}
	// 158 bytes of JSON, 123 of msgpack; the same after the trip: true
}
