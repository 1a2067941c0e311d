package sampler

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
)

// checkCache asserts the cache's bookkeeping: the token count is the sum of
// the nodes' own tokens, the rings hold exactly the nodes without children,
// each in the order of their use, and every node's parent is held.
func checkCache(t *testing.T, c *PrefixCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	tokens, leaves := 0, 0
	children := map[*prefixNode]int{}
	all := map[*prefixNode]bool{}
	for _, n := range c.roots {
		all[n] = true
	}
	for _, n := range c.nodes {
		all[n] = true
	}
	for n := range all {
		tokens += n.own
		if n.parent != nil {
			if !all[n.parent] {
				t.Fatalf("node of %d tokens has a parent the cache no longer holds", n.total)
			}
			children[n.parent]++
			if n.total != n.parent.total+n.own {
				t.Fatalf("node total %d != parent %d + own %d", n.total, n.parent.total, n.own)
			}
		}
	}
	for i := range c.lru {
		s := &c.lru[i]
		for n := s.next; n != s; n = n.next {
			leaves++
			if n.children != 0 || !all[n] {
				t.Fatalf("ring holds a node with %d children (held: %v)", n.children, all[n])
			}
			if n.next != s && n.next.used < n.used {
				t.Fatalf("ring %d is not in the order of use", i)
			}
		}
	}
	for n := range all {
		if n.children != children[n] {
			t.Fatalf("node counts %d children, has %d", n.children, children[n])
		}
		if n.children == 0 && n.next == nil {
			t.Fatalf("leaf of %d tokens is not in the ring", n.total)
		}
	}
	if tokens != c.tokens || leaves != c.leaves {
		t.Fatalf("cache counts %d tokens, %d leaves; holds %d, %d", c.tokens, c.leaves, tokens, leaves)
	}
}

// convo is a conversation under construction: its items and the Prompt
// extended item by item.
type convo struct {
	instr  string
	items  protocol.Items
	prompt *Prompt
}

func (cv *convo) add(r *Renderer, items ...protocol.Item) *convo {
	next := &convo{instr: cv.instr, items: append(cv.items[:len(cv.items):len(cv.items)], items...), prompt: cv.prompt}
	for _, it := range items {
		next.prompt = next.prompt.Append(r.Item(it))
	}
	return next
}

func (cv *convo) req() *Request {
	return &Request{Instructions: cv.instr, Items: cv.items, Prompt: cv.prompt}
}

// rerendered is the request of stateless HTTP: the same items, rendered
// again into new segments.
func (cv *convo) rerendered(r *Renderer) *Request {
	req := cv.req()
	req.Prompt = nil
	for _, it := range cv.items {
		req.Prompt = req.Prompt.Append(r.Item(it))
	}
	return req
}

func toolOut(id, text string) *protocol.FunctionCallOutput {
	return &protocol.FunctionCallOutput{CallID: id, Output: protocol.ToolOutput{Text: text}}
}

func fnCall(id, name, args string) *protocol.FunctionCall {
	return &protocol.FunctionCall{CallID: id, Name: name, Arguments: args}
}

