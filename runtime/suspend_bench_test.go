package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
	"github.com/tether-run/tether/sampler"
)

// pauseSteps is the number of one-call steps of each benchmarked rollout.
// A pause's response.done carries the rollout's output so far, so its cost
// grows with the output; a short rollout keeps that part small and fixed.
const pauseSteps = 16

// BenchmarkPauseResume measures one pause and resume of a suspended rollout
// over WebSocket, with an unpaced model, on top of 1k and 100k tokens of
// context: from the client writing response.append to reading the next
// step's response.done (the loop resumes, samples one call, parks again).
// resume-ns/op is the part up to the first event of the resumed step
// (response.in_progress). Each rollout forks from a cached response holding
// the context, so the context is the same for every pause. From the
// rollouts' timings: rendered-tok/pause and render-us/pause are what the
// server tokenized per pause, cached-tok/rollout the context it reused.
//
// checkpoints= is where each pause is checkpointed (suspension_durable.go): none, in
// memory, or in a real redis-server (fsync on every write, as
// internal/redistest runs it), each written before the pause goes out.
// journal-bytes/pause and journal-writes/pause are what the pauses and their
// answers append to the rollout's journal; snapshot-bytes/rollout, apart,
// what begins it (its first pause's, and any compaction's). +hibernated hibernates the rollout
// at each pause (Suspension.HibernateAfter of a nanosecond): each append
// wakes it from its checkpoint.
//
// ttft=1ms gives the model a millisecond to its first token, as every real
// model takes at least that: the resumed step's work then waits until its
// in_progress is out, where the unpaced model runs the whole next step at
// once, on the same two cores as the client reading the in_progress (and,
// in this process, its goroutine waits for a P the step holds).
//
// dialect=beta runs the same rollout as the multi-agent beta's waiting
// response: the client answers each call with response.inject as its
// output_item.done comes (no response.done), and the resumed step's first
// event is response.inject.created; the round trip ends at the next
// call's output_item.done.
//
// client=process puts the server, and the echo beside it, in a process of
// their own (startBenchServer): the client reads on its own threads, as a
// real client does, rather than wait for the server's scheduler to run it.
// Its echo crosses processes too, and is the floor for that placement.
func BenchmarkPauseResume(b *testing.B) {
	r := renderer(b)
	for _, n := range []int{1_000, 100_000} {
		for _, where := range []string{"none", "memory", "redis", "memory+hibernated", "redis+hibernated"} {
			b.Run(fmt.Sprintf("context=%dk/checkpoints=%s", n/1000, where), func(b *testing.B) {
				benchmarkPauseResume(b, r, n, where, 0, false)
			})
		}
		for _, where := range []string{"none", "redis"} {
			b.Run(fmt.Sprintf("context=%dk/checkpoints=%s/dialect=beta", n/1000, where), func(b *testing.B) {
				benchmarkPauseResume(b, r, n, where+"+beta", 0, false)
			})
		}
	}
	b.Run("context=1k/checkpoints=none/ttft=1ms", func(b *testing.B) {
		benchmarkPauseResume(b, r, 1_000, "none", time.Millisecond, false)
	})
	for _, ttft := range []time.Duration{0, time.Millisecond} {
		b.Run(fmt.Sprintf("context=1k/checkpoints=none/ttft=%s/client=process", ttft), func(b *testing.B) {
			benchmarkPauseResume(b, r, 1_000, "none", ttft, true)
		})
	}
}

