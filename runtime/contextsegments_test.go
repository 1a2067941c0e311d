package runtime_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tether-run/tether/hostedtools/websearch"
	"github.com/tether-run/tether/internal/redistest"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// searchScript is a user message scripting n hosted web_search steps.
func searchScript(n int) string {
	var b strings.Builder
	b.WriteString("Search it all.\n")
	for i := range n {
		fmt.Fprintf(&b, "call: web_search {\"query\":\"step %d of the parser's history\"}\n", i)
	}
	return b.String()
}

// compacted is what these tests read of a response object.
type compacted struct {
	ID                string                   `json:"id"`
	Status            string                   `json:"status"`
	IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
	Output            []json.RawMessage        `json:"output"`
}

// queries are the queries of its web_search calls, in order.
func (c compacted) queries() []string {
	var qs []string
	for _, it := range c.Output {
		var ws struct {
			Type   string
			Action struct{ Query string }
		}
		json.Unmarshal(it, &ws)
		if ws.Type == "web_search_call" {
			qs = append(qs, ws.Action.Query)
		}
	}
	return qs
}

// compactions are the sizes of its compaction items' content, in order.
func (c compacted) compactions() []int {
	var sizes []int
	for _, it := range c.Output {
		var cmp struct {
			Type             string `json:"type"`
			EncryptedContent string `json:"encrypted_content"`
		}
		json.Unmarshal(it, &cmp)
		if cmp.Type == "compaction" {
			sizes = append(sizes, len(cmp.EncryptedContent))
		}
	}
	return sizes
}

// sinceCompaction is its output from its last compaction item on: what a
// stateless client sends back, dropping what precedes the item.
func (c compacted) sinceCompaction(t *testing.T) []json.RawMessage {
	t.Helper()
	for i := len(c.Output) - 1; i >= 0; i-- {
		if strings.Contains(string(c.Output[i]), `"type":"compaction"`) {
			return c.Output[i:]
		}
	}
	t.Fatal("no compaction item in the output")
	return nil
}

func readCompacted(t *testing.T, b []byte) compacted {
	t.Helper()
	var c compacted
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("not a response: %v: %.300s", err, b)
	}
	return c
}

// compactingBody is a stateless request of the search script with input,
// compacting at 64 tokens: below what one step adds, so that it compacts
// before every step.
func compactingBody(input any) map[string]any {
	return map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": input,
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 64}}}
}

// compactionKey is a fixed CompactionKey, which servers that open each
// other's items share.
var compactionKey = bytes.Repeat([]byte{7}, 32)

// recordsOnly is a Store that keeps no compaction segments: it hides the
// MemoryStore's.
type recordsOnly struct{ runtime.Store }

// countingSegments is a MemoryStore that counts the segments read from
// it, and the bytes put.
type countingSegments struct {
	*runtime.MemoryStore
	gets, put atomic.Int64
}

func (c *countingSegments) GetSegment(ctx context.Context, tenant, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.MemoryStore.GetSegment(ctx, tenant, key)
}

func (c *countingSegments) PutSegment(ctx context.Context, tenant, key string, seg []byte) error {
	c.put.Add(int64(len(seg)))
	return c.MemoryStore.PutSegment(ctx, tenant, key, seg)
}

