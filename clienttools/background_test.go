package clienttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// bgServer is a fake server of one background response's events, which
// answers a resume from the event starting_after+1+shift: 0 is what the
// contract says, 1 skips an event, -1 repeats one. Its create's stream
// sends the events up to response.in_progress and then waits for the
// client to drop it.
type bgServer struct {
	shift  int
	events []protocol.Event

	mu      sync.Mutex
	created map[string]any // the create's body
	resumes []string       // each resume's query
	dropped bool           // the create's stream ended by the client
}

func newBGServer(shift int) *bgServer {
	resp := func(status protocol.ResponseStatus, out protocol.Items) *protocol.Response {
		return &protocol.Response{ID: "resp_bg", Object: "response", Status: status, Model: "m", Output: out, Background: true, Store: true}
	}
	answer := &protocol.Message{ID: "msg_1", Role: protocol.RoleAssistant, Status: protocol.StatusCompleted,
		Content: protocol.Contents{&protocol.OutputText{Text: "resumed"}}}
	events := []protocol.Event{
		&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCreated}, Response: resp(protocol.ResponseQueued, nil)},
		&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventQueued}, Response: resp(protocol.ResponseQueued, nil)},
		&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventInProgress}, Response: resp(protocol.ResponseInProgress, nil)},
		&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, Item: answer},
		&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemDone}, Item: answer},
		&protocol.ResponseEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCompleted}, Response: resp(protocol.ResponseCompleted, protocol.Items{answer})},
	}
	for i, ev := range events {
		protocol.Header(ev).SequenceNumber = i
	}
	return &bgServer{shift: shift, events: events}
}

func (s *bgServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.created = body
		s.mu.Unlock()
		s.send(w, s.events[:3])
		<-r.Context().Done() // the response runs on; only the client ends its stream
		s.mu.Lock()
		s.dropped = true
		s.mu.Unlock()
	case r.Method == http.MethodGet && r.URL.Path == "/v1/responses/resp_bg":
		s.mu.Lock()
		s.resumes = append(s.resumes, r.URL.RawQuery)
		s.mu.Unlock()
		after, err := strconv.Atoi(r.URL.Query().Get("starting_after"))
		if err != nil || r.URL.Query().Get("stream") != "true" {
			http.Error(w, "want stream=true and starting_after", http.StatusBadRequest)
			return
		}
		s.send(w, s.events[after+1+s.shift:])
	default:
		http.NotFound(w, r)
	}
}

func (s *bgServer) send(w http.ResponseWriter, events []protocol.Event) {
	for _, ev := range events {
		b, err := protocol.Marshal(ev)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", protocol.Type(ev), b)
	}
	w.(http.Flusher).Flush()
}

// TestBackgroundResume: a background turn is created with background,
// store and stream, its stream is dropped by the client once the response
// is in progress, and the resume asks for the events after the last it
// read; the caller sees every event once, in order. A resume that skips an
// event, or sends one again, is an error that says so.
func TestBackgroundResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		shift int
		err   string // what the error says; "" for none
	}{
		{"contiguous", 0, ""},
		{"gap", 1, "skipped from sequence_number 2 to 4 across the resume"},
		{"repeat", -1, "sent sequence_number 2 again across the resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newBGServer(tc.shift)
			hs := httptest.NewServer(srv)
			t.Cleanup(hs.Close)
			var seen []int
			c := &clienttools.Client{BaseURL: hs.URL + "/v1"}
			res, err := c.Run(t.Context(), clienttools.Rollout{Mode: clienttools.ModeBackground,
				Request: &protocol.CreateRequest{Model: "m", Input: userInput("Hi")},
				OnEvent: func(ev protocol.Event) { seen = append(seen, protocol.Header(ev).SequenceNumber) }})
			hs.Close() // waits for the create's handler, which ends once its stream is dropped
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one that says %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Text() != "resumed" || res.Resumes != 1 || res.Response.Status != protocol.ResponseCompleted {
				t.Errorf("text %q, %d resumes, %s; want the resumed answer, 1 resume, completed", res.Text(), res.Resumes, res.Response.Status)
			}
			if fmt.Sprint(seen) != "[0 1 2 3 4 5]" {
				t.Errorf("OnEvent saw sequence numbers %v, want each of 0 to 5 once, in order", seen)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for _, field := range []string{"background", "store", "stream"} {
				if srv.created[field] != true {
					t.Errorf("the create's %s is %v, want true", field, srv.created[field])
				}
			}
			if len(srv.resumes) != 1 || srv.resumes[0] != "starting_after=2&stream=true" {
				t.Errorf("resumes %q, want one after the in_progress event, 2", srv.resumes)
			}
			if !srv.dropped {
				t.Error("the create's stream was not dropped")
			}
		})
	}
}

// transcript is what a rollout showed its caller: each event's type but
// the deltas' and response.queued (which only a background response has),
// the deltas' text by type (how many deltas carry it varies with how far
// behind the client is), and each response's sequence numbers in order.
type transcript struct {
	types  []protocol.EventType
	deltas map[protocol.EventType]string
	seqs   [][]int
}

