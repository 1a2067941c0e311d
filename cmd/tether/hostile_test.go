package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// hostileLimit is the memory limit the hostile clients' server runs under
// (--memory-limit): its budget is half of it.
const hostileLimit = 192 << 20

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// hostileText is about n bytes of prose: it tokenizes as a client's text
// does.
func hostileText(n int) string {
	const s = "the parser reads one token at a time and keeps what it has seen. "
	return strings.Repeat(s, n/len(s)+1)[:n]
}

// frameOf reads frames until one whose type is one of types, or an error
// event, and returns it decoded.
func frameOf(ctx context.Context, t *testing.T, c *websocket.Conn, types ...string) map[string]any {
	t.Helper()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		typ, _ := ev["type"].(string)
		if typ == "error" || strings.HasSuffix(typ, ".failed") {
			return ev
		}
		for _, want := range types {
			if typ == want {
				return ev
			}
		}
	}
}

// errorCode is the code of an error event, or of a failed event's error.
func errorCode(ev map[string]any) string {
	for _, k := range []string{"error", "response"} {
		m, _ := ev[k].(map[string]any)
		if k == "response" && m != nil {
			m, _ = m["error"].(map[string]any)
		}
		if code, ok := m["code"].(string); ok {
			return code
		}
	}
	return ""
}

// parkRollout creates a suspended rollout on c whose one step calls lookup
// calls times, and returns its pause.
func parkRollout(ctx context.Context, t *testing.T, c *websocket.Conn, calls int) map[string]any {
	t.Helper()
	var step []string
	for i := range calls {
		step = append(step, fmt.Sprintf(`lookup {"q":"%d"}`, i))
	}
	sendJSON(ctx, t, c, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "suspend": true,
		"tools": []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}},
		"input": "Look them up.\ncall: " + strings.Join(step, " | ")})
	pause := frameOf(ctx, t, c, "response.done")
	if pause["type"] != "response.done" {
		t.Fatalf("parking: %v", pause)
	}
	return pause
}

// stillServes checks that a new client's small create completes.
func stillServes(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	c := dialWS(ctx, t, base)
	defer c.CloseNow()
	sendJSON(ctx, t, c, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "input": "still there?"})
	if ev := frameOf(ctx, t, c, "response.completed"); ev["type"] != "response.completed" {
		t.Errorf("another client, meanwhile: %v", ev)
	}
}

// TestHostileMemory: hostile clients, each making the server hold what
// it can through one path, against a tether serve process under
// --memory-limit 192MiB (a budget of about 60 MiB: half of what the limit
// leaves beside the server's own memory and its binary's pages): what does
// not fit is refused with server_memory_full (conversations, which a full
// store evicts, are evicted), another client is served meanwhile, and the
// process's peak RSS stays within the limit (and a stated headroom: the
// collector's lag behind a burst). Figures for docs/serving.md: go test
// -run TestHostileMemory -v ./cmd/tether.
func TestHostileMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("moves hundreds of MB of frames: not in -short, not under the race detector (.ci/run runs it without)")
	}
	const headroom = 16 << 20
	cases := []struct {
		name string
		args []string
		run  func(ctx context.Context, t *testing.T, base string) (refused, taken int)
	}{
		{"steer", nil, hostileSteer},
		{"append", nil, hostileAppend},
		{"slow readers", nil, hostileSlowReaders},
		{"conversation metadata", []string{"--tenant-store-bytes", "4MiB"}, hostileMetadata},
		{"item references", nil, hostileReferences},
		{"compaction", nil, hostileCompaction},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startServeProcess(t, append([]string{"--memory-limit", strconv.Itoa(hostileLimit)}, tc.args...)...)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			refused, taken := tc.run(ctx, t, p.base)
			peak := peakRSS(t, p.cmd.Process.Pid)
			t.Logf("%s: %d taken, %d refused, evicted or cut short; peak RSS %d MiB under --memory-limit %d MiB", tc.name, taken, refused, peak>>20, hostileLimit>>20)
			if refused == 0 {
				t.Errorf("nothing refused")
			}
			if peak > hostileLimit+headroom {
				t.Errorf("peak RSS %d MiB: past the limit %d MiB and headroom %d", peak>>20, hostileLimit>>20, headroom>>20)
			}
		})
	}
}