// TestCompactionItemSize: each context compaction of a response holds
// what came since the one before and a reference to what that one stood
// for, so that the 30th item is about the size of the 2nd (the 1st holds
// the task's script, sealed whole), where a server whose store keeps no
// segments seals the whole context each time and its 30th item holds
// every step before it (it guards the growth this removed: O(n²) bytes
// over a response). Either way the response reads the whole context: a
// stateless client sending back the last item and what follows it, over
// HTTP and over a new WebSocket, has the model go on at the script's
// next step, which it finds only by reading the script and every step
// taken since, across every segment.
func TestCompactionItemSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		store    runtime.Store
		segments bool
	}{
		{"segments", nil, true},
		{"no segments", recordsOnly{runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, runtime.Options{Renderer: renderer(t), Store: tc.store, Limits: runtime.Limits{MaxCompactions: 30},
				HostedTools: []runtime.Tool{searchTool()}})
			code, b := h.post(t, "/responses", compactingBody(searchScript(40)))
			first := readCompacted(t, b)
			if code != 200 || first.Status != "incomplete" || first.IncompleteDetails == nil || first.IncompleteDetails.Reason != "max_compactions" {
				t.Fatalf("%d %s %+v, want incomplete at max_compactions", code, first.Status, first.IncompleteDetails)
			}
			sizes := first.compactions()
			if len(sizes) != 30 {
				t.Fatalf("%d compactions, want the 30 of the bound", len(sizes))
			}
			growth := float64(sizes[29]) / float64(sizes[1])
			t.Logf("compaction sizes: first %d, second %d, 30th %d (%.1f× the second); response %d bytes", sizes[0], sizes[1], sizes[29], growth, len(b))
			switch {
			case tc.segments && growth > 1.5:
				t.Errorf("the 30th compaction is %.1f× the second: want about the same size", growth)
			case !tc.segments && growth < 4:
				t.Errorf("sealed whole, the 30th compaction is %.1f× the second: want it to hold every step before it", growth)
			}

			steps := len(first.queries())
			want := fmt.Sprintf("step %d of the parser's history", steps)
			code, b = h.post(t, "/responses", compactingBody(first.sinceCompaction(t)))
			if qs := readCompacted(t, b).queries(); code != 200 || len(qs) == 0 || qs[0] != want {
				t.Fatalf("HTTP continuation from the last compaction: %d, queries %q; want %q first", code, qs, want)
			}
			c := h.dial(t, nil)
			c.send(t, create(compactingBody(first.sinceCompaction(t))))
			end := last(c.untilTerminal(t))
			if qs := readCompacted(t, terminalResponse(t, end)).queries(); len(qs) == 0 || qs[0] != want {
				t.Fatalf("WebSocket continuation from the last compaction: queries %q; want %q first (%.300s)", qs, want, end)
			}
		})
	}
}

// TestCompactionSegmentReads: a server that did not make an item, but
// shares the store and key of the one that did (as servers on one Redis
// do), opens it by reading its chain of segments: at most log₂ of the
// compactions plus one (the merges bound it), where each compaction's
// reference alone would be 29; once opened, it reads none again for the
// next turn from it. The maker reads none: it keeps the windows it sealed
// lately. A server that shares the key but not the store refuses the item
// invalid_encrypted_content, naming it, over HTTP and WebSocket; it opens
// the first, which refers to nothing. A stored response continued by
// previous_response_id on the server that did not make it reads its
// compactions' segments from the store too.
func TestCompactionSegmentReads(t *testing.T) {
	t.Parallel()
	store := &countingSegments{MemoryStore: runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}
	opts := func(st runtime.Store) runtime.Options {
		return runtime.Options{Renderer: renderer(t), Store: st, CompactionKey: compactionKey, Limits: runtime.Limits{MaxCompactions: 30},
			HostedTools: []runtime.Tool{searchTool()}}
	}
	a, b := newHarness(t, opts(store)), newHarness(t, opts(store))
	code, body := a.post(t, "/responses", compactingBody(searchScript(40)))
	first := readCompacted(t, body)
	if code != 200 || len(first.compactions()) != 30 {
		t.Fatalf("%d, %d compactions: want the 30 of the bound", code, len(first.compactions()))
	}
	since := first.sinceCompaction(t)
	steps := len(first.queries())

	if code, body := a.post(t, "/responses", compactingBody(since)); code != 200 || store.gets.Load() != 0 {
		t.Fatalf("the maker continuing from its item: %d, %d segments read; want none (%.300s)", code, store.gets.Load(), body)
	}
	code, body = b.post(t, "/responses", compactingBody(since))
	want := fmt.Sprintf("step %d of the parser's history", steps)
	if qs := readCompacted(t, body).queries(); code != 200 || len(qs) == 0 || qs[0] != want {
		t.Fatalf("B continuing from A's item: %d, queries %q; want %q first", code, qs, want)
	}
	reads := store.gets.Load()
	if reads == 0 || reads > 5 {
		t.Errorf("B read %d segments to open the 30th compaction, want 1 to 5", reads)
	}
	if code, _ := b.post(t, "/responses", compactingBody(since)); code != 200 || store.gets.Load() != reads {
		t.Errorf("B continuing from it again: %d, %d more segments read; want none", code, store.gets.Load()-reads)
	}
	t.Logf("B read %d segments; %d bytes of segments put", reads, store.put.Load())

	other := newHarness(t, opts(runtime.NewMemoryStore(runtime.MemoryStoreOptions{})))
	code, body = other.post(t, "/responses", compactingBody(since))
	var e struct {
		Error struct{ Code, Param, Message string } `json:"error"`
	}
	json.Unmarshal(body, &e)
	var item struct{ ID string }
	json.Unmarshal(since[0], &item)
	if code != 400 || e.Error.Code != "invalid_encrypted_content" || e.Error.Param != "input[0].encrypted_content" ||
		!strings.Contains(e.Error.Message, item.ID) || !strings.Contains(e.Error.Message, "no longer keeps") {
		t.Fatalf("a server without the item's segments: %d %s; want 400 invalid_encrypted_content at input[0].encrypted_content naming %s", code, body, item.ID)
	}
	c := other.dial(t, nil)
	c.send(t, create(compactingBody(since)))
	c.wantError(t, "invalid_encrypted_content")

	// A stored response of A's continued on B by previous_response_id:
	// B loads it from the store they share and opens its last compaction
	// the same way.
	stored := compactingBody(searchScript(40))
	stored["store"] = true
	code, body = a.post(t, "/responses", stored)
	chained := readCompacted(t, body)
	next := compactingBody("Go on.")
	next["previous_response_id"] = chained.ID
	code, body = b.post(t, "/responses", next)
	if qs := readCompacted(t, body).queries(); code != 200 || len(qs) == 0 || qs[0] != fmt.Sprintf("step %d of the parser's history", len(chained.queries())) {
		t.Fatalf("B continuing A's stored response: %d, queries %q; want step %d first", code, qs, len(chained.queries()))
	}
	for i, it := range first.Output {
		if strings.Contains(string(it), `"type":"compaction"`) {
			code, body := other.post(t, "/responses", compactingBody(first.Output[i:i+1]))
			if code != 200 {
				t.Fatalf("the first compaction, which holds its window whole, on a server sharing only the key: %d %.300s", code, body)
			}
			break
		}
	}
}

