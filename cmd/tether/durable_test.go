package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/internal/ablate"
	"github.com/tether-run/tether/internal/redistest"
)

// serveProcess is a tether serve process the test may kill, stop and
// continue, and whose log it may wait on.
type serveProcess struct {
	base string
	cmd  *exec.Cmd
	logs chan string // its log's lines, as it writes them
}

func startServeProcess(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(tetherBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &serveProcess{cmd: cmd, logs: make(chan string, 4096)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case p.logs <- sc.Text():
			default: // nobody waits on this line
			}
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("tether serve %v: %q %v", args, line, err)
	}
	p.base = base
	return p
}

// waitLog waits for a line of the process's log that contains s.
func (p *serveProcess) waitLog(ctx context.Context, t *testing.T, s string) {
	t.Helper()
	for {
		select {
		case line := <-p.logs:
			if strings.Contains(line, s) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %q in the server's log", s)
		}
	}
}

// durableScript is a rollout of three steps, each parked on client calls.
const durableScript = "call: read_file {\"path\":\"a.go\"}\ncall: grep {\"pattern\":\"x\"} | list_dir {}\ncall: run_tests {}"

// wsRollout is one suspended rollout driven over raw WebSocket frames.
type wsRollout struct {
	id      string
	events  []map[string]any
	raw     [][]byte
	pending [][]byte // frames read already, to take before reading on
}