// hostileSteer: 3 parked rollouts, each steered 16 times with 4 MiB, on
// three connections at once; then each is cancelled, which fails its
// steers not yet in its context (response.steer.failed gives each input
// back).
func hostileSteer(ctx context.Context, t *testing.T, base string) (refused, taken int) {
	input := hostileText(4 << 20)
	var mu sync.Mutex
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, 3)
	ids := make([]string, 3)
	for i := range conns {
		conns[i] = dialWS(ctx, t, base)
		defer conns[i].CloseNow()
		ids[i] = parkRollout(ctx, t, conns[i], 1)["response"].(map[string]any)["id"].(string)
	}
	for i, c := range conns {
		wg.Go(func() {
			for range 16 {
				sendJSON(ctx, t, c, map[string]any{"type": "response.steer", "previous_response_id": ids[i], "input": input})
				ev := frameOf(ctx, t, c, "response.steer.pending")
				mu.Lock()
				switch code := errorCode(ev); {
				case ev["type"] == "response.steer.pending":
					taken++
				case code == "server_memory_full":
					refused++
				default:
					t.Errorf("steer: %v %s", ev["type"], code)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stillServes(ctx, t, base)
	for i, c := range conns {
		sendJSON(ctx, t, c, map[string]any{"type": "response.cancel", "response_id": ids[i]})
		if ev := frameOf(ctx, t, c, "response.cancelled"); ev["type"] != "response.cancelled" && ev["type"] != "response.steer.failed" {
			t.Errorf("cancel: %v", ev["type"])
		}
	}
	return refused, taken
}

// hostileAppend: 6 parked rollouts, each given 3 outputs of 6 MiB, one for
// each of three of its four calls, so that it stays parked holding them.
func hostileAppend(ctx context.Context, t *testing.T, base string) (refused, taken int) {
	output := hostileText(6 << 20)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 6 {
		c := dialWS(ctx, t, base)
		defer c.CloseNow()
		pause := parkRollout(ctx, t, c, 4)
		id, outs := pause["response"].(map[string]any)["id"].(string), outputs(pause)
		wg.Go(func() {
			for _, out := range outs[:3] {
				out.(map[string]any)["output"] = output
				sendJSON(ctx, t, c, map[string]any{"type": "response.append", "response_id": id, "input": []any{out}})
			}
			// An append that answers part of the step is not acknowledged:
			// a create after them says when they have been taken, and any
			// refusal comes before its answer.
			sendJSON(ctx, t, c, map[string]any{"type": "response.create", "model": "tether-scripted", "store": false, "stream_id": "probe", "input": "done?"})
			for {
				ev := frameOf(ctx, t, c, "response.completed")
				code := errorCode(ev)
				mu.Lock()
				if code == "server_memory_full" {
					refused++
				} else if code != "" {
					t.Errorf("append: %v %s", ev["type"], code)
				}
				mu.Unlock()
				if ev["type"] == "response.completed" {
					return
				}
			}
		})
	}
	wg.Wait()
	stillServes(ctx, t, base)
	return refused, 18 - refused
}

// hostileSlowReaders: 6 connections that never read, each sending 12
// creates of 1 MiB.
func hostileSlowReaders(ctx context.Context, t *testing.T, base string) (refused, taken int) {
	input := hostileText(1 << 20)
	conns := make([]*websocket.Conn, 6)
	for i := range conns {
		conns[i] = dialWS(ctx, t, base)
		defer conns[i].CloseNow()
		for j := range 12 {
			sendJSON(ctx, t, conns[i], map[string]any{"type": "response.create", "model": "tether-scripted", "store": false,
				"stream_id": fmt.Sprint(j), "input": "Please read this back: " + input})
		}
	}
	stillServes(ctx, t, base)
	// Now read what each was sent: its answers, and its refusals.
	for _, c := range conns {
		for range 12 {
			ev := frameOf(ctx, t, c, "response.completed")
			switch code := errorCode(ev); {
			case ev["type"] == "response.completed":
				taken++
			case code == "server_memory_full":
				refused++
			default:
				t.Errorf("slow reader: %v %s", ev["type"], code)
			}
		}
	}
	return refused, taken
}

// hostileMetadata: 6,000 conversations with 16 metadata pairs each
// (about 9 KB of metadata) under --tenant-store-bytes 4MiB: the store
// keeps what fits its bound and evicts the least recently written; none
// is refused. It returns how many were evicted and how many are kept.
func hostileMetadata(ctx context.Context, t *testing.T, base string) (evicted, kept int) {
	meta := map[string]string{}
	for i := range 16 {
		meta[fmt.Sprintf("key_%02d_%s", i, strings.Repeat("k", 50))] = strings.Repeat("v", 512)
	}
	body, _ := json.Marshal(map[string]any{"metadata": meta})
	ids := make([]string, 0, 6000)
	client := &http.Client{}
	for range 6000 {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/conversations", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer durable")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var conv struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&conv)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("create: %d %v", resp.StatusCode, err)
		}
		ids = append(ids, conv.ID)
	}
	stillServes(ctx, t, base)
	for _, id := range ids {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/conversations/"+id, nil)
		req.Header.Set("Authorization", "Bearer durable")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			kept++
		case 404:
			evicted++
		default:
			t.Fatalf("get: %d", resp.StatusCode)
		}
	}
	return evicted, kept
}