// TestCompactionFormatOne: a compaction item sealed as every item was
// before references (format 1: its window whole, a JSON array of items),
// which a stateless client may still hold, opens: the model reads its
// window, a script and its first step, and takes the second.
func TestCompactionFormatOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t), CompactionKey: compactionKey, HostedTools: []runtime.Tool{searchTool()}})
	window, _ := json.Marshal([]any{
		userMsg(searchScript(3)),
		map[string]any{"type": "web_search_call", "id": "ws_0", "status": "completed", "action": map[string]any{"type": "search", "query": "step 0 of the parser's history"}},
	})
	block, _ := aes.NewCipher(compactionKey)
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, aead.NonceSize())
	content := base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, window, nil))
	body := compactingBody([]any{map[string]any{"type": "compaction", "id": "cmp_old", "created_by": "context_management", "encrypted_content": content}})
	code, b := h.post(t, "/responses", body)
	if qs := readCompacted(t, b).queries(); code != 200 || len(qs) == 0 || qs[0] != "step 1 of the parser's history" {
		t.Fatalf("continuing from a format 1 item: %d, queries %q; want step 1 first (%.300s)", code, qs, b)
	}
}

// readScript is a user message scripting n steps of one read_file call
// each, on f0.go, f1.go, …; readFileTool the function it calls.
func readScript(n int) string {
	var b strings.Builder
	b.WriteString("Read them all.\n")
	for i := range n {
		fmt.Fprintf(&b, "call: read_file {\"path\":\"f%d.go\"}\n", i)
	}
	return b.String()
}

var readFileTool = map[string]any{"type": "function", "name": "read_file", "parameters": map[string]any{"type": "object"}}

// suspendedCompacting is a suspended rollout of readScript(n) that
// compacts before each step, its outputs being past the threshold.
func suspendedCompacting(n int, lane string) map[string]any {
	b := map[string]any{"model": "tether-scripted", "store": false, "suspend": true, "tools": []any{readFileTool}, "input": readScript(n),
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 64}}}
	if lane != "" {
		b["stream_id"] = lane
	}
	return b
}

// answers answers each call a pause waits on with a long output.
func answers(t *testing.T, pause []byte) []any {
	t.Helper()
	var outs []any
	for _, o := range outputsFor(t, pause) {
		m := o.(map[string]any)
		m["output"] = longOutput(100)
		outs = append(outs, m)
	}
	return outs
}

// readsAndCompactions are the paths of the read_file calls the frames'
// output_item.done events carry, in order, and their compaction items'
// content sizes.
func readsAndCompactions(t *testing.T, frames [][]byte) (paths []string, sizes []int) {
	t.Helper()
	for _, f := range frames {
		e := decodeEv(t, f)
		if e.Type != "response.output_item.done" {
			continue
		}
		var it struct {
			Type             string `json:"type"`
			Arguments        string `json:"arguments"`
			EncryptedContent string `json:"encrypted_content"`
		}
		json.Unmarshal(e.Item, &it)
		switch it.Type {
		case "function_call":
			var args struct{ Path string }
			json.Unmarshal([]byte(it.Arguments), &args)
			paths = append(paths, args.Path)
		case "compaction":
			sizes = append(sizes, len(it.EncryptedContent))
		}
	}
	return paths, sizes
}

