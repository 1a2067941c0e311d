package runtime

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// chainOf is a conversation of turns records whose items hold about tokens
// tokens in all (a word of 4 letters and a space is about a token): each
// turn a user message and an assistant message, each record naming the
// ones before it.
func chainOf(turns, tokens int) []*Record {
	words := max(tokens/(2*turns), 1)
	text := strings.Repeat("word ", words)
	var recs []*Record
	var chain []string
	for i := range turns {
		resp := &protocol.Response{ID: ids.New("resp"), Object: "response", Status: protocol.ResponseCompleted, Model: "m", Store: true,
			Output: protocol.Items{&protocol.Message{ID: ids.New("msg"), Status: protocol.StatusCompleted, Role: protocol.RoleAssistant,
				Content: protocol.Contents{&protocol.OutputText{Text: text, Annotations: []protocol.Annotation{}}}}}}
		if i > 0 {
			prev := recs[i-1].Response.ID
			resp.PreviousResponseID = &prev
		}
		in := protocol.Items{protocol.UserMessage(text)}
		recs = append(recs, &Record{Response: resp, Input: in, Items: append(append(protocol.Items{}, in...), resp.Output...), Chain: chain})
		chain = append(chain[:len(chain):len(chain)], resp.ID)
	}
	return recs
}

// chainMemory is a MemoryStore that is a ChainStore too, as a shared store
// is: it loads a conversation by its records' Chain ids, counting the loads.
type chainMemory struct {
	*MemoryStore
	loads atomic.Int64
}

func (m *chainMemory) GetChain(ctx context.Context, id string) ([]*Record, error) {
	m.loads.Add(1)
	head, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	recs := []*Record{head}
	for i := len(head.Chain) - 1; i >= 0; i-- {
		rec, err := m.Get(ctx, head.Chain[i])
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// TestLoadChain: a conversation of 50 responses loads with every item in
// order, from a store read a record at a time and from a ChainStore in one
// load; a record of another tenant, or one missing from the middle, breaks
// the chain; a record a ChainStore holds without its chain is followed a
// link at a time.
func TestLoadChain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "chain"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := NewMemoryStore(MemoryStoreOptions{})
			var st Store = mem
			cm := &chainMemory{MemoryStore: mem}
			if name == "chain" {
				st = cm
			}
			scoped := scopedStore{st}
			ctx := context.Background()
			recs := chainOf(50, 5000)
			for _, rec := range recs {
				if err := scoped.Put(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			head, items, chain, err := loadChain(ctx, scoped, recs[49].Response.ID)
			if err != nil {
				t.Fatal(err)
			}
			if name == "chain" && cm.loads.Load() != 1 {
				t.Errorf("a chain of 50 took %d loads of the ChainStore, want 1", cm.loads.Load())
			}
			if head.Response.ID != recs[49].Response.ID || len(items) != 100 || len(chain) != 50 || chain[0] != recs[0].Response.ID {
				t.Fatalf("loaded head %s, %d items, chain of %d", head.Response.ID, len(items), len(chain))
			}
			for i, it := range items {
				got, _ := protocol.Marshal(it)
				want, _ := protocol.Marshal(recs[i/2].Items[i%2])
				if !bytes.Equal(got, want) {
					t.Fatalf("item %d: %s, want %s", i, got, want)
				}
			}
			// Another tenant reads none of it.
			other := WithTenant(ctx, "mallory")
			if _, _, _, err := loadChain(other, scoped, recs[49].Response.ID); err != ErrNotStored {
				t.Errorf("another tenant loading the chain: %v", err)
			}
			// A record gone from the middle breaks the chain.
			if err := st.Delete(ctx, recs[20].Response.ID); err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := loadChain(ctx, scoped, recs[49].Response.ID); err != ErrNotStored {
				t.Errorf("a chain with a record deleted: %v", err)
			}
			// A record written without its chain is read a link at a time.
			older := chainOf(3, 100)
			for _, rec := range older {
				rec.Chain = nil
				scoped.Put(ctx, rec)
			}
			if _, items, _, err := loadChain(ctx, scoped, older[2].Response.ID); err != nil || len(items) != 6 {
				t.Errorf("a chain without ids: %d items, %v", len(items), err)
			}
		})
	}
}

// BenchmarkStore: a turn's write and the load of its whole conversation
// (20 turns) at 1k, 10k and 100k tokens of history, in memory (package
// redisstore has Redis's).
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	for _, tokens := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("memory/%dk", tokens/1000), func(b *testing.B) {
			st := scopedStore{NewMemoryStore(MemoryStoreOptions{})}
			recs := chainOf(21, tokens*21/20) // 20 turns of history, and the turn written
			for _, rec := range recs[:20] {
				if err := st.Put(ctx, rec); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("write", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := st.Put(ctx, recs[20]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("load", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, _, err := loadChain(ctx, st, recs[19].Response.ID); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestRecordInputs: a record lists as its inputs the create's input, then
// what the client appended, in context order, without storing them twice.
func TestRecordInputs(t *testing.T) {
	t.Parallel()
	in := protocol.UserMessage("fix it")
	call := &protocol.FunctionCall{ID: "fc_1", CallID: "call_1", Name: "read_file"}
	out := &protocol.FunctionCallOutput{ID: "fco_1", CallID: "call_1"}
	steer := protocol.UserMessage("hurry")
	answer := &protocol.Message{ID: "msg_2", Role: protocol.RoleAssistant}
	rec := &Record{Response: &protocol.Response{Output: protocol.Items{call, answer}}, Input: protocol.Items{in},
		Items: protocol.Items{in, call, out, steer, answer}}
	if got := rec.inputs(); !slices.Equal(got, protocol.Items{in, out, steer}) {
		t.Errorf("inputs %v", got)
	}
	old := &Record{Response: rec.Response, Input: protocol.Items{in}} // before Items were kept
	if got := old.inputs(); !slices.Equal(got, protocol.Items{in}) {
		t.Errorf("an old record's inputs %v", got)
	}
}
