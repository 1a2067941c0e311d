package clienttools_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// cutter cuts the client's connections: each one is closed once it has read
// a random number of bytes, until cuts have been made.
type cutter struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cuts int // left to make
	made int
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts == 0 {
		return conn, nil
	}
	c.cuts--
	// Past the handshake and response.created: a connection cut before the
	// client knows the response's id leaves nothing to resume.
	return &cutConn{Conn: conn, left: 3000 + c.rng.IntN(12_000), cut: func() { c.mu.Lock(); c.made++; c.mu.Unlock() }}, nil
}

// cutConn closes itself when it has read left bytes.
type cutConn struct {
	net.Conn
	left int
	once sync.Once
	cut  func()
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.left <= 0 {
		c.once.Do(func() { c.Conn.Close(); c.cut() })
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(b[:min(len(b), c.left)])
	c.left -= n
	return n, err
}

// rolloutKey is what two runs of the same rollout must agree on: every
// output item, without its ids, a call's call_id as the order it came in
// ("#3"). The runs are responses of their own, which draw their own call
// ids; a call id given twice fails t.
func rolloutKey(t *testing.T, res *clienttools.Result) []string {
	t.Helper()
	var out []string
	order := map[string]int{}
	for _, it := range res.Output {
		switch it := it.(type) {
		case *protocol.FunctionCall:
			if _, dup := order[it.CallID]; dup || it.CallID == "" {
				t.Errorf("call id %q twice or empty", it.CallID)
			}
			order[it.CallID] = len(order) + 1
			out = append(out, fmt.Sprintf("call #%d %s %s %s", order[it.CallID], it.Name, it.Arguments, it.Status))
		case *protocol.Message:
			out = append(out, fmt.Sprintf("message %s %q", it.Status, (&clienttools.Result{Output: protocol.Items{it}}).Text()))
		default:
			out = append(out, string(it.ItemType()))
		}
	}
	return out
}

// TestRunResume cuts the connection of a suspended rollout at random points
// (many seeds, up to three cuts a run): the client resumes it on a new
// connection each time and finishes it; the callback sees every event
// exactly once, in order; the output equals an uncut run's.
func TestRunResume(t *testing.T) {
	t.Parallel()
	r, err := sharedRenderer()
	if err != nil {
		t.Fatal(err)
	}
	base := server(t, runtime.Options{Models: map[string]runtime.Sampler{sampler.ScriptedModel: sampler.NewScripted(r, sampler.Timing{})}})
	input := "Fix the build.\n"
	for i := range 6 {
		input += fmt.Sprintf("call: read_file {\"path\":\"f%d.go\"} | grep {\"pattern\":\"p%d\"}\n", i, i)
	}
	run := func(t *testing.T, hc *http.Client) (*clienttools.Result, []int) {
		var seqs []int
		c := &clienttools.Client{BaseURL: base, HTTPClient: hc}
		res, err := c.Run(context.Background(), clienttools.Rollout{
			Mode:    clienttools.ModeSuspend,
			Request: &protocol.CreateRequest{Model: sampler.ScriptedModel, Input: userInput(input)},
			Funcs: []clienttools.Func{
				{Name: "read_file", Parameters: []byte(`{"type":"object"}`), Run: func(_ context.Context, args string) (string, error) { return "read " + args, nil }},
				{Name: "grep", Parameters: []byte(`{"type":"object"}`), Run: func(_ context.Context, args string) (string, error) { return "grep " + args, nil }},
			},
			OnEvent: func(ev protocol.Event) { seqs = append(seqs, protocol.Header(ev).SequenceNumber) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Response.Status != protocol.ResponseCompleted {
			t.Fatalf("ended %s", res.Response.Status)
		}
		return res, seqs
	}
	ref, _ := run(t, nil)
	want := rolloutKey(t, ref)
	if len(ref.Calls) != 12 {
		t.Fatalf("uncut run made %d calls", len(ref.Calls))
	}
	cuts := 0
	for seed := range 40 {
		cut := &cutter{rng: rand.New(rand.NewPCG(uint64(seed), 7)), cuts: 3}
		res, seqs := run(t, &http.Client{Transport: &http.Transport{DialContext: cut.dial}})
		for i, s := range seqs {
			if s != i {
				t.Fatalf("seed %d: event %d has sequence_number %d: an event lost or seen twice", seed, i, s)
			}
		}
		if got := rolloutKey(t, res); !slices.Equal(got, want) {
			t.Fatalf("seed %d: output\n%q\nwant\n%q", seed, got, want)
		}
		if len(res.Calls) != 12 {
			t.Fatalf("seed %d: %d calls, want 12 (a call run twice or not at all)", seed, len(res.Calls))
		}
		cut.mu.Lock()
		cuts += cut.made
		if res.Reconnects < cut.made-1 {
			t.Errorf("seed %d: %d cuts, %d reconnects", seed, cut.made, res.Reconnects)
		}
		cut.mu.Unlock()
	}
	if cuts < 40 {
		t.Errorf("only %d cuts over 40 runs: the test cuts too late to test resuming", cuts)
	}
	t.Logf("%d cuts over 40 runs", cuts)
}
