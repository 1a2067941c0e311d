package runtime_test

import (
	"encoding/json"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// TestFork: a suspended rollout parked on a call is forked onto four
// lanes. Each fork is a response of its own (its id, forked_from, its
// sequence numbers from 0), parked on the same call; each is answered with
// a different output and completes with the original's output up to the
// pause, then its own answer. The original goes on as if never forked.
// Refused: forking what is not parked, after an append, onto a lane whose
// response is parked, and an unknown response.
func TestFork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	c := h.dial(t, nil)
	l := newLanes(c)
	id, callID := parkOneCall(t, c, l, "orig")

	forks := []string{"f0", "f1", "f2", "f3"}
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": forks})
	ids := map[string]string{}
	for i, lane := range forks {
		evs := l.next(t, lane)
		created, done := decodeEv(t, evs[0]), decodeEv(t, last(evs))
		if created.Type != "response.created" || done.Type != "response.done" || *created.Seq != 0 {
			t.Fatalf("fork %s began with %s … %s", lane, evs[0], last(evs))
		}
		var forkedFrom struct {
			Response struct {
				ForkedFrom string `json:"forked_from"`
			} `json:"response"`
		}
		json.Unmarshal(evs[0], &forkedFrom)
		if forkedFrom.Response.ForkedFrom != id || created.Response.ID == id {
			t.Fatalf("fork %s: id %s forked_from %q, want a new id forked from %s", lane, created.Response.ID, forkedFrom.Response.ForkedFrom, id)
		}
		fouts := outputsFor(t, last(evs))
		if len(fouts) != 1 || fouts[0].(map[string]any)["call_id"] != callID {
			t.Fatalf("fork %s parked on %v, want the call %s", lane, fouts, callID)
		}
		ids[lane] = created.Response.ID
		c.send(t, appendEv(ids[lane], lane, fco(callID, "variant "+string(rune('A'+i)))))
	}
	for i, lane := range forks {
		evs := l.next(t, lane)
		end := decodeEv(t, last(evs))
		if end.Type != "response.completed" || end.Response.ID != ids[lane] {
			t.Fatalf("fork %s ended with %s", lane, last(evs))
		}
		out := end.Response.Output
		if len(out) < 2 || !strings.Contains(string(out[0]), callID) || !strings.Contains(string(out[len(out)-1]), "variant "+string(rune('A'+i))) {
			t.Fatalf("fork %s's output does not start with the shared call and end with its own answer: %s", lane, out)
		}
		for _, b := range evs {
			if e := decodeEv(t, b); e.Seq == nil {
				t.Fatalf("fork %s: an event without sequence_number: %s", lane, b)
			}
		}
	}

	// The original is still parked, and goes on with its own output.
	c.send(t, appendEv(id, "orig", fco(callID, "the original")))
	end := decodeEv(t, last(l.next(t, "orig")))
	if out := end.Response.Output; end.Type != "response.completed" || !strings.Contains(string(out[len(out)-1]), "the original") {
		t.Fatalf("the original after its forks: %v", end)
	}

	// Refusals.
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"g0"}})
	l.wantError(t, "orig", "response_not_found") // it has ended
	pid, _ := parkOneCall(t, c, l, "p")
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "p", "response_id": pid, "stream_ids": []string{"p"}})
	l.wantError(t, "p", "invalid_value") // its own lane
	parkOneCall(t, c, l, "q")
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "p", "response_id": pid, "stream_ids": []string{"q"}})
	l.wantError(t, "q", "stream_suspended") // a lane whose response is parked
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "p", "response_id": "resp_unknown", "stream_ids": []string{"g1"}})
	l.wantError(t, "p", "response_not_found")
}

// TestForkCleanup: forks cancelled end cancelled; forks left parked when
// their connection drops detach like any suspended rollout, and end when
// nobody resumes them.
func TestForkCleanup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Suspension: runtime.SuspensionOptions{ResumeWindow: 50 * time.Millisecond}})
	c := h.dial(t, nil)
	l := newLanes(c)
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "orig",
		"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
	id := respID(t, last(l.next(t, "orig")))
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"a", "b"}})
	fa := respID(t, last(l.next(t, "a")))
	l.next(t, "b")
	c.send(t, refEv("response.cancel", fa, "a"))
	if e := decodeEv(t, last(l.next(t, "a"))); e.Type != "response.cancelled" {
		t.Fatalf("a cancelled fork ended with %v", e.Type)
	}
	c.drop()
	abandoned := map[string]string{"transport": "ws", "design": "suspend", "state": "fork", "status": "abandoned"}
	waitFor(t, "the parked fork to end after its resume window", func() bool {
		return counter(t, h.metrics.Registry(), "tether_responses_total", abandoned) == 1
	})
	cancelled := map[string]string{"transport": "ws", "design": "suspend", "state": "fork", "status": "cancelled"}
	if n := counter(t, h.metrics.Registry(), "tether_responses_total", cancelled); n != 1 {
		t.Errorf("cancelled forks: %v, want 1", n)
	}
}

