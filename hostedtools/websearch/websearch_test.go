package websearch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tether-run/tether/protocol"
)

// fakeSearcher returns fixed sources, or err, or blocks until ctx is done.
type fakeSearcher struct {
	sources []protocol.WebSearchSource
	err     error
	block   bool

	mu    sync.Mutex
	calls []string // "query/limit", guarded by mu
}

func (f *fakeSearcher) Search(ctx context.Context, query string, limit int) ([]protocol.WebSearchSource, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%d", query, limit))
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.sources, f.err
}

// recorder collects the types of emitted events.
type recorder struct {
	mu     sync.Mutex
	events []protocol.EventType
}

func (r *recorder) emit(e protocol.Event) {
	ev, ok := e.(*protocol.WebSearchCallEvent)
	if !ok {
		panic(fmt.Sprintf("emitted %T, want *protocol.WebSearchCallEvent", e))
	}
	if ev.SequenceNumber != 0 || ev.ItemID != "" || ev.OutputIndex != 0 {
		panic(fmt.Sprintf("tool stamped %+v; the rollout stamps sequence_number, item_id and output_index", ev))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev.Type)
}

func (r *recorder) types() []protocol.EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func searchCall(args string) protocol.Call {
	return protocol.Call{Type: protocol.ItemFunctionCall, ID: "ws_1", CallID: "call_1", Name: "web_search", Input: args}
}

var (
	allEvents = []protocol.EventType{protocol.EventWebSearchInProgress, protocol.EventWebSearchSearching, protocol.EventWebSearchCompleted}
	noResult  []protocol.EventType
)

func TestWebSearchDefinition(t *testing.T) {
	t.Parallel()
	if got := New(&fakeSearcher{}).Definition(); got.Type != protocol.ToolWebSearch {
		t.Errorf("Definition().Type = %q, want %q", got.Type, protocol.ToolWebSearch)
	}
	var _ Searcher = (*Index)(nil)
	var _ Searcher = (*SearXNG)(nil)
}

func TestWebSearchCall(t *testing.T) {
	t.Parallel()
	sources := []protocol.WebSearchSource{
		{Type: "url", URL: "https://a.test", Title: "A", Snippet: "a"},
		{Type: "url", URL: "https://b.test", Title: "B", Snippet: "b"},
	}
	tests := []struct {
		name      string
		searcher  *fakeSearcher
		args      string
		wantQuery string
		wantN     int
	}{
		{"sources", &fakeSearcher{sources: sources}, `{"query":"go maps"}`, "go maps", 2},
		{"trimmed query, extra fields ignored", &fakeSearcher{sources: sources}, `{"query":"  go maps \n","type":"search"}`, "go maps", 2},
		{"no results is still completed", &fakeSearcher{}, `{"query":"nothing"}`, "nothing", 0},
		{"too many results are cut", &fakeSearcher{sources: slices.Repeat(sources, 4)}, `{"query":"many"}`, "many", SearchLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			item, err := New(tt.searcher).Call(context.Background(), searchCall(tt.args), rec.emit)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.types(); !slices.Equal(got, allEvents) {
				t.Errorf("events = %v, want %v", got, allEvents)
			}
			call, ok := item.(*protocol.WebSearchCall)
			if !ok {
				t.Fatalf("item is %T, want *protocol.WebSearchCall", item)
			}
			if call.ID != "ws_1" || call.Status != protocol.StatusCompleted || call.Action == nil {
				t.Fatalf("item = %+v, want id ws_1, status completed and an action", call)
			}
			if a := call.Action; a.Type != "search" || a.Query != tt.wantQuery || len(a.Sources) != tt.wantN {
				t.Errorf("action = %+v, want search %q with %d sources", a, tt.wantQuery, tt.wantN)
			}
			if want := []string{tt.wantQuery + "/5"}; !slices.Equal(tt.searcher.calls, want) {
				t.Errorf("searcher calls = %v, want %v", tt.searcher.calls, want)
			}
		})
	}
}

