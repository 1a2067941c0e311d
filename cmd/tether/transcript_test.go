package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestReadmeTranscript replays the README's wire transcript of one
// suspended rollout against a real server (tether serve --every-delta, in
// process), frame by frame: it sends each client frame as written (with
// the ids the server gave in place of the transcript's), and each server
// frame must come next, in order, holding every field the transcript
// shows with the same value. A frame that a server sends and the
// transcript does not list fails it: the last check sends a bad event and
// its error must be the very next frame.
func TestReadmeTranscript(t *testing.T) {
	t.Parallel()
	base, stop := serveInProcess(t, "--every-delta")
	defer stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()

	ids := transcriptIDs{}
	lines := strings.Split(strings.TrimSpace(readmeBlock(t, "## One suspended rollout on the wire", "")), "\n")
	if len(lines) < 10 {
		t.Fatalf("the transcript has %d lines", len(lines))
	}
	for i, line := range lines {
		var want map[string]any
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatalf("transcript line %d is not a JSON object: %v", i+1, err)
		}
		if isClientEvent(want["type"]) {
			frame, err := json.Marshal(ids.actual(want))
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Write(ctx, websocket.MessageText, frame); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			continue
		}
		got := readFrame(ctx, t, conn)
		if err := ids.match(want, got, ""); err != nil {
			t.Fatalf("transcript line %d (%s): %v\nthe server sent: %s", i+1, want["type"], err, mustJSON(got))
		}
	}
	conn.Write(ctx, websocket.MessageText, []byte(`{"type":"response.nothing"}`))
	if got := readFrame(ctx, t, conn); got["type"] != "error" {
		t.Fatalf("after the transcript's last frame the server sent %s", mustJSON(got))
	}
}

func isClientEvent(typ any) bool {
	switch typ {
	case "response.create", "response.append", "response.cancel", "response.resume", "response.fork", "response.processed":
		return true
	}
	return false
}

func readFrame(ctx context.Context, t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	_, b, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("reading the next frame: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("a frame that is not JSON: %v: %s", err, b)
	}
	return m
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// transcriptIDs maps the transcript's ids (resp_1, fc_1, call_…) to the
// ones the server made: an id is bound where it first appears in a server
// frame, and must then be the same id everywhere.
type transcriptIDs map[string]string

var transcriptID = regexp.MustCompile(`^(resp|fc|msg|call)_[0-9a-z]+$`)

// actual is a client frame with the server's ids in place of the
// transcript's.
func (ids transcriptIDs) actual(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = ids.actual(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = ids.actual(e)
		}
		return out
	case string:
		if id, ok := ids[v]; ok {
			return id
		}
	}
	return v
}

// match says where got lacks or differs from what want shows.
func (ids transcriptIDs) match(want, got any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %s", path, mustJSON(got))
		}
		for k, we := range w {
			ge, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := ids.match(we, ge, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %d elements, got %s", path, len(w), mustJSON(got))
		}
		for i := range w {
			if err := ids.match(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case string:
		g, ok := got.(string)
		if ok && transcriptID.MatchString(w) {
			if bound, seen := ids[w]; seen {
				ok = bound == g
			} else {
				ok = strings.SplitN(w, "_", 2)[0] == strings.SplitN(g, "_", 2)[0]
				ids[w] = g
			}
		} else {
			ok = ok && g == w
		}
		if !ok {
			return fmt.Errorf("%s: want %q, got %s", path, w, mustJSON(got))
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %s, got %s", path, mustJSON(want), mustJSON(got))
	}
	return nil
}
