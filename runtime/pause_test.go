package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lifecycle"
	"github.com/tether-run/tether/sampler"
)

// parkOne starts the suspended rollout ro on srv, reporting to a session
// of its own, and waits (in the synctest bubble) until it parks.
func parkOne(t *testing.T, srv *Server, ro *rollout) (*suspension, *session) {
	t.Helper()
	sess := newSession(srv, discardConn{}, httptest.NewRequest("GET", "/v1/responses", nil), protocol.EncodingJSON, nil)
	sp, _, perr := srv.suspend(ro, sess, "")
	if perr != nil {
		t.Fatal(perr)
	}
	sp.start()
	synctest.Wait()
	if !sp.parkedOn(sess) {
		t.Fatal("the rollout did not park")
	}
	return sp, sess
}

// discardConn is a connection that takes every frame and reads none: the
// session of a rollout driven by the test itself.
type discardConn struct{}

func (discardConn) Read(ctx context.Context) ([]byte, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}
func (discardConn) Write([]byte, bool, time.Time) error { return nil }
func (discardConn) Flush(time.Time) error               { return nil }
func (discardConn) Close(CloseStatus, string)           {}
func (discardConn) Abort()                              {}
func (discardConn) Done()                               {}
func (discardConn) Ordinary(error) bool                 { return true }

// prepared is the rollout srv prepares for the create body.
func prepared(t *testing.T, srv *Server, body string) *rollout {
	t.Helper()
	req, perr := protocol.DecodeCreateRequest([]byte(body))
	if perr != nil {
		t.Fatal(perr)
	}
	ro, perr := srv.prepare(context.Background(), req, nil, time.Now(), protocol.Timings{})
	if perr != nil {
		t.Fatal(perr)
	}
	return ro
}

// finishRollout answers each pause of sp with outputs from answer, until
// the rollout ends, and returns its terminal response.
func finishRollout(t *testing.T, sp *suspension, sess *session, answer func(protocol.Call) string) *protocol.Response {
	t.Helper()
	for range 8 {
		sp.mu.Lock()
		ended, calls := sp.st.Phase() == lifecycle.Ended, slices.Clone(sp.step)
		sp.mu.Unlock()
		if ended {
			break
		}
		var outs protocol.Items
		for _, c := range calls {
			outs = append(outs, &protocol.FunctionCallOutput{CallID: c.CallID, Output: protocol.ToolOutput{Text: answer(c)}})
		}
		if _, perr := sp.deliver(sess, &protocol.AppendEvent{Input: outs}, 0); perr != nil {
			t.Fatal(perr)
		}
		synctest.Wait()
	}
	_, terminal, ok := sp.settle(sess)
	if !ok {
		t.Fatal("the rollout did not end")
	}
	ev, err := protocol.DecodeEvent(terminal)
	if err != nil {
		t.Fatal(err)
	}
	re, ok := ev.(*protocol.ResponseEvent)
	if !ok || re.Response.Status != protocol.ResponseCompleted {
		t.Fatalf("terminal frame %s", terminal)
	}
	return re.Response
}