func benchmarkPauseResume(b *testing.B, r *sampler.Renderer, n int, where string, ttft time.Duration, outside bool) {
	opts := runtime.Options{Renderer: r}
	if ttft > 0 {
		opts.Models = map[string]runtime.Sampler{"tether-scripted": sampler.NewScripted(r, sampler.Timing{TTFT: ttft})}
	}
	var sizes *sizedCheckpoints
	if w, ok := strings.CutSuffix(where, "+hibernated"); ok {
		where, opts.Suspension.HibernateAfter = w, time.Nanosecond
	}
	beta := false
	if w, ok := strings.CutSuffix(where, "+beta"); ok {
		where, beta = w, true
	}
	// What a pause is, what answers it, what the resumed step begins with:
	// in the multi-agent beta's dialect, the call's output_item.done, an
	// inject, its acknowledgment.
	pauseType, answerType, resumedType := "response.done", "response.append", "response.in_progress"
	if beta {
		pauseType, answerType, resumedType = "response.output_item.done", "response.inject", "response.inject.created"
	}
	switch where {
	case "memory":
		sizes = &sizedCheckpoints{Checkpoints: runtime.NewMemoryCheckpoints()}
	case "redis":
		st, err := redisstore.New(redistest.Start(b).URL(), redisstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		sizes = &sizedCheckpoints{Checkpoints: st}
	}
	if sizes != nil {
		opts.Checkpoints = sizes
	}
	var c *wsConn
	var echo *echoConn // set beside each resume (see below)
	switch {
	case outside && where != "none":
		b.Fatalf("checkpoints=%s: a server outside serves none", where)
	case outside:
		tether, echoURL := startBenchServer(b, ttft)
		c, echo = dialWS(b, tether, nil), dialEchoAt(b, echoURL)
	default:
		c = newHarness(b, opts).dial(b, nil)
		if where == "none" {
			echo = dialEcho(b)
		}
	}
	c.send(b, create(map[string]any{"model": "tether-scripted", "store": false, "stream_id": "base", "input": history(b, r, n)}))
	base := c.untilTerminal(b)
	baseID := respID(b, last(base))
	if in := decodeEv(b, last(base)).Response.Usage.InputTokens; in < n {
		b.Fatalf("context of %d tokens, want %d", in, n)
	}
	var steps [][]dcall
	for i := range pauseSteps {
		steps = append(steps, []dcall{{"read_file", fmt.Sprintf(`{"path":"pkg/config/file%d.go"}`, i)}})
	}
	body := map[string]any{"model": "tether-scripted", "store": false, "stream_id": "work",
		"suspend": true, "previous_response_id": baseID, "input": script(steps), "include": []string{protocol.IncludeTimings}}
	if beta {
		delete(body, "suspend")
		body["multi_agent"] = map[string]any{"enabled": true}
	}
	start, _ := json.Marshal(create(body))
	ctx := context.Background()
	// The client reads only what it needs: the event type, from the
	// frame's head, and the pending call_id, the last in a pause
	// (required_action ends the response object). The figures are
	// then the server's work and the loopback I/O.
	var id string // the rollout's, from its response.created
	read := func() ([]byte, string) {
		_, data, err := c.c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		head, ok := bytes.CutPrefix(data, []byte(`{"type":"`))
		end := bytes.IndexByte(head, '"')
		if !ok || end < 0 {
			b.Fatalf("frame %.80s", data)
		}
		return data, string(head[:end])
	}
	untilPause := func() ([]byte, string) {
		for {
			data, typ := read()
			if typ == "response.created" {
				id = respID(b, data)
			}
			if typ == pauseType && (!beta || bytes.Contains(data, []byte(`"type":"function_call"`))) || isEnd(typ) || typ == "error" {
				return data, typ
			}
		}
	}
	var tm protocol.Timings // summed over the rollouts
	rollouts := 0
	appendFrame := func(done []byte) []byte {
		const key = `"call_id":"`
		i := bytes.LastIndex(done, []byte(key))
		callID, _, _ := bytes.Cut(done[i+len(key):], []byte(`"`))
		ev := appendEv(id, "work", fco(string(callID), "package config\n\nfunc parse() {}\n"))
		ev["type"] = answerType
		f, _ := json.Marshal(ev)
		return f
	}
	// A rollout starts paused on its first step; the append that
	// completes it is not measured.
	begin := func() []byte {
		if err := c.c.Write(ctx, websocket.MessageText, start); err != nil {
			b.Fatal(err)
		}
		done, typ := untilPause()
		if typ != pauseType {
			b.Fatalf("rollout began with %s", done)
		}
		return done
	}
	finish := func(done []byte) {
		typ := pauseType
		for typ == pauseType {
			if err := c.c.Write(ctx, websocket.MessageText, appendFrame(done)); err != nil {
				b.Fatal(err)
			}
			done, typ = untilPause()
		}
		if typ != "response.completed" {
			b.Fatalf("rollout ended with %s", done)
		}
		var end struct {
			Response struct{ Timings protocol.Timings }
		}
		if err := json.Unmarshal(done, &end); err != nil {
			b.Fatal(err)
		}
		tm.RenderedTokens += end.Response.Timings.RenderedTokens
		tm.CachedTokens += end.Response.Timings.CachedTokens
		tm.RenderMicros += end.Response.Timings.RenderMicros
		rollouts++
	}
	pause := begin()
	left := pauseSteps - 1
	var resume time.Duration
	// Without checkpoints, each resume is set beside an echo of the same
	// frames on the same loopback, in turn: the append in, a frame as
	// long as the response.in_progress out (see echoHandler). With the
	// client outside, the echo server is in the server's process.
	var resumes, echoes []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			finish(pause)
			pause, left = begin(), pauseSteps-1
			b.StartTimer()
		}
		frame := appendFrame(pause)
		t0 := time.Now()
		if err := c.c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		first, typ := read()
		if typ != resumedType {
			b.Fatalf("resumed with %s", typ)
		}
		took := time.Since(t0)
		resume += took
		if echo != nil {
			b.StopTimer()
			resumes, echoes = append(resumes, took), append(echoes, echo.roundTrip(b, frame, len(first)))
			b.StartTimer()
		}
		if pause, typ = untilPause(); typ != pauseType {
			b.Fatalf("step ended with %s", pause)
		}
		left--
	}
	b.ReportMetric(float64(resume.Nanoseconds())/float64(b.N), "resume-ns/op")
	b.StopTimer()
	if echo != nil {
		r, e := medianDuration(resumes), medianDuration(echoes)
		b.ReportMetric(float64(r.Nanoseconds()), "resume-p50-ns")
		b.ReportMetric(float64(e.Nanoseconds()), "echo-p50-ns")
		b.ReportMetric(float64(r)/float64(e), "resume/echo")
	}
	finish(pause)
	// What the server tokenized per pause (the rollout's own items,
	// its script included) against what it reused from the cache.
	b.ReportMetric(float64(tm.RenderedTokens)/float64(rollouts*pauseSteps), "rendered-tok/pause")
	b.ReportMetric(float64(tm.RenderMicros)/float64(rollouts*pauseSteps), "render-us/pause")
	b.ReportMetric(float64(tm.CachedTokens)/float64(rollouts), "cached-tok/rollout")
	if sizes != nil {
		b.ReportMetric(float64(sizes.bytes.Load())/float64(rollouts*pauseSteps), "journal-bytes/pause")
		b.ReportMetric(float64(sizes.writes.Load())/float64(rollouts*pauseSteps), "journal-writes/pause")
		b.ReportMetric(float64(sizes.snapshotBytes.Load())/float64(rollouts), "snapshot-bytes/rollout")
	}
}

