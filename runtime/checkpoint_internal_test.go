package runtime

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// VerifyJournal has every journal write check that its journal reads back
// to the state written (journal.verify): TestMain sets it for the tests,
// not the benchmarks.
var VerifyJournal = &verifyJournal

// TestMemoryCheckpointsExpire: a journal is kept for its ttl and no
// longer.
func TestMemoryCheckpointsExpire(t *testing.T) {
	m := NewMemoryCheckpoints()
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	ctx := context.Background()
	if err := m.Write(ctx, &JournalWrite{ID: "resp_1", Creds: "c", Epoch: 1, Reset: true, Head: []byte("h"), Entries: [][]byte{[]byte("x")}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute - time.Nanosecond)
	if _, err := m.Load(ctx, "", "resp_1", "c"); err != nil {
		t.Fatalf("Load within its ttl: %v", err)
	}
	now = now.Add(time.Nanosecond)
	if _, err := m.Load(ctx, "", "resp_1", "c"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load past its ttl: %v, want ErrNoCheckpoint", err)
	}
	if len(m.journals) != 0 {
		t.Errorf("%d journals kept past their ttl", len(m.journals))
	}
}

// journalSeed is a journal of two pauses and an answer, for the fuzzer to
// start from.
func journalSeed(t testing.TB) (head []byte, entries [][]byte) {
	call := func(id string) *protocol.FunctionCall {
		return &protocol.FunctionCall{ID: "fc_" + id, CallID: "call_" + id, Name: "f", Arguments: "{}", Status: protocol.StatusCompleted}
	}
	req, perr := protocol.DecodeCreateRequest([]byte(`{"model":"tether-scripted","input":"hi"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	first := call("1")
	ps := &pauseState{Version: pauseVersion, Request: req, Response: &protocol.Response{ID: "resp_1", Output: protocol.Items{first}},
		Items:     protocol.Items{first},
		pauseLoop: pauseLoop{Steps: 1, Seq: 4, Rendered: 1, Calls: []pausedCall{{Type: protocol.ItemFunctionCall, CallID: "call_1", Name: "f", Index: 0, Pos: 0, Client: true}}}}
	ps.prompt = (*sampler.Prompt)(nil).Append([]sampler.Token{1, 70_000, 3}) // its one rendered item's tokens
	frames := []frame{{seq: 2, b: []byte(`{"type":"response.output_item.done"}`)}, {seq: 3, b: []byte(`{"type":"response.done"}`)}}
	var j journal
	base, err := snapshotEntry(ps, frames, time.UnixMilli(1000))
	if err != nil {
		t.Fatal(err)
	}
	j.wrote(true, [][]byte{base}, ps, frames, time.UnixMilli(1000))
	second := call("2")
	next := *ps
	next.Items = protocol.Items{first, &protocol.FunctionCallOutput{CallID: "call_1", Output: protocol.ToolOutput{Text: "ok"}}, second}
	next.Response = &protocol.Response{ID: "resp_1", Output: protocol.Items{first, second}}
	next.pauseLoop = pauseLoop{Steps: 2, StepAt: 1, Seq: 8, Rendered: 2, Calls: []pausedCall{{Type: protocol.ItemFunctionCall, CallID: "call_2", Name: "f", Index: 1, Pos: 2, Client: true}}}
	step, err := stepEntry(ps, &next, []frame{{seq: 7, b: []byte(`{"type":"response.done"}`)}}, time.UnixMilli(2000), nil)
	if err != nil {
		t.Fatal(err)
	}
	answer, _, err := answerEntry(protocol.Items{&protocol.FunctionCallOutput{CallID: "call_2", Output: protocol.ToolOutput{Text: "done"}}})
	if err != nil {
		t.Fatal(err)
	}
	return j.head(3, &next, true, time.UnixMilli(2000)), [][]byte{base, step, answer}
}

// TestReadJournal: a journal of a snapshot, a step and an answer reads
// back to the last pause, its frames, its answer and the tokens of the
// snapshot's prompt; one whose head counts
// other entries, or whose step comes first, does not.
func TestReadJournal(t *testing.T) {
	head, entries := journalSeed(t)
	lc, err := readJournal(head, entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.pause.Items) != 3 || len(lc.pause.Response.Output) != 2 || lc.pause.Seq != 8 || len(lc.frames) != 1 || lc.frames[0].seq != 7 || len(lc.answer) != 1 {
		t.Fatalf("read back %d items, %d output, seq %d, frames %v, answer %v", len(lc.pause.Items), len(lc.pause.Response.Output), lc.pause.Seq, lc.frames, lc.answer)
	}
	if p := lc.pause.packed; p == nil || p.from != 0 || len(p.segments) != 1 {
		t.Fatalf("the snapshot's prompt read back as %+v, want its one item's tokens", p)
	}
	if lc.journal.n != 3 || lc.journal.state != lc.pause || !lc.parked.Equal(time.UnixMilli(2000)) {
		t.Fatalf("the journal stands at %d entries, parked %v", lc.journal.n, lc.parked)
	}
	// Entries of the DEFLATE format, as an earlier build wrote them, read
	// back the same.
	old, err := readJournal(head, deflated(t, entries))
	if err != nil || len(old.pause.Items) != 3 || old.pause.Seq != 8 || len(old.answer) != 1 {
		t.Fatalf("the journal in DEFLATE entries read back: %v", err)
	}
	// A snapshot as an earlier build wrote it, the state whole, its items
	// in it, its prompt's tokens alone, reads back the same.
	_, body, err := openEntry(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	r := entryReader{b: body}
	parked, state := r.uvarint(), r.bytes()
	first, err := decodePause(state, r.items())
	if err != nil {
		t.Fatal(err)
	}
	frames, prompt := r.frames(), r.prompt(true)
	whole, err := protocol.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	tokens := binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, sampler.RenderVersion), uint64(prompt.from)), uint64(len(prompt.segments)))
	for _, seg := range prompt.segments {
		tokens = append(binary.AppendUvarint(tokens, uint64(len(seg.Packed))), seg.Packed...)
	}
	base := appendEntry(entryBase, whole, nil, frames, tokens, time.UnixMilli(int64(parked)))
	earlier, err := readJournal(head, [][]byte{base, entries[1], entries[2]})
	if err != nil || len(earlier.pause.Items) != 3 || earlier.pause.Seq != 8 || earlier.pause.packed == nil || earlier.pause.packed.counted {
		t.Fatalf("a journal of an earlier build's snapshot read back: %v", err)
	}
	if _, err := readJournal(head, entries[:2]); err == nil {
		t.Error("a journal short of its head's count read back")
	}
	if _, err := readJournal(head, [][]byte{entries[1], entries[0], entries[2]}); err == nil {
		t.Error("a journal that begins with a step read back")
	}
}

// deflated is entries as the DEFLATE format has them.
func deflated(t testing.TB, entries [][]byte) [][]byte {
	var out [][]byte
	for _, e := range entries {
		kind, body, err := openEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.Write([]byte{entryDeflate, kind})
		w, _ := flate.NewWriter(&b, flate.BestSpeed)
		w.Write(body)
		w.Close()
		out = append(out, b.Bytes())
	}
	return out
}

// FuzzReadJournal: whatever a store hands back, reading it never panics,
// and what it accepts is a pause whose frames come before its next event.
func FuzzReadJournal(f *testing.F) {
	head, entries := journalSeed(f)
	join := func(es [][]byte) []byte {
		var b []byte
		for _, e := range es {
			b = append(b, byte(len(e)), byte(len(e)>>8))
			b = append(b, e...)
		}
		return b
	}
	f.Add(head, join(entries))
	f.Add(head, join(entries[:2]))
	f.Add(head, join(deflated(f, entries)))
	f.Add([]byte(`{}`), []byte{})
	f.Fuzz(func(t *testing.T, head, joined []byte) {
		var es [][]byte
		for len(joined) >= 2 {
			n := int(joined[0]) | int(joined[1])<<8
			joined = joined[2:]
			if n > len(joined) {
				break
			}
			es = append(es, joined[:n])
			joined = joined[n:]
		}
		lc, err := readJournal(head, es)
		if err != nil {
			return
		}
		if len(lc.frames) == 0 || lc.frames[len(lc.frames)-1].seq >= lc.pause.Seq || !lc.pause.valid() {
			t.Fatalf("accepted frames %v for a pause whose next event is %d", lc.frames, lc.pause.Seq)
		}
	})
}

// BenchmarkJournalCompaction: what a snapshot costs, the write that begins
// a journal (a rollout's first pause, a compaction, a change of tools),
// against a step's, at 1,000 and 100,000 tokens of context (read_file
// outputs of some 1,000 tokens each, their tokens packed as the renderer
// leaves them), and the bytes each leaves; and the snapshot read back (a
// wake's or a takeover's).
func BenchmarkJournalCompaction(b *testing.B) {
	r, err := sampler.NewRenderer()
	if err != nil {
		b.Fatal(err)
	}
	// A file of some 1,000 tokens, no two alike (a snapshot of one file
	// repeated would compress to nothing).
	words := strings.Fields("parse token scanner buffer config value error return func struct field index length offset reader writer cache entry state")
	rng := rand.New(rand.NewPCG(1, 2))
	file := func() string {
		var b strings.Builder
		for range 60 {
			fmt.Fprintf(&b, "func %s%d(%s %s) (%s, error) {\n\treturn %s.%s(%d)\n}\n", words[rng.IntN(len(words))], rng.IntN(1000),
				words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100000))
		}
		return b.String()
	}
	for _, n := range []int{1_000, 100_000} {
		req, perr := protocol.DecodeCreateRequest([]byte(`{"model":"tether-scripted","input":"go on"}`))
		if perr != nil {
			b.Fatal(perr)
		}
		var items protocol.Items
		var prompt *sampler.Prompt
		for i := 0; prompt.Len() < n; i++ {
			id := fmt.Sprintf("call_%d", i)
			pair := protocol.Items{&protocol.FunctionCall{ID: "fc_" + id, CallID: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path":"pkg/file%d.go"}`, i), Status: protocol.StatusCompleted},
				&protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: file()}}}
			items = append(items, pair...)
			for _, it := range pair {
				prompt = prompt.Append(r.Item(it))
			}
		}
		last := items[len(items)-2].(*protocol.FunctionCall)
		ps := &pauseState{Version: pauseVersion, Request: req, Response: &protocol.Response{ID: "resp_1", Output: protocol.Items{last}},
			Items:     items,
			pauseLoop: pauseLoop{Steps: 1, Seq: 4, Rendered: len(items), Calls: []pausedCall{{Type: protocol.ItemFunctionCall, CallID: last.CallID, Name: last.Name, Index: 0, Pos: len(items) - 2, Client: true}}}}
		ps.prompt = prompt
		frames := []frame{{seq: 3, b: []byte(`{"type":"response.done"}`)}}
		b.Run(fmt.Sprintf("context=%dk/snapshot", n/1000), func(b *testing.B) {
			var e []byte
			for b.Loop() {
				if e, err = snapshotEntry(ps, frames, time.UnixMilli(1000)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(e)), "bytes")
		})
		b.Run(fmt.Sprintf("context=%dk/read", n/1000), func(b *testing.B) {
			e, err := snapshotEntry(ps, frames, time.UnixMilli(1000))
			if err != nil {
				b.Fatal(err)
			}
			var j journal
			head := j.head(1, ps, false, time.UnixMilli(1000))
			for b.Loop() {
				if _, err := readJournal(head, [][]byte{e}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