// postResponse posts a create over HTTP and returns its status and body.
func postResponse(ctx context.Context, t *testing.T, base string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/responses", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer durable")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

// hostileReferences: two creates at once, each of 2,000 item_references
// to one stored 108 KB message (216 MB once expanded, from 172 KB sent):
// each is refused request_too_large before anything renders.
func hostileReferences(ctx context.Context, t *testing.T, base string) (refused, taken int) {
	postResponse(ctx, t, base, map[string]any{"model": "tether-scripted",
		"input": []any{map[string]any{"type": "message", "role": "user", "id": "msg_big", "content": hostileText(108_000)}}})
	refs := make([]any, 2000)
	for i := range refs {
		refs[i] = map[string]any{"type": "item_reference", "id": "msg_big"}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			status, out := postResponse(ctx, t, base, map[string]any{"model": "tether-scripted", "store": false, "input": refs})
			mu.Lock()
			defer mu.Unlock()
			if code := errorCode(out); status == 413 && code == "request_too_large" {
				refused++
			} else {
				t.Errorf("2,000 references: %d %s", status, code)
				taken++
			}
		})
	}
	wg.Wait()
	stillServes(ctx, t, base)
	return refused, taken
}

// hostileCompaction: a create of 300 hosted search steps with
// compact_threshold 64, a threshold below what one step adds: it ends
// incomplete at the response's bound on compactions (max_compactions)
// rather than compacting at every step.
func hostileCompaction(ctx context.Context, t *testing.T, base string) (refused, taken int) {
	var script strings.Builder
	script.WriteString("Search it all.\n")
	for i := range 300 {
		fmt.Fprintf(&script, "call: web_search {\"query\":\"step %d of the parser's history\"}\n", i)
	}
	status, out := postResponse(ctx, t, base, map[string]any{"model": "tether-scripted", "store": false,
		"tools": []any{map[string]any{"type": "web_search"}}, "input": script.String(),
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 64}}})
	details, _ := out["incomplete_details"].(map[string]any)
	if status != 200 || out["status"] != "incomplete" || details["reason"] != "max_compactions" {
		t.Errorf("300 hosted steps compacting at 64 tokens: %d %v %v", status, out["status"], details)
		return 0, 1
	}
	b, _ := json.Marshal(out)
	t.Logf("compaction: ended incomplete (max_compactions) with %d output items, %d KB", len(out["output"].([]any)), len(b)>>10)
	stillServes(ctx, t, base)
	return 1, 0
}