// TestForkMemory: a fork costs the same whatever the context it shares.
// 64 forks of a suspended rollout parked with 8k and with 60k tokens of
// context: the prompt, the items and the prefix cache's view of them are
// shared, so a fork holds only its own state (its rollout, its pause's
// frame for a resume), under 12 KiB of live heap at either size. It logs
// the live heap and the time per fork (from the response.fork frame to the
// last fork's pause, over 64).
func TestForkMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures memory: not in -short, not under the race detector (.ci/run runs it without)")
	}
	perFork := map[int]float64{}
	for _, tokens := range []int{8_000, 60_000} {
		one, forks, took := forkMemory(t, tokens)
		for try := 0; forks <= 0 && try < 3; try++ {
			// Memory an earlier test's server let go of meanwhile (a
			// session cut by its slow-client timeout): measure again.
			one, forks, took = forkMemory(t, tokens)
		}
		perFork[tokens] = float64(forks) / protocol.MaxForks
		t.Logf("a rollout parked with %dk tokens of context: %.0f KiB of live heap; %d forks of it: %.0f KiB more (%.1f KiB a fork), %s a fork",
			tokens/1000, float64(one)/1024, protocol.MaxForks, float64(forks)/1024, perFork[tokens]/1024, took)
		if perFork[tokens] > 12<<10 {
			t.Errorf("a fork of a rollout with %dk tokens of context holds %.1f KiB, bound 12", tokens/1000, perFork[tokens]/1024)
		}
	}
	if grew := perFork[60_000] - perFork[8_000]; grew > 2<<10 {
		t.Errorf("a fork grew by %.1f KiB with 52k more tokens of context: forks copy what they should share", grew/1024)
	}
}

// forkMemory parks a rollout with tokens of context, forks it MaxForks
// ways, and returns the live heap the rollout holds, what the forks hold
// together, and the time per fork.
func forkMemory(t testing.TB, tokens int) (one, forks int64, perFork time.Duration) {
	const n = protocol.MaxForks
	h := newHarness(t, runtime.Options{Renderer: renderer(t), Limits: runtime.Limits{MaxLanes: n + 1, MaxInFlight: n + 1, MaxQueued: 4 * n}})
	c := h.dial(t, nil)
	defer c.drop()
	l := newLanes(c)
	// The frame is made before the measure and kept past it: what is
	// measured is what the server holds, not the test's copy being freed.
	frame, _ := json.Marshal(create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": "orig",
		"input": append(history(t, renderer(t), tokens), userMsg(script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})))}))
	defer goruntime.KeepAlive(frame)
	base := settledHeap()
	c.send(t, frame)
	id := respID(t, last(l.next(t, "orig")))
	one = int64(settledHeap()) - int64(base)
	lanes := make([]string, n)
	for i := range lanes {
		lanes[i] = "fork-" + strconv.Itoa(i)
	}
	start := time.Now()
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": lanes})
	for _, lane := range lanes {
		if e := decodeEv(t, last(l.next(t, lane))); e.Type != "response.done" {
			t.Fatalf("fork %s: %v", lane, e.Type)
		}
	}
	perFork = time.Since(start) / n
	clear(l.pending) // the frames this client read: its memory, not the server's
	forks = int64(settledHeap()) - int64(base) - one
	return one, forks, perFork
}

// settledHeap is the live heap after two collections (the first moves what
// sync.Pools hold, encoders' buffers sized by the frames they last wrote,
// to their victim caches; the second frees it), read again until two
// readings agree within 64 KiB: what an earlier test left to wind down
// (a server's sessions ending) is not counted as what this one holds.
func settledHeap() uint64 {
	read := func() uint64 {
		goruntime.GC()
		return liveHeap()
	}
	last := read()
	for range 50 {
		now := read()
		if d := int64(now) - int64(last); d < 64<<10 && d > -64<<10 {
			return now
		}
		last = now
		time.Sleep(20 * time.Millisecond) // what winds down runs on other goroutines
	}
	return last
}