// wantReads checks that paths are f0.go … f(n-1).go, each once, in order.
func wantReads(t *testing.T, name string, paths []string, n int) {
	t.Helper()
	if len(paths) != n {
		t.Fatalf("%s: read %q, want %d files in order", name, paths, n)
	}
	for i, p := range paths {
		if p != fmt.Sprintf("f%d.go", i) {
			t.Fatalf("%s: read %q, want f0.go … f%d.go in order", name, paths, n-1)
		}
	}
}

// TestCompactionTakeover: a durable suspended rollout that compacts
// before each step, parked on server A after its fifth compaction, is
// handed over as A shuts down and resumed on server B, which shares A's
// Redis (store, checkpoints and key) and nothing else: B rebuilds the
// rollout from its journal, opening its latest compaction from the
// segments in Redis, and the model goes on reading the whole context (it
// reads every file of the script, once and in order, and answers). A's
// items refer to segments (the 5th the size of the 2nd) rather than hold
// every step, and so do B's.
func TestCompactionTakeover(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	server := func() *harness {
		st, err := redisstore.New(rd.URL(), redisstore.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newHarness(t, runtime.Options{Renderer: renderer(t), Store: st, Checkpoints: st, CompactionKey: compactionKey,
			Suspension: runtime.SuspensionOptions{ResumeWindow: time.Minute}})
	}
	a, b := server(), server()
	const steps = 8

	c1 := a.dial(t, nil)
	c1.send(t, create(suspendedCompacting(steps, "")))
	frames := c1.next(t)
	id := respID(t, last(frames))
	for range 4 {
		c1.send(t, appendEv(id, "", answers(t, last(frames))...))
		frames = append(frames, c1.next(t)...)
	}
	pause := last(frames)
	if eventType(t, pause) != "response.done" {
		t.Fatalf("A: %s, want a pause", pause)
	}
	_, onA := readsAndCompactions(t, frames)
	if len(onA) != 5 || float64(onA[4]) > 1.5*float64(onA[1]) {
		t.Fatalf("A's compactions: sizes %v; want 5 (one before each step: the script is past the threshold), the 5th about the size of the 2nd", onA)
	}
	handOverFrom(t, a, c1)

	c2 := b.dial(t, nil)
	resume := refEv("response.resume", id, "")
	resume["sequence_number"] = *decodeEv(t, pause).Seq
	c2.send(t, resume)
	if again := c2.recv(t); !bytes.Equal(again, pause) {
		t.Fatalf("B's resume sent %s, want the pending pause", again)
	}
	for p := pause; eventType(t, p) == "response.done"; {
		c2.send(t, appendEv(id, "", answers(t, p)...))
		more := c2.next(t)
		frames = append(frames, more...)
		p = last(more)
	}
	end := decodeEv(t, last(frames))
	if end.Type != "response.completed" || !strings.Contains(string(end.Response.Output[len(end.Response.Output)-1]), "read_file returned") {
		t.Fatalf("the rollout taken over ended with %s", last(frames))
	}
	paths, sizes := readsAndCompactions(t, frames)
	wantReads(t, "A then B", paths, steps)
	if len(sizes) <= 5 || float64(sizes[len(sizes)-1]) > 1.5*float64(sizes[1]) {
		t.Errorf("compaction sizes %v: want B's too, the last about the size of the 2nd", sizes)
	}
}

// handOverFrom shuts server a down and reads c, its client, until a
// closes it with 1012 (service restart): its parked rollouts are handed
// over to their checkpoints, for another server to resume.
func handOverFrom(t *testing.T, a *harness, c *wsConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- a.srv.Shutdown(ctx) }()
	for {
		if _, err := c.read(t, ctx); err != nil {
			if status := websocket.CloseStatus(err); status != websocket.StatusServiceRestart {
				t.Fatalf("A closed the connection with %v (%v), want 1012", status, err)
			}
			break
		}
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestCompactionFork: a suspended rollout forked at a pause after it has
// compacted goes on, in the fork as in the original, reading the whole
// context the compactions stand for (each reads the rest of the script's
// files in order, and answers) from the window its pause kept: its next
// compactions refer to it, as the original's do, rather than seal the
// whole context again.
func TestCompactionFork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, runtime.Options{Renderer: renderer(t)})
	c := h.dial(t, nil)
	l := newLanes(c)
	const steps = 6
	c.send(t, create(suspendedCompacting(steps, "orig")))
	frames := l.next(t, "orig")
	id := respID(t, last(frames))
	for range 3 {
		c.send(t, appendEv(id, "orig", answers(t, last(frames))...))
		frames = append(frames, l.next(t, "orig")...)
	}
	shared, sizes := readsAndCompactions(t, frames)
	if len(sizes) != 4 {
		t.Fatalf("%d compactions before the fork, want 4 (one before each step)", len(sizes))
	}
	c.send(t, map[string]any{"type": "response.fork", "stream_id": "orig", "response_id": id, "stream_ids": []string{"f"}})
	fork := l.next(t, "f")
	forkID := respID(t, last(fork))
	for _, run := range []struct {
		lane, id string
		frames   [][]byte
	}{{"f", forkID, fork}, {"orig", id, frames[len(frames)-1:]}} {
		var own [][]byte
		for p := last(run.frames); eventType(t, p) == "response.done"; {
			c.send(t, appendEv(run.id, run.lane, answers(t, p)...))
			more := l.next(t, run.lane)
			own = append(own, more...)
			p = last(more)
		}
		if eventType(t, last(own)) != "response.completed" {
			t.Fatalf("%s ended with %s", run.lane, last(own))
		}
		paths, more := readsAndCompactions(t, own)
		wantReads(t, run.lane, append(slices.Clip(shared), paths...), steps)
		if len(more) == 0 || float64(slices.Max(more)) > 1.5*float64(sizes[1]) {
			t.Errorf("%s's compactions: sizes %v after %v; want them about the size of the 2nd", run.lane, more, sizes)
		}
	}
}

