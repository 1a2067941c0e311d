package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/protocol"
)

// This file is FuzzSuspendedSession's model of the protocol: what the client
// knows of each lane and response, and the check of every frame the server
// sends against it. suspend_fuzz_test.go holds the target and its ops.

// fzOwed is an answer a lane owes, in order: a response (create, resume)
// or an error (refusal).
type fzOwed struct {
	kind    string // "create", "resume", "refusal"
	code    string // refusal: the error code, "" for any
	suspend bool   // create
	resp    *fzResp
	desc    string
}

// fzResp is what the client knows of a response.
type fzResp struct {
	id, lane   string
	suspend    bool
	state      string // running, parked, ended, detached, resuming
	gen        int    // the connection it reports to
	nextSeq    int
	pending    []string // calls of the current pause still without output
	doneIndex  int      // the output_index the next output_item.done must have
	doneCalls  map[string]bool
	answered   map[string]bool
	lastPause  []byte
	detachedAt time.Time
	resumed    bool // a resume was accepted: its replay of the pause may come first
	cancelled  bool // response.cancel accepted
	end        string
}

type fzFrame struct {
	binary bool
	data   []byte
}

type fzConn struct {
	c      *wsConn
	mu     sync.Mutex
	frames []fzFrame // guarded by mu
	done   chan struct{}
}

// fzExpect is the direct answer the current op must get: one error with
// one of codes, on lane.
type fzExpect struct {
	lane  string
	codes []string
	got   bool
}

type fzSession struct {
	t     *testing.T
	data  []byte
	i     int
	p     *pipeHarness
	conn  *fzConn
	gen   int
	lanes map[string][]*fzOwed
	resps []*fzResp
	byID  map[string]*fzResp
	want  *fzExpect
	log   []string
	frame time.Time // when the last frame arrived
}

func (f *fzSession) fail(format string, args ...any) {
	f.t.Helper()
	f.t.Fatalf("%s\nops:\n  %s", fmt.Sprintf(format, args...), strings.Join(f.log, "\n  "))
}

func (f *fzSession) b() byte {
	if f.i >= len(f.data) {
		return 0
	}
	v := f.data[f.i]
	f.i++
	return v
}

func (f *fzSession) dial() {
	c := f.p.dial(f.t, "Bearer fuzz")
	fc := &fzConn{c: c, done: make(chan struct{})}
	go func() {
		defer close(fc.done)
		for {
			typ, b, err := c.c.Read(context.Background())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary && c.msgpack() {
				if js, err := protocol.MsgpackToJSON(b); err == nil {
					typ, b = websocket.MessageText, js // the frame as JSON; a bad one stays binary, and fails
				}
			}
			fc.mu.Lock()
			fc.frames = append(fc.frames, fzFrame{typ == websocket.MessageBinary, b})
			fc.mu.Unlock()
		}
	}()
	f.conn = fc
	f.gen++
}

func (f *fzSession) send(desc string, v any) {
	f.t.Helper()
	f.log = append(f.log, desc)
	f.conn.c.send(f.t, v)
}

// expect records the direct answer the op being sent must get.
func (f *fzSession) expect(lane string, codes ...string) {
	f.want = &fzExpect{lane: lane, codes: codes}
}

// owe puts an answer on lane's queue; a resume at its head attaches at once.
func (f *fzSession) owe(lane string, o *fzOwed) {
	f.lanes[lane] = append(f.lanes[lane], o)
	if len(f.lanes[lane]) == 1 {
		f.startHead(lane)
	}
}

// startHead runs when an answer reaches the head of its lane: a resume then
// attaches, unless the window has passed.
func (f *fzSession) startHead(lane string) {
	q := f.lanes[lane]
	if len(q) == 0 || q[0].kind != "resume" {
		return
	}
	r := q[0].resp
	if !time.Now().Before(r.detachedAt.Add(fzResumeWindow)) {
		q[0].kind, q[0].code = "refusal", "response_not_found"
		r.state = "ended"
		return
	}
	r.state, r.gen, r.resumed = "running", f.gen, true
}

// settle lets the server answer, then checks every frame that came.
func (f *fzSession) settle() {
	f.t.Helper()
	synctest.Wait()
	f.conn.mu.Lock()
	frames := f.conn.frames
	f.conn.frames = nil
	f.conn.mu.Unlock()
	if len(frames) > 0 {
		f.frame = time.Now()
	}
	for _, fr := range frames {
		f.handle(fr)
	}
	if f.want != nil && !f.want.got {
		f.fail("no error answered the last op (want %v on lane %q)", f.want.codes, f.want.lane)
	}
	f.want = nil
}