// TestCacheResponses: with Limits.CacheResponses 3, cached-state turns may branch
// from any of their lane's last three responses, from the connection's
// cache (store false); the fourth back is gone, as the second back is with
// the default of 1.
func TestCacheResponses(t *testing.T) {
	t.Parallel()
	for _, keep := range []int{1, 3} {
		h := newHarness(t, runtime.Options{Limits: runtime.Limits{CacheResponses: keep}})
		c := h.dial(t, nil)
		turn := func(prev string) []byte {
			body := map[string]any{"model": "tether-scripted", "store": false, "input": "next"}
			if prev != "" {
				body["previous_response_id"] = prev
			}
			c.send(t, create(body))
			return last(c.untilTerminal(t))
		}
		var ids []string
		for range 4 {
			prev := ""
			if len(ids) > 0 {
				prev = ids[len(ids)-1]
			}
			ids = append(ids, respID(t, turn(prev)))
		}
		// The oldest response still cached, then one before it.
		oldest := ids[len(ids)-keep]
		if b := turn(oldest); eventType(t, b) != "response.completed" {
			t.Errorf("keep %d: a turn from the response %d back: %.200s", keep, keep-1, b)
		}
		gone := ids[len(ids)-keep-1]
		if b := turn(gone); eventType(t, b) != "error" || decodeEv(t, b).Error.Code != "previous_response_not_found" {
			t.Errorf("keep %d: a turn from the response %d back: %.200s", keep, keep, b)
		}
	}
}

// BenchmarkFork: 64 forks of a suspended rollout parked with 60k tokens of
// context, each iteration on a server of its own: the time a fork takes
// (from the response.fork frame to the last fork's pause, over 64) and the
// live heap it holds once parked, against the original's.
func BenchmarkFork(b *testing.B) {
	var one, forks int64
	var took time.Duration
	n := 0
	for b.Loop() {
		o, f, per := forkMemory(b, 60000)
		one, forks, took, n = one+o, forks+f, took+per, n+1
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(n), "ns/fork")
	b.ReportMetric(float64(forks)/float64(n)/protocol.MaxForks/1024, "KiB/fork")
	b.ReportMetric(float64(forks)/float64(one), "64-forks/original")
}

// TestForkWebTransport: on WebTransport, where a stream is a lane without a
// stream_id, response.fork without stream_ids, sent on a new stream, forks
// a rollout parked on another stream of the connection onto it; the fork
// and the original go on apart. stream_ids there, a fork onto the
// original's own stream, and a WebSocket fork without stream_ids are
// refused.
func TestForkWebTransport(t *testing.T) {
	t.Parallel()
	h := newHarnessOn(t, runtime.Options{Renderer: renderer(t)}, wire{webTransport: true})
	c := h.dial(t, nil)
	l := newLanes(c)
	id, callID := parkOneCall(t, c, l, "orig")

	c.send(t, map[string]any{"type": "response.fork", "stream_id": "f0", "response_id": id}) // on a new stream
	evs := l.next(t, "f0")
	created, done := decodeEv(t, evs[0]), decodeEv(t, last(evs))
	if created.Type != "response.created" || done.Type != "response.done" || created.Response.ID == id {
		t.Fatalf("the fork began with %s … %s", evs[0], last(evs))
	}
	fork := created.Response.ID
	c.send(t, appendEv(fork, "f0", fco(callID, "variant A")))
	c.send(t, appendEv(id, "orig", fco(callID, "variant B")))
	for lane, want := range map[string]string{"f0": "variant A", "orig": "variant B"} {
		end := last(l.next(t, lane))
		if e := decodeEv(t, end); e.Type != "response.completed" || !strings.Contains(string(end), want) {
			t.Errorf("%s ended with %s, want %q in it", lane, end, want)
		}
	}

	pid, _ := parkOneCall(t, c, l, "p")
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "p", "response_id": pid})
	l.wantError(t, "p", "stream_suspended")
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "q", "response_id": pid, "stream_ids": []string{"r"}})
	l.wantError(t, "q", "invalid_stream_id")
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "q", "response_id": "resp_unknown"})
	l.wantError(t, "q", "response_not_found")

	ws := newHarness(t, runtime.Options{}).dial(t, nil)
	ws.send(t, map[string]any{"type": "response.fork", "response_id": pid})
	ws.wantError(t, "invalid_value")
}

// parkOneCall starts a suspended rollout on lane that calls read_file once
// and returns its id and the call's call_id once it has paused on it.
func parkOneCall(t *testing.T, c *wsConn, l *lanes, lane string) (id, callID string) {
	t.Helper()
	c.send(t, create(map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "stream_id": lane,
		"input": script([][]dcall{{{"read_file", `{"path":"a.go"}`}}})}))
	pause := last(l.next(t, lane))
	return respID(t, pause), outputsFor(t, pause)[0].(map[string]any)["call_id"].(string)
}