func dialWS(ctx context.Context, t *testing.T, base string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/v1/responses", &websocket.DialOptions{
		HTTPHeader: map[string][]string{"Authorization": {"Bearer durable"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	return c
}

func sendJSON(ctx context.Context, t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// untilPause reads until a pause or the end, appending to ro.
func (ro *wsRollout) untilPause(ctx context.Context, t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	return ro.readUntil(ctx, t, c, "response.done", "response.completed", "response.failed", "response.cancelled", "response.incomplete")
}

// readUntil reads until an event of one of types, appending to ro, and
// returns it; an error event fails the test.
func (ro *wsRollout) readUntil(ctx context.Context, t *testing.T, c *websocket.Conn, types ...string) map[string]any {
	t.Helper()
	for {
		var b []byte
		if len(ro.pending) > 0 {
			b, ro.pending = ro.pending[0], ro.pending[1:]
		} else {
			var err error
			if _, b, err = c.Read(ctx); err != nil {
				t.Fatalf("rollout %s: %v", ro.id, err)
			}
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		ro.events, ro.raw = append(ro.events, ev), append(ro.raw, b)
		switch ev["type"] {
		case "error":
			t.Fatalf("rollout %s: %s", ro.id, b)
		case "response.created":
			ro.id = ev["response"].(map[string]any)["id"].(string)
		}
		if slices.Contains(types, ev["type"].(string)) {
			return ev
		}
	}
}

// outputs answers every call a pause lists.
func outputs(pause map[string]any) []any {
	var outs []any
	calls := pause["response"].(map[string]any)["required_action"].(map[string]any)["submit_tool_outputs"].(map[string]any)["tool_calls"].([]any)
	for _, c := range calls {
		call := c.(map[string]any)
		outs = append(outs, map[string]any{"type": "function_call_output", "call_id": call["call_id"],
			"output": fmt.Sprintf("%s says ok", call["name"])})
	}
	return outs
}

func seqOf(ev map[string]any) int { return int(ev["sequence_number"].(float64)) }

// TestDurableKill: rollouts on server A, which is killed (SIGKILL), are
// each resumed on server B, which shares A's Redis: each completes with the
// same output as the same rollout never interrupted, and every event
// reaches its client exactly once (the pending pause, which a resume
// repeats, aside). Parked: 200 rollouts parked on their second step.
// Mid-step: 20 rollouts killed in their third step, after the append that
// answered the second pause was accepted (each client has seen the step
// begin; A's model is still reading the large output appended, at 1,000
// prompt tokens a second), which B runs again. A's leases (--lease-ttl
// 2s) live on after the kill: B refuses each resume
// (response_owned_elsewhere) until they run out, and the client tries
// again, as the client kit does. Real processes, a real redis-server.
func TestDurableKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two tether serve processes and a redis-server: not in -short")
	}
	t.Parallel()
	// A large tool output: some 20,000 tokens, 20 s of reading at 1,000 a second.
	large := strings.Repeat("the parser reads a token and looks one ahead; ", 2000)
	for _, tc := range []struct {
		name    string
		n       int
		aArgs   []string
		midStep bool
	}{
		{name: "parked", n: 200},
		{name: "mid-step", n: 20, aArgs: []string{"--prefill-rate", "1000"}, midStep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redis := redistest.Start(t)
			a := startServeProcess(t, append([]string{"--store", redis.URL(), "--lease-ttl", killLease.String()}, tc.aArgs...)...)
			b := startServeProcess(t, "--store", redis.URL(), "--lease-ttl", killLease.String())
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			create := map[string]any{"type": "response.create", "model": "tether-scripted", "suspend": true, "store": false, "input": durableScript}
			answer := func(ro *wsRollout, c *websocket.Conn, pause map[string]any, step int) {
				outs := outputs(pause)
				if tc.midStep && step == 2 {
					outs[0].(map[string]any)["output"] = large
				}
				sendJSON(ctx, t, c, map[string]any{"type": "response.append", "response_id": ro.id, "input": outs})
			}

			// The same rollout, never interrupted.
			var want wsRollout
			{
				c := dialWS(ctx, t, b.base)
				sendJSON(ctx, t, c, create)
				step := 1
				for ev := want.untilPause(ctx, t, c); ev["type"] == "response.done"; ev = want.untilPause(ctx, t, c) {
					answer(&want, c, ev, step)
					step++
				}
				c.CloseNow()
			}

			ros := make([]*wsRollout, tc.n)
			for i := range ros {
				ro := &wsRollout{}
				c := dialWS(ctx, t, a.base)
				defer c.CloseNow()
				sendJSON(ctx, t, c, create)
				answer(ro, c, ro.untilPause(ctx, t, c), 1)
				pause := ro.untilPause(ctx, t, c) // parked on its second step
				if tc.midStep {
					answer(ro, c, pause, 2)
					ro.readUntil(ctx, t, c, "response.in_progress") // the third step begins: its start is in the store
				}
				ros[i] = ro
			}
			if err := a.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			a.cmd.Wait()

			killed := time.Now()
			refused := 0
			for _, ro := range ros {
				seen := len(ro.raw)
				c, first, n := resumeOnceFree(ctx, t, b.base, ro.id, seqOf(ro.events[seen-1]))
				ro.pending, refused = [][]byte{first}, refused+n
				pause := ro.untilPause(ctx, t, c)
				step := 3
				if !tc.midStep {
					if pending := ro.raw[seen-1]; !bytes.Equal(ro.raw[len(ro.raw)-1], pending) {
						t.Fatalf("rollout %s: B's resume sent %s, want the pending pause A sent", ro.id, ro.raw[len(ro.raw)-1])
					}
					// The repeated pause aside, the events are one stream.
					ro.events, ro.raw = ro.events[:seen], ro.raw[:seen]
					step = 2
				}
				for ev := pause; ev["type"] == "response.done"; ev = ro.untilPause(ctx, t, c) {
					answer(ro, c, ev, step)
					step++
				}
				c.CloseNow()
				for i, ev := range ro.events {
					if seqOf(ev) != i {
						var types []string
						for _, e := range ro.events {
							types = append(types, fmt.Sprintf("%v:%v", e["sequence_number"], e["type"]))
						}
						t.Fatalf("rollout %s: event %d has sequence_number %d: %.300s\n%v", ro.id, i, seqOf(ev), ro.raw[i], types)
					}
				}
				if got, want := endSummary(ro.events[len(ro.events)-1]), endSummary(want.events[len(want.events)-1]); got != want {
					t.Fatalf("rollout %s ended\n%s\nwant, as never interrupted,\n%s", ro.id, got, want)
				}
			}
			t.Logf("%d rollouts resumed on B, %v after the kill; %d resumes refused while A's leases lived", tc.n, time.Since(killed).Round(time.Millisecond), refused)
		})
	}
}

// killLease is the lease of the servers the crash tests kill or stop: a
// resume elsewhere waits this long at most.
const killLease = 2 * time.Second

// resumeOnceFree resumes rollout id after seq on the server at base, on a
// new connection, until no other server's lease refuses it
// (response_owned_elsewhere: tried again a tenth of killLease later),
// and returns the connection, the first frame it read, and how many times
// it was refused.
func resumeOnceFree(ctx context.Context, t *testing.T, base, id string, seq int) (*websocket.Conn, []byte, int) {
	t.Helper()
	for refused := 0; ; refused++ {
		c := dialWS(ctx, t, base)
		sendJSON(ctx, t, c, map[string]any{"type": "response.resume", "response_id": id, "sequence_number": seq})
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("resume %s: %v", id, err)
		}
		if !bytes.Contains(b, []byte(`"response_owned_elsewhere"`)) {
			return c, b, refused
		}
		c.CloseNow()
		select {
		case <-time.After(killLease / 10):
		case <-ctx.Done():
			t.Fatalf("resume %s: still refused after %d tries", id, refused)
		}
	}
}

