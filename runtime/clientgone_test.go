package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// pairs is an input of a user message, then n function calls, then their
// n outputs: a request whose every step (decode, validation, rendering,
// the model's reading of it) grows with n.
func pairs(n int) []any {
	input := []any{userMsg("Sum the results up.")}
	for i := range n {
		input = append(input, map[string]any{"type": "function_call", "call_id": fmt.Sprint("call_", i), "name": "measure", "arguments": `{"probe":` + fmt.Sprint(i) + `}`})
	}
	for i := range n {
		input = append(input, map[string]any{"type": "function_call_output", "call_id": fmt.Sprint("call_", i), "output": "42 ms"})
	}
	return input
}

// TestClientGoneEndsWork: a client that goes away in the middle of a
// work-heavy response (5,000 call outputs to read, an answer of tens of
// thousands of tokens at 200 a second) ends its work, on every transport
// that serves a response to one client: the model's sample returns
// cancelled and no goroutine of the response is left, within 10 s. (A
// suspended rollout outlives its connection for its resume window, by
// design: docs/protocol.md.)
func TestClientGoneEndsWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire wire
		open func(t *testing.T, h *harness, body map[string]any) (drop func())
	}{
		{"http", wire{enc: protocol.EncodingJSON}, func(t *testing.T, h *harness, body map[string]any) func() {
			return postAndDrop(t, h, body)
		}},
		{"sse", wire{enc: protocol.EncodingJSON}, func(t *testing.T, h *harness, body map[string]any) func() {
			body["stream"] = true
			return postAndDrop(t, h, body)
		}},
		{"ws", wire{enc: protocol.EncodingJSON}, func(t *testing.T, h *harness, body map[string]any) func() {
			c := h.dial(t, nil)
			c.send(t, create(body))
			return c.drop
		}},
		{"wt", wire{webTransport: true, enc: protocol.EncodingJSON}, func(t *testing.T, h *harness, body map[string]any) func() {
			c := h.dial(t, nil)
			c.send(t, create(body))
			return c.drop
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			slow := sampler.NewScripted(renderer(t), sampler.Timing{TPS: 200})
			h := newHarnessOn(t, runtime.Options{Limits: runtime.Limits{MaxFrame: 64 << 20},
				Models: map[string]runtime.Sampler{"slow": samplerFunc(func(ctx context.Context, req *sampler.Request, emit func(sampler.Delta)) (sampler.Result, error) {
					started <- struct{}{}
					res, err := slow.Sample(ctx, req, emit)
					ended <- err
					return res, err
				})}}, tc.wire)
			drop := tc.open(t, h, map[string]any{"model": "slow", "store": false, "input": pairs(5000)})
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the model never started")
			}
			time.Sleep(100 * time.Millisecond) // into the answer
			gone := time.Now()
			drop()
			select {
			case err := <-ended:
				if err == nil {
					t.Errorf("the sample ended without an error: it ran its whole answer")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the model went on 10 s after its client left")
			}
			stopped := time.Since(gone)
			for !responseGone() {
				if time.Since(gone) > 10*time.Second {
					var b bytes.Buffer
					pprof.Lookup("goroutine").WriteTo(&b, 1)
					t.Fatalf("a goroutine of the response is left 10 s after its client:\n%s", b.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("the model stopped %v after the client left, the response's goroutines %v", stopped.Round(time.Microsecond), time.Since(gone).Round(time.Microsecond))
		})
	}
}

// responseGone reports that no goroutine runs a response or samples.
func responseGone() bool {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	s := b.String()
	return !strings.Contains(s, "runtime.(*rollout).run") && !strings.Contains(s, "sampler.sampleParts")
}

// postAndDrop posts body and returns what drops the request: its context
// cancelled, which closes its connection.
func postAndDrop(t *testing.T, h *harness, body map[string]any) func() {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/responses", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// BenchmarkCallOutputPairs: an HTTP create whose input holds n calls and
// then their n outputs, the whole request path (decode, validation,
// rendering, the scripted model reading every output and answering, the
// response written): the time per pair must not grow with n.
func BenchmarkCallOutputPairs(b *testing.B) {
	h := newHarness(b, runtime.Options{Limits: runtime.Limits{MaxFrame: 64 << 20}})
	for _, n := range []int{5000, 20000, 40000} {
		body, err := json.Marshal(map[string]any{"model": sampler.ScriptedModel, "store": false, "input": pairs(n)})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint("pairs=", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				resp, err := http.Post(h.base+"/responses", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				var out struct{ Status string }
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || out.Status != "completed" {
					b.Fatalf("%d %v: %+v", resp.StatusCode, err, out)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/pair")
		})
	}
}