func TestWebSearchCallOverIndex(t *testing.T) {
	t.Parallel()
	ws := New(newTestIndex(t, smallCorpus))
	var rec recorder
	item, err := ws.Call(context.Background(), searchCall(`{"query":"how to bake bread"}`), rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.types(); !slices.Equal(got, allEvents) {
		t.Errorf("events = %v, want %v", got, allEvents)
	}
	call := item.(*protocol.WebSearchCall)
	if len(call.Action.Sources) == 0 || call.Action.Sources[0].URL != "https://example.test/bread" {
		t.Fatalf("sources = %v, want the bread document first", urls(call.Action.Sources))
	}
	for _, s := range call.Action.Sources {
		checkSource(t, s)
	}
}

func TestWebSearchBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range []string{"", "not json", "[]", "null", `"query"`, `{}`, `{"query":""}`, `{"query":"  \t"}`, `{"query":5}`, `{"q":"go"}`} {
		t.Run(args, func(t *testing.T) {
			t.Parallel()
			s := &fakeSearcher{}
			var rec recorder
			item, err := New(s).Call(context.Background(), searchCall(args), rec.emit)
			if !errors.Is(err, ErrInvalidArguments) || item != nil {
				t.Fatalf("Call(%q) = %v, %v; want ErrInvalidArguments", args, item, err)
			}
			if len(rec.types()) != 0 || len(s.calls) != 0 {
				t.Errorf("Call(%q) emitted %v and searched %v; want neither", args, rec.types(), s.calls)
			}
		})
	}
}

func TestWebSearchFailures(t *testing.T) {
	t.Parallel()
	searchErr := errors.New("engine down")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		searcher   *fakeSearcher
		wantErr    error
		wantEvents []protocol.EventType
	}{
		{"search error", context.Background(), &fakeSearcher{err: searchErr}, searchErr, allEvents[:2]},
		{"cancelled before", cancelled, &fakeSearcher{}, context.Canceled, noResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			item, err := New(tt.searcher).Call(tt.ctx, searchCall(`{"query":"q"}`), rec.emit)
			if !errors.Is(err, tt.wantErr) || item != nil {
				t.Fatalf("Call = %v, %v; want %v", item, err, tt.wantErr)
			}
			if got := rec.types(); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events = %v, want %v", got, tt.wantEvents)
			}
		})
	}
}

func TestWebSearchCancelledWhileSearching(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var rec recorder
		var err error
		returned := false
		go func() {
			_, err = New(&fakeSearcher{block: true}).Call(ctx, searchCall(`{"query":"slow"}`), rec.emit)
			returned = true
		}()
		synctest.Wait() // Call is blocked in Search
		if returned {
			t.Fatal("Call returned before its search finished")
		}
		if got := rec.types(); !slices.Equal(got, allEvents[:2]) {
			t.Errorf("events while searching = %v, want %v", got, allEvents[:2])
		}
		cancel()
		synctest.Wait()
		if !returned || !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: returned %v, err %v; want context.Canceled", returned, err)
		}
		if got := rec.types(); !slices.Equal(got, allEvents[:2]) {
			t.Errorf("events = %v, want no completed event: %v", got, allEvents[:2])
		}
	})
}

func TestWebSearchConcurrent(t *testing.T) {
	t.Parallel()
	ws := New(newTestIndex(t, smallCorpus))
	queries := []string{"bread", "fish", "sort slices", "parse query"}
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(queries))
	for i := range 4 * len(queries) {
		wg.Go(func() {
			q := queries[i%len(queries)]
			item, err := ws.Call(context.Background(), searchCall(fmt.Sprintf(`{"query":%q}`, q)), func(protocol.Event) {})
			if err == nil && len(item.(*protocol.WebSearchCall).Action.Sources) == 0 {
				err = fmt.Errorf("%q: no sources", q)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
