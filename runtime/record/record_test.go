package record_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lockedBuffer is a bytes.Buffer the test reads after the server is done.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// serve runs a server recording to rec until the test ends.
func serve(t *testing.T, rec runtime.Recorder) string {
	t.Helper()
	srv, err := runtime.NewServer(runtime.Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		hs.Close()
	})
	return hs.URL + "/v1"
}

// TestEveryDesign records one two-call rollout in every design, msgpack
// frames too, and reads the log back: each response's request first (its
// path naming the design), then its events in sequence from 0 to a
// terminal one, with each append of a suspended rollout after the pause it
// answers and before the events of the step it resumes.
func TestEveryDesign(t *testing.T) {
	var buf lockedBuffer
	w := record.New(&buf)
	base := serve(t, w)
	type run struct {
		mode clienttools.Mode
		enc  protocol.Encoding
	}
	runs := []run{{clienttools.ModeStateless, protocol.EncodingJSON}, {clienttools.ModeChained, protocol.EncodingJSON}, {clienttools.ModeTurns, protocol.EncodingJSON}, {clienttools.ModeSuspend, protocol.EncodingJSON}, {clienttools.ModeSuspend, protocol.EncodingMsgpack}}
	for _, r := range runs {
		c := &clienttools.Client{BaseURL: base, Encoding: r.enc}
		_, err := c.Run(t.Context(), clienttools.Rollout{
			Mode: r.mode,
			Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage(
				"Look twice.\ncall: look {\"at\":\"one\"}\ncall: look {\"at\":\"two\"}")}},
			Funcs: []clienttools.Func{{Name: "look", Parameters: []byte(`{"type":"object"}`), Run: func(context.Context, string) (string, error) { return "seen", nil }}},
		})
		if err != nil {
			t.Fatalf("%s %s: %v", r.mode, r.enc, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	buf.mu.Lock()
	log := buf.b.String()
	buf.mu.Unlock()
	rd, err := record.NewReader(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	type response struct {
		design  string
		seq     int // the next sequence number
		appends int
		paused  bool
		ended   protocol.EventType
	}
	responses := map[string]*response{}
	var order []string
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r := responses[l.ResponseID]
		switch l.Kind {
		case record.KindRequest:
			req, err := l.Request()
			if r != nil || err != nil || l.Path == nil || len(req.Input) == 0 {
				t.Fatalf("line %d: request %v %v %v", l.N, r, err, l.Path)
			}
			responses[l.ResponseID] = &response{design: l.Path.Design}
			order = append(order, l.ResponseID)
		case record.KindEvent:
			ev, err := l.Event()
			if r == nil || err != nil || r.ended != "" {
				t.Fatalf("line %d: event of %v: %v", l.N, r, err)
			}
			if seq := protocol.Header(ev).SequenceNumber; seq != r.seq {
				t.Fatalf("line %d: sequence number %d, want %d", l.N, seq, r.seq)
			}
			r.seq++
			switch typ := protocol.Type(ev); typ {
			case protocol.EventDone:
				r.paused = true
			case protocol.EventCompleted, protocol.EventFailed, protocol.EventIncomplete, protocol.EventCancelled:
				r.ended = typ
			default:
				if r.paused && typ != protocol.EventInProgress {
					t.Fatalf("line %d: %s of a paused response before its append", l.N, typ)
				}
				r.paused = false
			}
		case record.KindAppend:
			items, err := l.Append()
			if r == nil || err != nil || !r.paused || len(items) != 1 {
				t.Fatalf("line %d: append to %+v (%v): %d items", l.N, r, err, len(items))
			}
			r.appends++
		}
	}
	var got []string
	for _, id := range order {
		r := responses[id]
		if r.ended != protocol.EventCompleted {
			t.Errorf("%s (%s) ended %q", id, r.design, r.ended)
		}
		got = append(got, r.design+"/"+string(rune('0'+r.appends)))
	}
	// Stateless, chained and turns make a response a step (a chain's
	// first, with no parent, is served as stateless); a suspended rollout
	// is one response with an append a call.
	want := "stateless/0 stateless/0 stateless/0 stateless/0 chained/0 chained/0 turns/0 turns/0 turns/0 suspend/2 suspend/2"
	if strings.Join(got, " ") != want {
		t.Errorf("responses %s\nwant      %s", strings.Join(got, " "), want)
	}
}

// failing fails every write after its first (the header's).
type failing struct{ n int }

func (f *failing) Write(p []byte) (int, error) {
	if f.n++; f.n > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestWriteFails: a log that cannot be written drops what it is given,
// says why, and the server serves on.
func TestWriteFails(t *testing.T) {
	w := record.New(&failing{})
	base := serve(t, w)
	c := &clienttools.Client{BaseURL: base}
	for range 2 {
		res, err := c.Run(t.Context(), clienttools.Rollout{Mode: clienttools.ModeStateless,
			Request: &protocol.CreateRequest{Model: "tether-scripted", Input: protocol.Items{protocol.UserMessage("Hello")}}})
		if err != nil || res.Response.Status != protocol.ResponseCompleted {
			t.Fatalf("served %v: %v", res.Response, err)
		}
	}
	if err := w.Err(); err == nil || err.Error() != "disk full" {
		t.Errorf("Err: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close of a failed log: no error")
	}
}
