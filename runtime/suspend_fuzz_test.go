package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// fakeTimeSearcher takes 30ms for queries that mention "slow": in a bubble,
// fake time, and searches of one step end out of order.
type fakeTimeSearcher struct{ stubSearcher }

func (s fakeTimeSearcher) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	if strings.Contains(query, "slow") {
		t := time.NewTimer(30 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.stubSearcher.Search(ctx, query, limit)
}

// FuzzSuspendedSession drives one client against a server with a sequence of
// frames derived from the input: creates (suspended or not, paced or not, on
// two lanes), appends (valid, partial, steering, invalid), cancels, resumes,
// garbage, reconnections and pauses of fake time. After each frame the
// bubble settles and a model of the protocol checks the frames that came
// back: each create is answered by exactly one response (created ... one
// terminal event, gapless sequence numbers across pauses and resumes) or one
// error, in its lane's order; each invalid append, cancel or resume by one
// error with the expected code; a valid append by no error and progress.
// At the end every pause is answered until nothing is owed (a session that
// stops answering fails the run), and the bubble must end with no goroutine
// left.
func FuzzSuspendedSession(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) { runFuzzSession(t, data) })
	})
}

// Ops, by their first byte modulo 10.
const (
	fzCreate       = 0 // and 1: lane, suspend, model, steps, calls per step, previous_response_id
	fzAppend       = 2 // and 3: response, partial, steering
	fzBadAppend    = 4 // variant, response
	fzCancel       = 5 // variant, response
	fzResume       = 6 // variant, response
	fzGarbage      = 7 // variant, lane
	fzSleep        = 8 // tens of milliseconds
	fzReconnect    = 9
	fzMaxOps       = 96
	fzSuspendLimit = 3*time.Second + 5*time.Millisecond // off the 10ms grid the ops run on
	fzResumeWindow = 5*time.Second + 5*time.Millisecond
)

var fuzzSeeds = [][]byte{
	// A suspended two-step rollout on the default lane, answered step by
	// step, the first time with a steering message; then a cached-state
	// create.
	{fzCreate, 0, 1, 1, 2, 1, 0, 1, fzAppend, 0, 0, 0, fzAppend, 0, 0, 1, fzCreate, 0, 0, 1, 1, 0, 1},
	// Parked, partial append, duplicate, wrong lane, unknown call, cancel.
	{fzCreate, 1, 1, 1, 2, 1, 1, 1, fzAppend, 0, 1, 1, fzBadAppend, 2, 0, fzBadAppend, 3, 0, fzBadAppend, 1, 0,
		fzCancel, 2, 0, fzCancel, 1, 0, fzCancel, 3, 0},
	// Paced responses on both lanes, a create queued behind one, garbage,
	// an append to a running response, a cancel mid-stream, time passing.
	{fzCreate, 0, 0, 0, 0, 1, fzCreate, 1, 1, 0, 1, 1, 1, fzCreate, 0, 0, 1, 0, 1,
		fzGarbage, 0, 0, fzGarbage, 3, 1, fzGarbage, 4, 0, fzGarbage, 2, 0, fzBadAppend, 4, 0,
		fzSleep, 5, fzCancel, 1, 0, fzSleep, 100, fzSleep, 100},
	// Disconnect while parked and while streaming; resume one, let the
	// other's window pass; resume of an unknown and of an attached response.
	{fzCreate, 0, 1, 1, 2, 1, 1, 1, fzCreate, 1, 1, 0, 2, 0, 0, 1, fzSleep, 3, fzReconnect,
		fzResume, 1, 0, 1, fzResume, 0, 0, fzResume, 2, 0, fzAppend, 0, 0, 1, fzSleep, 255, fzSleep, 255,
		fzResume, 1, 0, 1, fzAppend, 0, 0, 1},
	// A parked rollout times out; the lane serves on.
	{fzCreate, 0, 1, 1, 1, 0, 1, fzSleep, 200, fzSleep, 200, fzCreate, 0, 1, 1, 1, 0, 1, fzAppend, 0, 0, 1},
	// A create on a parked lane; malformed appends to the parked response;
	// an unknown event type, answered in lane order, after the rollout.
	{fzCreate, 0, 1, 1, 2, 0, 0, 1, fzCreate, 0, 1, 1, 0, 1, fzGarbage, 4, 0, fzGarbage, 7, 0, 0, fzGarbage, 1, 0,
		fzAppend, 0, 0, 1, fzAppend, 0, 0, 1},
}