// BenchmarkCompactionBytes measures one response of 300 hosted search
// steps with compact_threshold 64, a threshold below what one step adds, so
// that it compacts before nearly every step, with MaxCompactions and
// MaxOutputBytes raised out of the way: response-bytes is its JSON as a client reads it,
// largest-compaction-bytes its largest compaction item's content,
// segment-bytes what its compactions put in the store as segments.
// search=corpus searches web_search's embedded corpus, as tether serve
// does, whose results quote the pages they found; search=stub finds two
// bare links a query.
func BenchmarkCompactionBytes(b *testing.B) {
	docs, err := websearch.DefaultCorpus()
	if err != nil {
		b.Fatal(err)
	}
	ix, err := websearch.NewIndex(docs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ix.Close() })
	for _, search := range []struct {
		name string
		tool runtime.Tool
	}{{"stub", searchTool()}, {"corpus", websearch.New(ix)}} {
		b.Run("search="+search.name, func(b *testing.B) { benchmarkCompactionBytes(b, search.tool) })
	}
}

func benchmarkCompactionBytes(b *testing.B, search runtime.Tool) {
	store := &countingSegments{MemoryStore: runtime.NewMemoryStore(runtime.MemoryStoreOptions{})}
	h := newHarness(b, runtime.Options{Store: store, Limits: runtime.Limits{MaxCompactions: 1000, MaxOutputBytes: 1 << 30}, HostedTools: []runtime.Tool{search}})
	body := map[string]any{"model": "tether-scripted", "store": false, "tools": []any{webSearchTool}, "input": searchScript(300),
		"context_management": []any{map[string]any{"type": "compaction", "compact_threshold": 64}}}
	b.ReportAllocs()
	for b.Loop() {
		code, resp := h.post(b, "/responses", body)
		var r struct {
			Status            string
			IncompleteDetails *struct{ Reason string } `json:"incomplete_details"`
			Output            []struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			}
		}
		if err := json.Unmarshal(resp, &r); err != nil || code != 200 || r.Status != "completed" {
			b.Fatalf("%d %s %+v %.300s", code, r.Status, r.IncompleteDetails, resp)
		}
		compactions, largest := 0, 0
		for _, it := range r.Output {
			if it.Type == "compaction" {
				compactions++
				largest = max(largest, len(it.EncryptedContent))
			}
		}
		b.ReportMetric(float64(len(resp)), "response-bytes")
		b.ReportMetric(float64(largest), "largest-compaction-bytes")
		b.ReportMetric(float64(compactions), "compactions")
		b.ReportMetric(float64(store.put.Swap(0)), "segment-bytes")
	}
}