// sizedCheckpoints counts the journal writes and their bytes (heads and
// entries): those that append, and apart, those that begin a journal
// anew with a snapshot (its first write, a compaction).
type sizedCheckpoints struct {
	runtime.Checkpoints
	writes, bytes, snapshotBytes atomic.Int64
}

func (s *sizedCheckpoints) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	n := len(w.Head)
	for _, e := range w.Entries {
		n += len(e)
	}
	if w.Reset {
		s.snapshotBytes.Add(int64(n))
	} else {
		s.writes.Add(1)
		s.bytes.Add(int64(n))
	}
	return s.Checkpoints.Write(ctx, w, ttl)
}

// echoConn is a WebSocket to an echo server (echoHandler).
type echoConn struct {
	c *websocket.Conn
}

// dialEcho starts an echo server in this process and dials it.
func dialEcho(b *testing.B) *echoConn {
	srv := httptest.NewServer(echoHandler())
	b.Cleanup(srv.Close)
	return dialEchoAt(b, wsURL(srv.URL))
}

func dialEchoAt(b *testing.B, url string) *echoConn {
	c, _, err := websocket.Dial(context.Background(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(-1)
	b.Cleanup(func() { c.CloseNow() })
	return &echoConn{c: c}
}

// roundTrip sends a frame as long as frame, and times it until the
// answer of n bytes is read.
func (e *echoConn) roundTrip(b *testing.B, frame []byte, n int) time.Duration {
	msg := bytes.Clone(frame)
	copy(msg, fmt.Sprintf("%-8d", n))
	t0 := time.Now()
	if err := e.c.Write(context.Background(), websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.c.Read(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