func runFuzzSession(t *testing.T, data []byte) {
	r := renderer(t)
	f := &fzSession{t: t, data: data, lanes: map[string][]*fzOwed{}, byID: map[string]*fzResp{}}
	f.p = newPipeHarness(t, runtime.Options{
		Renderer:    r,
		HostedTools: []runtime.Tool{websearch.New(fakeTimeSearcher{})},
		Models: map[string]runtime.Sampler{
			"tether-scripted": sampler.NewScripted(r, sampler.Timing{}),
			"slow":            sampler.NewScripted(r, sampler.Timing{TPS: 50}),
		},
		Suspension: runtime.SuspensionOptions{Timeout: fzSuspendLimit, ResumeWindow: fzResumeWindow},
	})
	f.dial()
	for ops := 0; f.i < len(f.data) && ops < fzMaxOps; ops++ {
		f.op()
	}
	f.drain()
	f.conn.c.c.CloseNow()
	<-f.conn.done
	// Let detached rollouts reach the end of their window.
	time.Sleep(fzResumeWindow + time.Second)
	synctest.Wait()
	if gs := serverGoroutines(t); len(gs) > 0 {
		f.fail("%d server goroutines remain with no connection and no rollout:\n%s", len(gs), strings.Join(gs, "\n\n"))
	}
}

func (f *fzSession) op() {
	f.t.Helper()
	switch op := f.b() % 10; op {
	case fzCreate, fzCreate + 1:
		f.create()
	case fzAppend, fzAppend + 1:
		f.goodAppend()
	case fzBadAppend:
		f.badAppend()
	case fzCancel:
		f.cancel()
	case fzResume:
		f.resume()
	case fzGarbage:
		f.garbage()
	case fzSleep:
		d := time.Duration(f.b()) * 10 * time.Millisecond
		f.log = append(f.log, fmt.Sprintf("sleep %v", d))
		time.Sleep(d)
	case fzReconnect:
		f.reconnect()
	}
	f.settle()
}

func (f *fzSession) create() {
	lane := fzLanes[f.b()%2]
	suspend := f.b()%2 == 1
	model := "tether-scripted"
	if f.b()%3 == 0 {
		model = "slow"
	}
	var steps [][]dcall
	for i := range int(f.b() % 3) {
		step := []dcall{{"read_file", fmt.Sprintf(`{"step":%d}`, i)}}
		switch bits := f.b(); {
		case bits&1 != 0:
			step = append(step, dcall{"grep", fmt.Sprintf(`{"step":%d}`, i)})
		case bits&2 != 0: // a slow search before the client call
			step = append([]dcall{{"web_search", fmt.Sprintf(`{"query":"slow %d"}`, i)}}, step...)
		case bits&4 != 0:
			step = append(step, dcall{"web_search", fmt.Sprintf(`{"query":"fast %d"}`, i)})
		}
		steps = append(steps, step)
	}
	input := "hello there"
	if len(steps) > 0 {
		input = script(steps)
	}
	body := map[string]any{"model": model, "store": false, "suspend": suspend, "input": input, "tools": []any{webSearchTool}}
	if lane != "" {
		body["stream_id"] = lane
	}
	prev := ""
	if f.b()%4 == 0 {
		if r := f.pick(func(r *fzResp) bool { return true }); r != nil {
			prev = r.id
		} else {
			prev = "resp_unknown"
		}
		body["previous_response_id"] = prev
	}
	desc := fmt.Sprintf("create lane=%q suspend=%v model=%s steps=%d prev=%s", lane, suspend, model, len(steps), prev)
	if cur := f.current(lane); cur != nil && cur.suspend && cur.state == "parked" {
		f.expect(lane, "stream_suspended")
	} else {
		f.owe(lane, &fzOwed{kind: "create", suspend: suspend, desc: desc})
	}
	f.send(desc, create(body))
}

func (f *fzSession) goodAppend() {
	r := f.pick(func(r *fzResp) bool { return f.attached(r) && r.state == "parked" && len(r.pending) > 0 })
	partial, steer := f.b()%2 == 1, f.b()%4 == 0
	if r == nil {
		f.expect("", "response_not_found")
		f.send("append to nothing", appendEv("resp_none", "", fco("call_none", "x")))
		return
	}
	calls := r.pending
	if partial && len(calls) > 1 {
		calls = calls[:1]
	}
	var input []any
	for _, id := range calls {
		input = append(input, fco(id, "output of "+id))
		r.answered[id] = true
	}
	r.pending = slices.Clone(r.pending[len(calls):])
	if steer {
		input = append(input, userMsg("Keep it short."))
	}
	seq := r.nextSeq
	f.send(fmt.Sprintf("append %s %d of %d outputs steer=%v", r.id, len(calls), len(calls)+len(r.pending), steer), appendEv(r.id, r.lane, input...))
	if len(r.pending) > 0 {
		return
	}
	// No direct answer, but the rollout moves on at once.
	synctest.Wait()
	f.conn.mu.Lock()
	n := len(f.conn.frames)
	f.conn.mu.Unlock()
	if n == 0 {
		f.fail("append of the last outputs of %s (seq %d): no progress", r.id, seq)
	}
}