func (f *fzSession) handle(fr fzFrame) {
	f.t.Helper()
	if fr.binary {
		f.fail("binary frame from the server")
	}
	e := decodeEv(f.t, fr.data)
	lane := e.StreamID
	q := f.lanes[lane]
	if e.Type == "error" {
		if e.Error == nil {
			f.fail("error event without error: %s", fr.data)
		}
		if w := f.want; w != nil && !w.got && w.lane == lane {
			if !slices.Contains(w.codes, e.Error.Code) {
				f.fail("got %s, want one of %v", fr.data, w.codes)
			}
			w.got = true
			return
		}
		if len(q) == 0 {
			f.fail("unexpected error on lane %q: %s", lane, fr.data)
		}
		head := q[0]
		if head.resp != nil && head.resp.state != "ended" && head.kind != "refusal" {
			f.fail("error in the middle of response %s (%s): %s", head.resp.id, head.desc, fr.data)
		}
		if head.kind == "refusal" && head.code != "" && e.Error.Code != head.code {
			f.fail("%s answered by %s, want %s", head.desc, fr.data, head.code)
		}
		f.pop(lane)
		return
	}
	if len(q) == 0 {
		f.fail("frame on lane %q with nothing owed: %s", lane, fr.data)
	}
	head := q[0]
	switch {
	case head.kind == "refusal":
		f.fail("%s answered by a response event: %s", head.desc, fr.data)
	case head.resp == nil:
		if e.Type != "response.created" || e.Seq == nil || *e.Seq != 0 {
			f.fail("%s began with %s", head.desc, fr.data)
		}
		r := &fzResp{id: e.Response.ID, lane: lane, suspend: head.suspend, state: "running", gen: f.gen, answered: map[string]bool{}, doneCalls: map[string]bool{}}
		if f.byID[r.id] != nil {
			f.fail("response id %s reused", r.id)
		}
		head.resp = r
		f.resps = append(f.resps, r)
		f.byID[r.id] = r
	}
	r := head.resp
	if e.Response != nil && e.Response.ID != r.id {
		f.fail("frame of %s while %s streams on lane %q", e.Response.ID, r.id, lane)
	}
	if r.resumed {
		// The pending pause comes again first; frames may have followed it
		// (a search of the step finishing during the pause).
		r.resumed = false
		if e.Type == "response.done" && e.Seq != nil && *e.Seq < r.nextSeq {
			if !bytes.Equal(fr.data, r.lastPause) {
				f.fail("resume replayed\n%s\nnot the pause\n%s", fr.data, r.lastPause)
			}
			r.state = "parked"
			return
		}
	}
	if e.Seq == nil || *e.Seq != r.nextSeq {
		f.fail("%s: want sequence_number %d, got %s", r.id, r.nextSeq, fr.data)
	}
	r.nextSeq++
	switch e.Type {
	case "response.output_item.done":
		if e.OutputIndex == nil || *e.OutputIndex != r.doneIndex {
			f.fail("%s: output_item.done out of order, want output_index %d: %s", r.id, r.doneIndex, fr.data)
		}
		r.doneIndex++
		var item struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		json.Unmarshal(e.Item, &item)
		if item.Type == "function_call" {
			r.doneCalls[item.CallID] = true
		}
	case "response.done":
		ra := e.Response.RequiredAction
		if !r.suspend || e.Response.Status != "requires_action" || ra == nil || len(ra.SubmitToolOutputs.ToolCalls) == 0 {
			f.fail("bad pause of %s: %s", r.id, fr.data)
		}
		r.pending = r.pending[:0]
		for _, c := range ra.SubmitToolOutputs.ToolCalls {
			if r.answered[c.CallID] || slices.Contains(r.pending, c.CallID) {
				f.fail("pause asks again for %s: %s", c.CallID, fr.data)
			}
			if !r.doneCalls[c.CallID] {
				f.fail("pause asks for %s before its output_item.done: %s", c.CallID, fr.data)
			}
			r.pending = append(r.pending, c.CallID)
		}
		r.state, r.lastPause = "parked", fr.data
	case "response.in_progress":
		r.state = "running"
	case "response.completed", "response.failed", "response.incomplete", "response.cancelled":
		status := strings.TrimPrefix(e.Type, "response.")
		if e.Response.Status != status {
			f.fail("%s with status %s", e.Type, e.Response.Status)
		}
		if (status == "cancelled") != r.cancelled {
			f.fail("%s ended %s, cancel requested: %v", r.id, status, r.cancelled)
		}
		if status == "failed" && (!r.suspend || e.Response.Error == nil || e.Response.Error.Code != "client_tool_timeout") {
			f.fail("%s failed: %s", r.id, fr.data)
		}
		r.state, r.end = "ended", e.Type
		f.pop(lane)
	}
}

func (f *fzSession) pop(lane string) {
	f.lanes[lane] = f.lanes[lane][1:]
	f.startHead(lane)
}

// current is the response streaming on lane, if any.
func (f *fzSession) current(lane string) *fzResp {
	if q := f.lanes[lane]; len(q) > 0 && q[0].resp != nil && q[0].kind != "refusal" && q[0].resp.state != "ended" {
		return q[0].resp
	}
	return nil
}

// pick chooses among the responses that match.
func (f *fzSession) pick(match func(*fzResp) bool) *fzResp {
	var rs []*fzResp
	for _, r := range f.resps {
		if match(r) {
			rs = append(rs, r)
		}
	}
	n := f.b()
	if len(rs) == 0 {
		return nil
	}
	return rs[int(n)%len(rs)]
}

func (f *fzSession) attached(r *fzResp) bool {
	return r.gen == f.gen && (r.state == "running" || r.state == "parked")
}

func otherLane(lane string) string {
	if lane == "" {
		return "b"
	}
	return ""
}

var fzLanes = [2]string{"", "b"}