// endSummary is what two runs of one rollout share: its status, its items'
// types, calls and text, and its output tokens (ids differ).
func endSummary(end map[string]any) string {
	resp := end["response"].(map[string]any)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v\n", resp["status"], resp["usage"].(map[string]any)["output_tokens"])
	for _, it := range resp["output"].([]any) {
		item := it.(map[string]any)
		fmt.Fprintf(&b, "%s %v %v", item["type"], item["name"], item["arguments"])
		if content, ok := item["content"].([]any); ok {
			for _, p := range content {
				fmt.Fprintf(&b, " %q", p.(map[string]any)["text"])
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// leasedPair is two tether serve processes on rd whose leases last
// killLease: A through its port, B through its unix socket.
func leasedPair(t *testing.T, rd *redistest.Server) (a, b *serveProcess) {
	t.Helper()
	return startServeProcess(t, "--store", rd.URL(), "--lease-ttl", killLease.String()),
		startServeProcess(t, "--store", rd.UnixURL(), "--lease-ttl", killLease.String())
}

// parkedOn creates a suspended rollout of durableScript on p, into ro,
// and returns its connection, which the test's end closes, parked at the
// first pause, and that pause.
func parkedOn(ctx context.Context, t *testing.T, p *serveProcess, ro *wsRollout) (*websocket.Conn, map[string]any) {
	t.Helper()
	c := dialWS(ctx, t, p.base)
	t.Cleanup(func() { c.CloseNow() })
	sendJSON(ctx, t, c, map[string]any{"type": "response.create", "model": "tether-scripted", "suspend": true, "store": false, "input": durableScript})
	return c, ro.untilPause(ctx, t, c)
}

// TestDurableLiveOwner: while client 1 is attached to server A, parked
// on its rollout's calls (A's lease is live), client 2, with the same key,
// resumes the rollout on server B and is refused (response_owned_elsewhere,
// 409), as is an append of it there; client 1 runs the rollout to its end
// on A, one sequence, one terminal event. Real processes, a real
// redis-server.
func TestDurableLiveOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two tether serve processes and a redis-server: not in -short")
	}
	t.Parallel()
	rd := redistest.Start(t)
	a, b := leasedPair(t, rd)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var onA wsRollout
	c1, pause := parkedOn(ctx, t, a, &onA)
	time.Sleep(2 * killLease) // A renews its lease meanwhile

	c2 := dialWS(ctx, t, b.base)
	defer c2.CloseNow()
	for _, ev := range []map[string]any{
		{"type": "response.resume", "response_id": onA.id, "sequence_number": seqOf(pause)},
		{"type": "response.append", "response_id": onA.id, "input": outputs(pause)},
	} {
		sendJSON(ctx, t, c2, ev)
		_, f, err := c2.Read(ctx)
		if err != nil || !bytes.Contains(f, []byte(`"response_owned_elsewhere"`)) || !bytes.Contains(f, []byte(`"status":409`)) {
			t.Fatalf("%s on B while A's client is attached: %s %v, want 409 response_owned_elsewhere", ev["type"], f, err)
		}
	}

	for ev := pause; ev["type"] == "response.done"; ev = onA.untilPause(ctx, t, c1) {
		sendJSON(ctx, t, c1, map[string]any{"type": "response.append", "response_id": onA.id, "input": outputs(ev)})
	}
	checkOneSequence(t, onA.events)
	if end := onA.events[len(onA.events)-1]; end["type"] != "response.completed" {
		t.Fatalf("on A the rollout ended with %v", end["type"])
	}
}

// TestDurableFencing: server A is stopped (SIGSTOP) while its client's
// rollout is parked, and its client appends to it there meanwhile (A does
// not answer). Client 2 resumes it on server B, refused while A's lease
// lives, then taken over once it has run out, and runs it to its end.
// Continued (SIGCONT), A tells client 1 at once, with
// response_owned_elsewhere and a close 1012, and never a terminal event,
// and writes nothing more of the rollout to Redis; client 1, resumed on B
// with the last sequence_number it saw, gets what client 2 got after it,
// byte for byte: one response, one terminal event, one sequence. Real
// processes, a real redis-server.
func TestDurableFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two tether serve processes and a redis-server: not in -short")
	}
	t.Parallel()
	rd := redistest.Start(t)
	a, b := leasedPair(t, rd)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var onA wsRollout
	c1, pause := parkedOn(ctx, t, a, &onA)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Stopped once waitpid says so (the signal is only queued by then).
	var status syscall.WaitStatus
	if _, err := syscall.Wait4(a.cmd.Process.Pid, &status, syscall.WUNTRACED, nil); err != nil || !status.Stopped() {
		t.Fatalf("A did not stop: %v %v", status, err)
	}
	stopped := time.Now()
	sendJSON(ctx, t, c1, map[string]any{"type": "response.append", "response_id": onA.id, "input": outputs(pause)})

	// Client 2 takes it over on B once A's lease has run out.
	onB := wsRollout{id: onA.id}
	c2, first, refused := resumeOnceFree(ctx, t, b.base, onA.id, seqOf(pause))
	defer c2.CloseNow()
	t.Logf("B took the rollout over %v after A stopped, refused %d times before", time.Since(stopped).Round(time.Millisecond), refused)
	if refused == 0 {
		t.Errorf("B took the rollout over at once, while A's lease (%v) was live", killLease)
	}
	onB.pending = [][]byte{first}
	for ev := onB.untilPause(ctx, t, c2); ev["type"] == "response.done"; ev = onB.untilPause(ctx, t, c2) {
		sendJSON(ctx, t, c2, map[string]any{"type": "response.append", "response_id": onA.id, "input": outputs(ev)})
	}
	if end := onB.events[len(onB.events)-1]; end["type"] != "response.completed" {
		t.Fatalf("on B the rollout ended with %v", end["type"])
	}

	// A, continued, tells client 1 and closes: nothing else comes.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	_, f, err := c1.Read(ctx)
	if err != nil || !bytes.Contains(f, []byte(`"type":"error"`)) || !bytes.Contains(f, []byte(`"response_owned_elsewhere"`)) {
		t.Fatalf("A, continued, sent its client %s (%v), want an error response_owned_elsewhere", f, err)
	}
	told := time.Since(woke)
	if _, f, err := c1.Read(ctx); websocket.CloseStatus(err) != websocket.StatusServiceRestart {
		t.Fatalf("then A sent %s (%v), want a close 1012", f, err)
	}
	t.Logf("A told its client %v after it was continued", told.Round(time.Millisecond))

	// Client 1 resumes on B, where the rollout is. What it gets is what
	// client 2 got under the same numbers, byte for byte, in order, the
	// terminal event last: no number stands for two events. (B keeps the
	// frames since the last append, client 2's, which proved the pauses
	// before it seen: client 1, with the same key, gets those.)
	seen := len(onA.raw)
	c3, first, _ := resumeOnceFree(ctx, t, b.base, onA.id, seqOf(pause))
	defer c3.CloseNow()
	onA.pending = [][]byte{first}
	onA.untilPause(ctx, t, c3)
	bySeq := map[int][]byte{}
	for i, ev := range onB.events {
		bySeq[seqOf(ev)] = onB.raw[i]
	}
	for i, ev := range onA.events[seen:] {
		if seqOf(ev) <= seqOf(onA.events[seen+i-1]) {
			t.Fatalf("client 1 got event %d after event %d", seqOf(ev), seqOf(onA.events[seen+i-1]))
		}
		if f := onA.raw[seen+i]; !bytes.Equal(f, bySeq[seqOf(ev)]) {
			t.Fatalf("event %d: client 1 got\n%s\nclient 2\n%s", seqOf(ev), f, bySeq[seqOf(ev)])
		}
	}
	if end := onA.events[len(onA.events)-1]; end["type"] != "response.completed" || !bytes.Equal(onA.raw[len(onA.raw)-1], onB.raw[len(onB.raw)-1]) {
		t.Fatalf("client 1's last event is %v, want client 2's response.completed", end["type"])
	}
	for _, ev := range onA.events[:len(onA.events)-1] {
		if typ := ev["type"]; typ == "response.completed" || typ == "response.failed" || typ == "response.cancelled" || typ == "response.incomplete" {
			t.Fatalf("client 1 got a terminal event (%v) before the last", typ)
		}
	}

	// In Redis, the rollout's checkpoint is B's ended one: the epoch, 3
	// (B's 2, raised past it as B dropped it), and nothing else. B drops
	// it on a goroutine of its own once the rollout has ended: until then
	// the key holds B's last checkpoint, at epoch 2 (A's, at 1, are fenced).
	st := redis.NewClient(&redis.Options{Addr: rd.Addr()})
	defer st.Close()
	keys, err := st.Keys(ctx, "tether:{r:"+onA.id+"}:cp:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("checkpoint keys %v %v", keys, err)
	}
	var h map[string]string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h, err = st.HGetAll(ctx, keys[0]).Result(); err != nil || h["epoch"] != "2" {
			break
		}
	}
	if err != nil || len(h) != 1 || h["epoch"] != "3" {
		t.Fatalf("the checkpoint after A continued: %v %v, want only epoch 3", h, err)
	}
}