func TestPrefixCacheMatches(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	base := (&convo{instr: "You are terse."}).add(r, userMsg("list the files"))
	turn2 := base.add(r, fnCall("c1", "ls", "{}"), toolOut("c1", "a.go b.go"))
	turn3 := turn2.add(r, fnCall("c2", "cat", `{"path":"a.go"}`), toolOut("c2", "package a"))
	other := (&convo{instr: "You are terse."}).add(r, userMsg("say hi"))
	fork := turn2.add(r, userMsg("stop and summarize"))
	hdr := len(r.Header("You are terse.", nil))
	n := func(cv *convo) int { return hdr + cv.prompt.Len() }

	tests := []struct {
		name       string
		seed       []*Request // prefilled first, in order
		req        *Request
		wantCached int
	}{
		{"cold", nil, base.req(), 0},
		{"same prompt again", []*Request{base.req()}, base.req(), n(base)},
		{"extended prompt", []*Request{base.req()}, turn2.req(), n(base)},
		{"re-rendered prompt", []*Request{base.req()}, turn2.rerendered(r), n(base)},
		{"nil prompt", []*Request{base.req()}, &Request{Instructions: base.instr, Items: turn2.items}, n(base)},
		{"cached by re-rendered, read extended", []*Request{base.rerendered(r), turn2.rerendered(r)}, turn3.req(), n(turn2)},
		{"a prefix of a held prompt", []*Request{turn3.req()}, base.rerendered(r), n(base)},
		{"shared system block only", []*Request{base.req()}, other.req(), hdr},
		{"fork after turn 2", []*Request{turn3.req()}, fork.req(), n(turn2)},
		{"other instructions", []*Request{turn3.req()}, (&convo{instr: "You are verbose.", items: turn3.items, prompt: turn3.prompt}).req(), 0},
		{"other tools", []*Request{turn3.req()}, &Request{Instructions: turn3.instr, Items: turn3.items, Prompt: turn3.prompt,
			Tools: []protocol.Tool{fnTool("ls", `{"type":"object"}`)}}, 0},
		{"other tool parameters", []*Request{{Instructions: "i", Items: turn2.items, Prompt: turn2.prompt,
			Tools: []protocol.Tool{fnTool("ls", `{"type":"object"}`)}}}, &Request{Instructions: "i", Items: turn2.items, Prompt: turn2.prompt,
			Tools: []protocol.Tool{fnTool("ls", `{"type":"object","properties":{}}`)}}, 0},
		{"other cache key", []*Request{turn3.req()}, &Request{Instructions: turn3.instr, Items: turn3.items, Prompt: turn3.prompt, CacheKey: "trial-2"}, 0},
		{"same cache key", []*Request{{Instructions: base.instr, Items: base.items, Prompt: base.prompt, CacheKey: "k"}},
			&Request{Instructions: turn2.instr, Items: turn2.items, Prompt: turn2.prompt, CacheKey: "k"}, n(base)},
		{"empty items are no boundary", []*Request{turn2.req()}, &Request{Instructions: turn2.instr, Items: turn2.items,
			Prompt: turn2.prompt.Append(nil).Append(nil)}, n(turn2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewPrefixCache(r, PrefixCacheOptions{})
			for _, req := range tt.seed {
				c.Prefill(req)
			}
			prompt, cached := c.Prefill(tt.req)
			want := len(r.Header(tt.req.Instructions, tt.req.Tools))
			for _, it := range tt.req.Items {
				want += len(r.Item(it))
			}
			if prompt != want || cached != tt.wantCached {
				t.Errorf("Prefill = %d, %d cached; want %d, %d cached", prompt, cached, want, tt.wantCached)
			}
			if _, again := c.Prefill(tt.req); again != prompt {
				t.Errorf("the same request again: %d cached, want all %d", again, prompt)
			}
			checkCache(t, c)
		})
	}
}

// TestPrefixCacheConfigure: Configure empties the cache, and a negative
// MaxTokens turns it off.
func TestPrefixCacheConfigure(t *testing.T) {
	r := renderer(t)
	req := (&convo{instr: "i"}).add(r, userMsg("hello")).req()
	c := NewPrefixCache(r, PrefixCacheOptions{})
	c.Prefill(req)
	if _, cached := c.Prefill(req); cached == 0 {
		t.Fatal("the cache held nothing")
	}
	c.Configure(PrefixCacheOptions{})
	if _, cached := c.Prefill(req); cached != 0 {
		t.Errorf("after Configure: %d cached, want 0", cached)
	}
	c.Configure(PrefixCacheOptions{MaxTokens: -1})
	for range 2 {
		if _, cached := c.Prefill(req); cached != 0 {
			t.Errorf("off: %d cached, want 0", cached)
		}
	}
}