// shape is a response's output without its ids and times: what two runs of
// the same loop from the same state must agree on.
func shape(t *testing.T, items protocol.Items) string {
	t.Helper()
	var out []any
	for _, it := range items {
		b, err := protocol.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		delete(m, "id")
		out = append(out, m)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// TestPauseRoundTrip: a suspended rollout's state at a pause, written out
// (JSON and msgpack) and read back, is the same value, and holds everything
// its loop needs: restored on another server, from the bytes alone, it
// parks on the same calls with the same prompt, and answered as the
// original is, it goes on exactly as the original does.
func TestPauseRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := NewServer(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		other, err := NewServer(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Shutdown(context.Background())
		body := `{"model":"tether-scripted","store":false,"instructions":"Be brief.","tools":[{"type":"function","name":"read_file","parameters":{"type":"object"}},{"type":"function","name":"run_tests","parameters":{"type":"object"}}],` +
			`"input":"Fix the build.\ncall: read_file {\"path\":\"a.go\"}\ncall: read_file {\"path\":\"b.go\"} | run_tests {}\n"}`
		ro := prepared(t, srv, body)
		sp, sess := parkOne(t, srv, ro)
		answer := func(c protocol.Call) string { return c.Name + " says ok for " + c.Input }
		// Past the first pause: the state then has a step behind it.
		first := slices.Clone(sp.step)
		outs := protocol.Items{&protocol.FunctionCallOutput{CallID: first[0].CallID, Output: protocol.ToolOutput{Text: answer(first[0])}}}
		if _, perr := sp.deliver(sess, &protocol.AppendEvent{Input: outs}, 0); perr != nil {
			t.Fatal(perr)
		}
		synctest.Wait()

		ps, perr := sp.pause(sess, "")
		if perr != nil {
			t.Fatal(perr)
		}
		if len(ps.Calls) != 2 || ps.Steps != 2 || len(ps.Answered) != 1 {
			t.Fatalf("the state at the second pause: %d calls, %d steps, %d answered", len(ps.Calls), ps.Steps, len(ps.Answered))
		}
		written, err := protocol.Marshal(ps)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodePause(written, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := protocol.Marshal(back)
		if !bytes.Equal(written, again) {
			t.Fatalf("written, read back and written again:\n%s\n%s", written, again)
		}
		packed, err := protocol.MarshalAs(protocol.EncodingMsgpack, ps)
		if err != nil {
			t.Fatal(err)
		}
		js, err := protocol.ToJSON(protocol.EncodingMsgpack, packed)
		if err != nil {
			t.Fatal(err)
		}
		fromPack, err := decodePause(js, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := protocol.Marshal(fromPack); !bytes.Equal(written, again) {
			t.Fatalf("through msgpack:\n%s\n%s", written, again)
		}
		if _, err := decodePause([]byte(`{"version":99,"request":{},"response":{}}`), nil); err == nil {
			t.Error("a state of another version was read")
		}

		// The bytes alone rebuild the loop on another server.
		restored, perr := other.restore(context.Background(), back, "")
		if perr != nil {
			t.Fatal(perr)
		}
		if restored.prompt.Len() != ro.prompt.Len() || !slices.Equal(restored.header, ro.header) {
			t.Errorf("restored prompt %d tokens (header %d), the original's %d (header %d)", restored.prompt.Len(), len(restored.header), ro.prompt.Len(), len(ro.header))
		}
		if back.Seq == 0 || restored.order.seq != back.Seq {
			t.Errorf("restored, its next event is number %d; the state says %d", restored.order.seq, back.Seq)
		}
		rsp, rsess := parkOne(t, other, restored)
		if got, want := pendingIDs(rsp.step), pendingIDs(sp.step); !slices.Equal(got, want) {
			t.Errorf("restored, it parks on %v; the original on %v", got, want)
		}
		orig := finishRollout(t, sp, sess, answer)
		rest := finishRollout(t, rsp, rsess, answer)
		if rest.ID != orig.ID {
			t.Errorf("restored as %s, the original is %s", rest.ID, orig.ID)
		}
		if a, b := shape(t, orig.Output), shape(t, rest.Output); a != b {
			t.Errorf("the restored loop went on otherwise:\n%s\n%s", b, a)
		}
		if orig.Usage == nil || rest.Usage == nil || orig.Usage.OutputTokens != rest.Usage.OutputTokens {
			t.Errorf("usage %+v, the original's %+v", rest.Usage, orig.Usage)
		}
	})
}

func pendingIDs(calls []protocol.Call) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.CallID)
	}
	return ids
}

// FuzzDecodePause: a pause state read back from any bytes is refused with an
// error or restores (or is refused by the server) without a panic: what a
// store hands back is not trusted to be whole.
func FuzzDecodePause(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"request":{"model":"tether-scripted","input":"hi"},"response":{"id":"resp_1","output":[]},"items":[],"calls":[]}`))
	f.Add([]byte(`{"version":1,"request":{"model":"tether-scripted","input":"hi"},"response":{"id":"resp_1","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]},` +
		`"items":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"rendered":1,"calls":[{"type":"function_call","call_id":"c","name":"f","index":0,"pos":0,"client":true}]}`))
	f.Add([]byte(`{"version":1,"request":{"model":"tether-scripted","input":"hi"},"response":{"id":"resp_1","output":[]},"items":[],"rendered":5,"calls":[]}`))
	// A state with a hosted MCP server whose approvals the loop looks at.
	f.Add([]byte(`{"version":1,"request":{"model":"tether-scripted","input":"hi","tools":[{"type":"mcp","server_label":"calc","server_url":"http://127.0.0.1:9/mcp"}]},` +
		`"response":{"id":"resp_1","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]},` +
		`"items":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"rendered":1,"approved_from":1,"steps":1,` +
		`"mcp_tools":{"calc":[{"name":"add","input_schema":{"type":"object"}}]},"calls":[{"type":"function_call","call_id":"c","name":"f","index":0,"pos":0,"client":true}]}`))
	r, err := sampler.NewRenderer()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := decodePause(b, nil)
		if err != nil {
			return
		}
		if _, err := protocol.Marshal(ps); err != nil {
			t.Fatalf("a state read back does not write out: %v", err)
		}
		// Restored and run until it parks or ends, in fake time: the loop
		// must not panic on any state decodePause accepts.
		synctest.Test(t, func(t *testing.T) {
			var panics panicCount
			srv, err := NewServer(Options{Renderer: r, Logger: slog.New(&panics), MCP: &fakeMCP{}})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			ro, perr := srv.restore(context.Background(), ps, "")
			if perr != nil {
				return
			}
			sess := newSession(srv, discardConn{}, httptest.NewRequest("GET", "/v1/responses", nil), protocol.EncodingJSON, nil)
			sp, _, perr := srv.suspend(ro, sess, "")
			if perr != nil {
				return
			}
			sp.start()
			synctest.Wait()
			if n := panics.n.Load(); n > 0 {
				t.Fatalf("the restored loop panicked (%d)", n)
			}
		})
	})
}

// panicCount is a log handler that counts the server's reports of a
// recovered panic.
type panicCount struct{ n atomic.Int64 }

func (*panicCount) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicCount) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		p.n.Add(1)
	}
	return nil
}
func (p *panicCount) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicCount) WithGroup(string) slog.Handler      { return p }