func (f *fzSession) badAppend() {
	variant := f.b() % 6
	var r *fzResp
	switch variant {
	case 1, 3:
		r = f.pick(func(r *fzResp) bool { return f.attached(r) && r.state == "parked" })
	case 2:
		r = f.pick(func(r *fzResp) bool { return f.attached(r) && r.state == "parked" && len(r.answered) > 0 })
	case 4:
		r = f.pick(func(r *fzResp) bool { return f.attached(r) && r.state == "running" })
	case 5:
		r = f.pick(func(r *fzResp) bool { return !f.attached(r) })
	default:
		f.b()
	}
	if r == nil {
		lane := fzLanes[variant%2]
		f.expect(lane, "response_not_found")
		f.send("append to an unknown response", appendEv(fmt.Sprintf("resp_unknown%d", variant), lane, fco("call_x", "x")))
		return
	}
	switch variant {
	case 1:
		f.expect(r.lane, "tool_call_not_found")
		f.send("append of an unknown call to "+r.id, appendEv(r.id, r.lane, fco("call_unknown", "x")))
	case 2:
		var done string
		for id := range r.answered {
			if done == "" || id < done {
				done = id
			}
		}
		f.expect(r.lane, "duplicate_tool_output")
		f.send("append of an answered call to "+r.id, appendEv(r.id, r.lane, fco(done, "again")))
	case 3:
		f.expect(otherLane(r.lane), "stream_id_mismatch")
		f.send("append on the wrong lane to "+r.id, appendEv(r.id, otherLane(r.lane), fco("call_x", "x")))
	case 4:
		f.expect(r.lane, "response_not_suspended")
		f.send("append to running "+r.id, appendEv(r.id, r.lane, fco("call_x", "x")))
	case 5:
		f.expect(r.lane, "response_not_found")
		f.send("append to "+r.state+" "+r.id, appendEv(r.id, r.lane, fco("call_x", "x")))
	}
}

func (f *fzSession) cancel() {
	variant := f.b() % 4
	var r *fzResp
	switch variant {
	case 1, 2:
		r = f.pick(f.attached)
	case 3:
		r = f.pick(func(r *fzResp) bool { return !f.attached(r) })
	default:
		f.b()
	}
	switch {
	case r == nil:
		f.expect("", "response_not_found")
		f.send("cancel of an unknown response", refEv("response.cancel", "resp_unknown", ""))
	case variant == 1:
		r.cancelled = true
		f.send("cancel "+r.id, refEv("response.cancel", r.id, r.lane))
		synctest.Wait()
		f.settleEnded(r, "response.cancelled")
	case variant == 2:
		f.expect(otherLane(r.lane), "stream_id_mismatch")
		f.send("cancel on the wrong lane "+r.id, refEv("response.cancel", r.id, otherLane(r.lane)))
	default:
		f.expect(r.lane, "response_not_found")
		f.send("cancel of "+r.state+" "+r.id, refEv("response.cancel", r.id, r.lane))
	}
}

// settleEnded checks that r ended as it should, at once.
func (f *fzSession) settleEnded(r *fzResp, end string) {
	f.settle()
	if r.end != end {
		f.fail("%s ended %q, want %s at once", r.id, r.end, end)
	}
}