// TestPrefixCacheEviction fills small caches and checks which conversations
// survive: the least recently used goes first, back to where it forks.
func TestPrefixCacheEviction(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	root := &convo{instr: "sys"}
	convs := make([]*convo, 3)
	for i := range convs {
		convs[i] = root.add(r, userMsg("task "+strconv.Itoa(i)+" with some words in it"))
		convs[i] = convs[i].add(r, fnCall("c", "f", "{}"), toolOut("c", "result of the task"))
	}
	hdr := len(r.Header("sys", nil))
	whole := hdr + convs[0].prompt.Len()

	t.Run("by conversations", func(t *testing.T) {
		t.Parallel()
		c := NewPrefixCache(r, PrefixCacheOptions{MaxConversations: 2})
		c.Prefill(convs[0].req())
		c.Prefill(convs[1].req())
		c.Prefill(convs[0].req()) // 0 used again: 1 is now the oldest
		c.Prefill(convs[2].req())
		if st := c.Stats(); st.Conversations != 2 {
			t.Errorf("%d conversations held, want 2", st.Conversations)
		}
		checkCache(t, c)
		if _, cached := c.Prefill(convs[0].req()); cached != whole {
			t.Errorf("conversation 0 (recently used): %d cached, want %d", cached, whole)
		}
		if _, cached := c.Prefill(convs[1].req()); cached != hdr {
			t.Errorf("conversation 1 (evicted): %d cached, want the system block's %d", cached, hdr)
		}
		checkCache(t, c)
	})
	t.Run("by tokens", func(t *testing.T) {
		t.Parallel()
		c := NewPrefixCache(r, PrefixCacheOptions{MaxTokens: whole + whole/2})
		c.Prefill(convs[0].req())
		c.Prefill(convs[1].req()) // shares the system block, but two conversations exceed the bound
		st := c.Stats()
		if st.Conversations != 1 || st.Tokens != hdr+convs[1].prompt.Len() {
			t.Errorf("holds %+v, want conversation 1 alone (%d tokens)", st, whole)
		}
		checkCache(t, c)
		if _, cached := c.Prefill(convs[0].req()); cached != hdr {
			t.Errorf("conversation 0 after eviction: %d cached, want the shared system block's %d", cached, hdr)
		}
		checkCache(t, c)
	})
	t.Run("by boundaries", func(t *testing.T) {
		t.Parallel()
		bounds := convs[0].prompt.Items() // each conversation's, none shared but the system block
		c := NewPrefixCache(r, PrefixCacheOptions{MaxBoundaries: 2*bounds + 1})
		for i := range 3 {
			c.Prefill(convs[i].req())
		}
		if st := c.Stats(); st.Conversations != 2 || st.Boundaries != 2*bounds {
			t.Errorf("holds %+v, want conversations 1 and 2 (%d boundaries)", st, 2*bounds)
		}
		checkCache(t, c)
		if _, cached := c.Prefill(convs[0].req()); cached != hdr {
			t.Errorf("conversation 0 after eviction: %d cached, want the shared system block's %d", cached, hdr)
		}
		checkCache(t, c)
	})
	t.Run("nothing held", func(t *testing.T) {
		t.Parallel()
		c := NewPrefixCache(r, PrefixCacheOptions{MaxTokens: -1})
		for range 2 {
			if _, cached := c.Prefill(convs[0].req()); cached != 0 {
				t.Errorf("%d cached, want 0", cached)
			}
		}
		if st := c.Stats(); st != (PrefixCacheStats{}) {
			t.Errorf("holds %+v, want nothing", st)
		}
		checkCache(t, c)
	})
	t.Run("reset", func(t *testing.T) {
		t.Parallel()
		c := NewPrefixCache(r, PrefixCacheOptions{})
		c.Prefill(convs[0].req())
		c.Reset()
		if _, cached := c.Prefill(convs[0].req()); cached != 0 {
			t.Errorf("%d cached after Reset, want 0", cached)
		}
		checkCache(t, c)
	})
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestPrefixCacheRetention: a conversation is kept as its latest request's
// prompt_cache_retention asks, by the cache's clock. An in_memory one goes
// once idle for InMemoryRetention; a 24h one (or one whose request asked
// for none) 24 hours after its last use, each use renewing it; a bound
// evicts in_memory conversations before 24h ones, whatever their age.
func TestPrefixCacheRetention(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	root := &convo{instr: "sys"}
	conv := func(i int) *convo {
		return root.add(r, userMsg("task "+strconv.Itoa(i)+" with some words in it"), fnCall("c", "f", "{}"), toolOut("c", "done"))
	}
	whole := len(r.Header("sys", nil)) + conv(0).prompt.Len()
	kept := func(retention string, i int) *Request {
		req := conv(i).req()
		req.CacheRetention = retention
		return req
	}
	type step struct {
		after     time.Duration // since the step before
		retention string
		conv      int
		cached    int // what its Prefill finds cached
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"in_memory kept while used", []step{
			{0, protocol.CacheInMemory, 0, 0},
			{9 * time.Minute, protocol.CacheInMemory, 0, whole},
			{9 * time.Minute, protocol.CacheInMemory, 0, whole},
		}},
		{"in_memory gone once idle", []step{
			{0, protocol.CacheInMemory, 0, 0},
			{DefaultInMemoryRetention, protocol.CacheInMemory, 0, 0},
		}},
		{"24h kept past in_memory's", []step{
			{0, protocol.Cache24h, 0, 0},
			{23 * time.Hour, protocol.Cache24h, 0, whole},
			{23 * time.Hour, protocol.Cache24h, 0, whole},
		}},
		{"24h gone after 24 hours", []step{
			{0, protocol.Cache24h, 0, 0},
			{24 * time.Hour, protocol.Cache24h, 0, 0},
		}},
		{"none asked is 24h", []step{
			{0, "", 0, 0},
			{time.Hour, "", 0, whole},
			{24 * time.Hour, "", 0, 0},
		}},
		{"the latest request decides", []step{
			{0, protocol.Cache24h, 0, 0},
			{0, protocol.CacheInMemory, 0, whole},
			{DefaultInMemoryRetention, protocol.Cache24h, 0, 0},
		}},
		{"in_memory evicted first", []step{ // a bound of 2 conversations
			{0, protocol.Cache24h, 0, 0},
			{time.Second, protocol.CacheInMemory, 1, len(r.Header("sys", nil))},
			{time.Second, protocol.Cache24h, 2, len(r.Header("sys", nil))},
			{time.Second, protocol.Cache24h, 0, whole}, // the oldest, kept
			{time.Second, protocol.Cache24h, 1, len(r.Header("sys", nil))},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
			c := NewPrefixCache(r, PrefixCacheOptions{MaxConversations: 2, Now: clock.now})
			for i, st := range tc.steps {
				clock.advance(st.after)
				if _, cached := c.Prefill(kept(st.retention, st.conv)); cached != st.cached {
					t.Fatalf("step %d (%q, conversation %d): %d cached, want %d", i, st.retention, st.conv, cached, st.cached)
				}
				checkCache(t, c)
			}
		})
	}
	t.Run("stats", func(t *testing.T) {
		t.Parallel()
		clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		c := NewPrefixCache(r, PrefixCacheOptions{InMemoryRetention: time.Minute, Now: clock.now})
		c.Prefill(kept(protocol.CacheInMemory, 0))
		c.Prefill(kept(protocol.Cache24h, 1))
		clock.advance(time.Minute)
		if st := c.Stats(); st.Conversations != 1 {
			t.Errorf("a minute on: %d conversations held, want the 24h one", st.Conversations)
		}
		clock.advance(Retention24h)
		if st := c.Stats(); st != (PrefixCacheStats{}) {
			t.Errorf("a day on: holds %+v, want nothing", st)
		}
		checkCache(t, c)
	})
}