func (tr *transcript) see(ev protocol.Event) {
	h := protocol.Header(ev)
	if h.Type == protocol.EventCreated {
		tr.seqs = append(tr.seqs, nil)
	}
	if len(tr.seqs) > 0 {
		tr.seqs[len(tr.seqs)-1] = append(tr.seqs[len(tr.seqs)-1], h.SequenceNumber)
	}
	switch ev := ev.(type) {
	case *protocol.TextDeltaEvent:
		tr.deltas[ev.Type] += ev.Delta
	case *protocol.FunctionArgsDeltaEvent:
		tr.deltas[ev.Type] += ev.Delta
	default:
		if h.Type != protocol.EventQueued {
			tr.types = append(tr.types, h.Type)
		}
	}
}

// TestBackgroundLikeChained runs one rollout chained and in the
// background, against a model that streams as fast as it can and one
// paced (so that the cut finds it still sampling and the resume reads on
// live): the same calls, outputs, answer, turns and usage, and the same
// events but response.queued. Each background turn was resumed once, and
// every response's events came numbered 0, 1, 2… with no gap or repeat
// across the cut.
func TestBackgroundLikeChained(t *testing.T) {
	t.Parallel()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	base := server(t, runtime.Options{Models: map[string]runtime.Sampler{
		sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{}),
		"paced":               sampler.NewScripted(r, sampler.Timing{TPS: 2000}),
	}})
	input := "Look around.\ncall: read_file {\"path\":\"a.go\"} | grep {\"pattern\":\"TODO\"}\ncall: read_file {\"path\":\"b.go\"}"
	funcs := []clienttools.Func{
		{Name: "read_file", Parameters: []byte(`{"type":"object"}`), Run: func(_ context.Context, args string) (string, error) { return "package x // " + args, nil }},
		{Name: "grep", Parameters: []byte(`{"type":"object"}`), Run: func(_ context.Context, args string) (string, error) { return "a.go:3: TODO", nil }},
	}
	for _, model := range []string{sampler.ScriptedModel, "paced"} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			run := func(mode clienttools.Mode) (*clienttools.Result, *transcript) {
				tr := &transcript{deltas: map[protocol.EventType]string{}}
				c := &clienttools.Client{BaseURL: base}
				res, err := c.Run(t.Context(), clienttools.Rollout{Mode: mode, Funcs: funcs, OnEvent: tr.see,
					Request: &protocol.CreateRequest{Model: model, Input: userInput(input)}})
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				return res, tr
			}
			chained, chainedTr := run(clienttools.ModeChained)
			bg, bgTr := run(clienttools.ModeBackground)

			if len(chained.Calls) != 3 || len(chained.Turns) != 3 {
				t.Fatalf("chained: %d calls in %d turns, want 3 in 3", len(chained.Calls), len(chained.Turns))
			}
			if !slices.Equal(rolloutKey(t, bg), rolloutKey(t, chained)) || bg.Text() != chained.Text() {
				t.Errorf("background's output\n%q\nchained's\n%q", rolloutKey(t, bg), rolloutKey(t, chained))
			}
			callKeys := func(res *clienttools.Result) (keys []string) {
				for _, c := range res.Calls {
					keys = append(keys, c.Name+" "+c.Arguments+" -> "+c.Output)
				}
				return keys
			}
			if !slices.Equal(callKeys(bg), callKeys(chained)) {
				t.Errorf("background's calls %q, chained's %q", callKeys(bg), callKeys(chained))
			}
			// The second rollout finds the first's prompts in the prefix
			// cache: cached tokens differ, nothing else.
			uncached := func(u protocol.Usage) protocol.Usage { u.InputTokensDetails.CachedTokens = 0; return u }
			if len(bg.Turns) != len(chained.Turns) {
				t.Fatalf("background: %d turns, chained %d", len(bg.Turns), len(chained.Turns))
			}
			for i := range bg.Turns {
				if uncached(bg.Turns[i].Usage) != uncached(chained.Turns[i].Usage) {
					t.Errorf("turn %d: background used %+v, chained %+v", i, bg.Turns[i].Usage, chained.Turns[i].Usage)
				}
			}
			if !slices.Equal(bgTr.types, chainedTr.types) || !maps.Equal(bgTr.deltas, chainedTr.deltas) {
				t.Errorf("background's events\n%v\n%q\nchained's\n%v\n%q", bgTr.types, bgTr.deltas, chainedTr.types, chainedTr.deltas)
			}

			if bg.Resumes != len(bg.Turns) || chained.Resumes != 0 {
				t.Errorf("background resumed %d times in %d turns, chained %d; want one a background turn", bg.Resumes, len(bg.Turns), chained.Resumes)
			}
			if !bg.Response.Background || chained.Response.Background {
				t.Errorf("the last response's background: %v in background mode, %v chained", bg.Response.Background, chained.Response.Background)
			}
			if len(bgTr.seqs) != len(bg.Turns) {
				t.Fatalf("%d responses created in %d turns", len(bgTr.seqs), len(bg.Turns))
			}
			for i, seqs := range bgTr.seqs {
				for j, n := range seqs {
					if n != j {
						t.Fatalf("turn %d: sequence numbers %v, want 0, 1, 2… with no gap or repeat", i, seqs)
					}
				}
			}
		})
	}
}