// checkOneSequence checks that a client's events are numbered 0, 1, 2, …
// and that one of them, the last, is terminal.
func checkOneSequence(t *testing.T, events []map[string]any) {
	t.Helper()
	for i, ev := range events {
		if seqOf(ev) != i {
			t.Fatalf("event %d (%v) has sequence_number %d", i, ev["type"], seqOf(ev))
		}
		switch ev["type"] {
		case "response.completed", "response.failed", "response.cancelled", "response.incomplete":
			if i != len(events)-1 {
				t.Fatalf("a terminal event (%v) at %d of %d", ev["type"], i, len(events))
			}
		}
	}
}

// TestParkHibernate: 2,000 suspended rollouts parked on a tether serve
// whose rollouts hibernate after a second (--hibernate-after, Redis), their
// clients gone: every one leaves the server's memory (the server counts it
// released, and its goroutines are back to what they were before
// parking), each costs the server's heap under
// 8 KiB and Redis some bytes, and hibernated rollouts answer appends from
// new connections (the ablate run completes them). Real processes, a real
// redis-server; the figures are the closing note's at 100,000.
func TestParkHibernate(t *testing.T) {
	if testing.Short() {
		t.Skip("parks 2,000 rollouts on a tether serve process with a redis-server: not in -short")
	}
	t.Parallel()
	redis := redistest.Start(t)
	dir := t.TempDir()
	code, stdout, stderr := tether(t, "ablate", "--park", "2000", "--park-context", "500", "--hibernate-after", "1s",
		"--store", redis.URL(), "--park-wakes", "50", "--load-server", tetherBinary(t), "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stdout, stderr)
	}
	var res ablate.ParkResult
	if b, err := os.ReadFile(filepath.Join(dir, "park.json")); err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("park.json: %v", err)
	}
	t.Logf("%s", stdout)
	if res.Rollouts != 2000 || res.GoroutinesPerRollout > 0.005 || res.RedisBytesPerRollout <= 0 ||
		res.HotAppendMs.N != 50 || res.WakeAppendMs.N != 50 {
		t.Errorf("hibernated: %+v", res)
	}
	if !raceEnabled && res.HeapPerRollout > 8<<10 {
		t.Errorf("a hibernated rollout holds %.1f KiB of the server's heap, want under 8", res.HeapPerRollout/1024)
	}
}