// TestPrefixCacheConcurrent prefills conversations from many goroutines, as
// the lanes of many connections do.
func TestPrefixCacheConcurrent(t *testing.T) {
	t.Parallel()
	r := renderer(t)
	c := NewPrefixCache(r, PrefixCacheOptions{MaxConversations: 5})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			cv := (&convo{instr: "sys"}).add(r, userMsg("conversation "+strconv.Itoa(g%4)))
			for turn := range 20 {
				id := "c" + strconv.Itoa(turn)
				cv = cv.add(r, fnCall(id, "f", "{}"), toolOut(id, "out "+strconv.Itoa(turn)))
				req := cv.req()
				if turn%2 == 1 {
					req = cv.rerendered(r)
				}
				if prompt, cached := c.Prefill(req); cached > prompt {
					t.Errorf("%d cached of %d", cached, prompt)
				}
			}
		})
	}
	wg.Wait()
	checkCache(t, c)
}

// TestPrefixCacheHeldAllocs: reading a prompt the cache holds already
// allocates nothing, whatever its length.
func TestPrefixCacheHeldAllocs(t *testing.T) {
	r := renderer(t)
	cv := &convo{instr: "sys"}
	for i := range 200 {
		cv = cv.add(r, userMsg("message "+strconv.Itoa(i)))
	}
	c := NewPrefixCache(r, PrefixCacheOptions{})
	req := cv.req()
	c.Prefill(req)
	if allocs := testing.AllocsPerRun(100, func() { c.Prefill(req) }); allocs != 0 {
		t.Errorf("Prefill of a held prompt allocates %v times, want 0", allocs)
	}
}

