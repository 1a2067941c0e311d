package runtime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestMsgpackWebSocket: a connection that asks for the msgpack subprotocol
// gets every event as a msgpack binary frame of the same object; a binary
// frame that is not msgpack gets an error event (in msgpack) and the
// connection serves on; a JSON text frame is still taken.
func TestMsgpackWebSocket(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, h.ws, &websocket.DialOptions{Subprotocols: []string{"msgpack"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "msgpack" {
		t.Fatalf("subprotocol %q, want msgpack", c.Subprotocol())
	}
	sendMsgpack := func(v any) {
		t.Helper()
		b, err := protocol.MarshalAs(protocol.EncodingMsgpack, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Write(ctx, websocket.MessageBinary, b); err != nil {
			t.Fatal(err)
		}
	}
	// untilEnd reads msgpack frames up to a terminal or error event and
	// returns them as JSON.
	untilEnd := func() [][]byte {
		t.Helper()
		var evs [][]byte
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if typ != websocket.MessageBinary {
				t.Fatalf("a %v frame on a msgpack connection: %s", typ, b)
			}
			js, err := protocol.MsgpackToJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			if _, perr := protocol.DecodeEvent(js); perr != nil {
				t.Fatalf("%s: %v", js, perr)
			}
			evs = append(evs, js)
			if typ := eventType(t, js); typ == "error" || isEnd(typ) {
				return evs
			}
		}
	}

	sendMsgpack(create(map[string]any{"model": "tether-scripted", "store": false, "input": "hello"}))
	evs := untilEnd()
	checkSeq(t, evs)
	if typ := eventType(t, last(evs)); typ != "response.completed" {
		t.Fatalf("ended with %s", typ)
	}

	if err := c.Write(ctx, websocket.MessageBinary, []byte{0xc1, 0xff}); err != nil {
		t.Fatal(err)
	}
	if e := decodeEv(t, last(untilEnd())); e.Error == nil || e.Error.Code != "invalid_json" {
		t.Fatalf("garbage frame: %+v", e)
	}

	text, _ := json.Marshal(create(map[string]any{"model": "tether-scripted", "store": false, "input": "again"}))
	if err := c.Write(ctx, websocket.MessageText, text); err != nil {
		t.Fatal(err)
	}
	if typ := eventType(t, last(untilEnd())); typ != "response.completed" {
		t.Fatalf("a JSON create on a msgpack connection ended with %s", typ)
	}
}