func (f *fzSession) resume() {
	variant := f.b() % 3
	var r *fzResp
	switch variant {
	case 1:
		r = f.pick(func(r *fzResp) bool { return r.state == "detached" })
	case 2:
		r = f.pick(f.attached)
	default:
		f.b()
	}
	switch {
	case r == nil:
		f.expect("b", "response_not_found")
		f.send("resume of an unknown response", refEv("response.resume", "resp_unknown", "b"))
	case variant == 2:
		f.expect(r.lane, "response_not_found")
		f.send("resume of attached "+r.id, refEv("response.resume", r.id, r.lane))
	case !time.Now().Before(r.detachedAt.Add(fzResumeWindow)):
		r.state = "ended"
		f.expect(r.lane, "response_not_found")
		f.send("resume after the window "+r.id, refEv("response.resume", r.id, r.lane))
	case f.b()%4 == 0:
		f.expect(otherLane(r.lane), "stream_id_mismatch")
		f.send("resume on the wrong lane "+r.id, refEv("response.resume", r.id, otherLane(r.lane)))
	default:
		r.state = "resuming"
		f.owe(r.lane, &fzOwed{kind: "resume", resp: r, desc: "resume " + r.id})
		f.send("resume "+r.id, refEv("response.resume", r.id, r.lane))
	}
}

func (f *fzSession) garbage() {
	variant, lane := f.b()%8, fzLanes[f.b()%2]
	sid := ""
	if lane != "" {
		sid = `,"stream_id":"` + lane + `"`
	}
	refusal := func(code string) {
		f.owe(lane, &fzOwed{kind: "refusal", code: code, desc: fmt.Sprintf("garbage %d", variant)})
	}
	var frame string
	switch variant {
	case 0:
		lane = ""
		refusal("invalid_json")
		frame = `{"type":`
	case 1:
		refusal("unknown_event_type")
		frame = `{"type":"response.frobnicate"` + sid + `}`
	case 2:
		f.expect("", binaryFrameCode())
		f.log = append(f.log, "binary frame")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.conn.c.c.Write(ctx, websocket.MessageBinary, []byte{0x81, 0xa4}); err != nil {
			f.fail("write: %v", err)
		}
		return
	case 3:
		refusal("missing_required_parameter")
		frame = `{"input":"hi"` + sid + `}`
	case 4:
		f.expect(lane, "missing_required_parameter")
		frame = `{"type":"response.append"` + sid + `,"input":[]}`
	case 5:
		refusal("invalid_type")
		frame = `{"type":"response.create"` + sid + `,"model":5,"input":"hi"}`
	case 6:
		f.log = append(f.log, "response.processed")
		f.conn.c.send(f.t, map[string]any{"type": "response.processed", "response_id": "resp_x"})
		return
	case 7: // a malformed item, to a parked response if there is one
		id, code := "resp_x", "response_not_found"
		if r := f.pick(func(r *fzResp) bool { return f.attached(r) && r.state == "parked" && r.lane == lane }); r != nil {
			id, code = r.id, "missing_required_parameter"
		}
		f.expect(lane, code)
		frame = `{"type":"response.append","response_id":"` + id + `"` + sid + `,"input":[{"type":"function_call_output","output":"x"}]}`
	}
	f.send(fmt.Sprintf("garbage %s", frame), []byte(frame))
}

func (f *fzSession) reconnect() {
	f.log = append(f.log, "reconnect")
	f.conn.c.c.CloseNow()
	<-f.conn.done
	synctest.Wait()
	now := time.Now()
	for _, r := range f.resps {
		switch {
		case r.state == "resuming":
			r.state = "detached" // its resume never ran; the window goes on
		case r.gen != f.gen || r.state == "ended" || r.state == "detached":
		case r.suspend:
			r.state, r.detachedAt = "detached", now
		default:
			r.state = "ended" // a cached-state response dies with its connection
		}
	}
	f.lanes = map[string][]*fzOwed{}
	f.dial()
}

// drain answers every pause and lets time pass until nothing is owed.
func (f *fzSession) drain() {
	f.log = append(f.log, "-- drain")
	f.frame = time.Now()
	for {
		owed := 0
		for _, q := range f.lanes {
			owed += len(q)
		}
		if owed == 0 {
			return
		}
		if time.Since(f.frame) > 2*time.Minute {
			var lines []string
			for lane, q := range f.lanes {
				for _, o := range q {
					lines = append(lines, fmt.Sprintf("lane %q: %s", lane, o.desc))
				}
			}
			f.fail("no frame for 2 minutes while answers are owed:\n%s", strings.Join(lines, "\n"))
		}
		answered := false
		for _, r := range f.resps {
			if f.attached(r) && r.state == "parked" && len(r.pending) > 0 {
				var input []any
				for _, id := range r.pending {
					input = append(input, fco(id, "output of "+id))
					r.answered[id] = true
				}
				r.pending = nil
				f.send("drain: append to "+r.id, appendEv(r.id, r.lane, input...))
				answered = true
			}
		}
		if !answered {
			time.Sleep(time.Second)
		}
		f.settle()
	}
}