// TestPrefixCacheHeaderOnce: a system block is rendered once for its
// instructions and tools, whatever the keys, and though its root is
// evicted: here every Prefill finds its root gone (one conversation held,
// two keys taking turns) and counts the block's tokens without rendering
// it (rendering the tools allocates, tokenizing them more).
func TestPrefixCacheHeaderOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	r := renderer(t)
	tools := []protocol.Tool{fnTool("read_file", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}
	cv := (&convo{instr: "You are a coding agent."}).add(r, userMsg("Fix the build."))
	c := NewPrefixCache(r, PrefixCacheOptions{MaxConversations: 1})
	a, b := cv.req(), cv.req()
	a.CacheKey, b.CacheKey = "a", "b"
	a.Tools, b.Tools = tools, tools
	want := len(r.Header(cv.instr, tools)) + a.Prompt.Len()
	if got, _ := c.Prefill(a); got != want {
		t.Fatalf("prompt %d, want %d", got, want)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if got, cached := c.Prefill(b); got != want || cached != 0 {
			t.Fatalf("prompt %d (%d cached), want %d, none cached", got, cached, want)
		}
		a, b = b, a
	})
	if allocs > 4 {
		t.Errorf("a Prefill whose root was evicted allocates %v times: the system block rendered again", allocs)
	}
	checkCache(t, c)
}

// TestPromptHash: the hash at a boundary depends on the tokens before it
// only, not on how they are split into items.
func TestPromptHash(t *testing.T) {
	t.Parallel()
	var empty *Prompt
	a := empty.Append([]Token{1, 2, 3}).Append([]Token{4})
	b := empty.Append([]Token{1}).Append(nil).Append([]Token{2, 3, 4})
	c := empty.Append([]Token{1, 2, 3}).Append([]Token{5})
	d := empty.Append([]Token{4, 3, 2, 1})
	if a.hash() != b.hash() {
		t.Errorf("same tokens, other split: %x != %x", a.hash(), b.hash())
	}
	for _, other := range []*Prompt{c, d, a.parent, empty} {
		if other.hash() == a.hash() {
			t.Errorf("different tokens hash the same: %v and %v", other.All(), a.All())
		}
	}
}

// BenchmarkPrefill measures a turn's lookup and insertion: one new item
// after histories of growing length. The cost must not grow with the
// history. (A re-rendered history costs the same lookups: the walk stops at
// the first boundary held, whichever Prompt holds it.)
func BenchmarkPrefill(b *testing.B) {
	r := renderer(b)
	for _, history := range []int{10, 10000} {
		var base *Prompt
		for i := range history {
			base = base.Append(r.Item(userMsg("history message " + strconv.Itoa(i))))
		}
		const forks = 1024
		next := make([]*Request, forks)
		for i := range next {
			next[i] = &Request{Instructions: "sys", Prompt: base.Append(r.Item(userMsg("new message " + strconv.Itoa(i))))}
		}
		b.Run("history="+strconv.Itoa(history), func(b *testing.B) {
			c := NewPrefixCache(r, PrefixCacheOptions{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%forks == 0 {
					b.StopTimer()
					c.Reset()
					c.Prefill(&Request{Instructions: "sys", Prompt: base})
					b.StartTimer()
				}
				if _, cached := c.Prefill(next[i%forks]); cached == 0 {
					b.Fatal("the history is not cached")
				}
				i++
			}
		})
	}
}
