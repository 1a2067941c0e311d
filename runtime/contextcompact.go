package runtime

import (
	"context"
	"net/http"
	"slices"

	"github.com/tether-run/tether/runtime/internal/ids"
	"github.com/tether-run/tether/runtime/internal/seal"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// Server-side compaction (context_management on response.create): before a
// step, when the rendered context (instructions, tools and items) has
// passed compact_threshold tokens, the rollout seals the context so far
// into one compaction item (created_by "context_management"), sends it as
// an output item (output_item.added, response.compaction.compacting,
// output_item.done), and from then on reads the compaction item in place
// of what it seals: the prompt is rendered again from it, a few tokens,
// and the prefix cached before it is of no more use. The simulated models
// lose nothing by it: their policy reads the context the compaction stands
// for (modelItems), as a model carries forward what it needs; what
// compaction changes here is the tokens read, which is what its effect on
// latency is. A continuation reads from the latest such item too
// (connection cache, store, a stateless client that sends it back, a
// suspended rollout restored), and never opens it into its items again.
// The item stands for the whole context before it; how it holds that
// (the items since the previous compaction and a reference to a segment
// the server keeps), and how it is opened, is contextsegments.go's.

// contextCompaction is the created_by of a compaction item made by
// context_management.
const contextCompaction = "context_management"

// isContextCompaction reports whether it is a compaction item made by
// context_management.
func isContextCompaction(it protocol.Item) bool {
	c, ok := it.(*protocol.Compaction)
	return ok && c.CreatedBy == contextCompaction
}

// window is where a context reads from: the latest context compaction
// item, items[n-1] of the context (n is 0 when there is none: the zero
// window reads every item), and the items it stands for. It is immutable:
// contexts, and the server's window cache, share it.
type window struct {
	n     int
	items protocol.Items
	// chain is the segments the item refers to, newest first: the
	// reference it holds, then the one each segment holds
	// (contextsegments.go); nil when the item holds its window whole.
	chain []seal.Ref
	// bytes are the sealed bytes the window was opened from, or sealed
	// into: what the window cache counts it as.
	bytes int
}

// windowOf finds the latest context compaction of items at or after from,
// and opens it under tenant; the zero window when there is none.
func (s *Server) windowOf(ctx context.Context, tenant string, items protocol.Items, from int, param string) (window, *protocol.Error) {
	for i := len(items) - 1; i >= from; i-- {
		if isContextCompaction(items[i]) {
			w, perr := s.openWindow(ctx, tenant, items[i].(*protocol.Compaction), protocol.IndexParam(param, i)+".encrypted_content")
			if perr != nil {
				return window{}, perr
			}
			w.n = i + 1
			return w, nil
		}
	}
	return window{}, nil
}

// start is the index of the first item the context reads: its latest
// context compaction, or 0.
func (w window) start() int { return max(w.n-1, 0) }

// renderFrom renders what a context with window w reads of items.
func (s *Server) renderFrom(items protocol.Items, w window) *sampler.Prompt {
	var p *sampler.Prompt
	for _, it := range items[w.start():] {
		p = p.Append(s.renderer.Item(it))
	}
	return p
}

// rebuildPrompt is the prompt of a state read back from a journal, which a
// context with window w reads: the tokens its snapshot kept, when they are
// of the items w renders from, then those of the items since, rendered;
// otherwise every item rendered again.
func (s *Server) rebuildPrompt(ps *pauseState, w window) *sampler.Prompt {
	items := ps.Items[:ps.Rendered]
	p := ps.packed
	if p == nil || p.from != w.start() || p.from+len(p.segments) > len(items) {
		return s.renderFrom(items, w)
	}
	var prompt *sampler.Prompt
	for _, seg := range p.segments {
		var err error
		if p.counted {
			prompt, err = prompt.AppendSegment(seg)
		} else {
			prompt, err = prompt.AppendPacked(seg.Packed)
		}
		if err != nil {
			return s.renderFrom(items, w)
		}
	}
	for _, it := range items[p.from+len(p.segments):] {
		prompt = prompt.Append(s.renderer.Item(it))
	}
	if verifyJournal && !prompt.Equal(s.renderFrom(items, w)) {
		panic("runtime: the prompt a journal kept is not the one its items render")
	}
	return prompt
}

// modelItems is the context as the model reads it: the items the latest
// context compaction stands for, then what followed it.
func (r *rollout) modelItems() protocol.Items {
	if r.win.n == 0 {
		return r.items
	}
	return append(slices.Clip(r.win.items), r.items[r.win.n:]...)
}

// compactIfDue compacts the context before a step when it has passed the
// request's compact_threshold and at least half the threshold has come
// since its latest compaction (a large system block alone does not make
// every step compact again).
func (r *rollout) compactIfDue(ctx context.Context) error {
	threshold := r.req.CompactThreshold()
	if threshold == 0 || len(r.header)+r.prompt.Len() <= threshold || len(r.items) == r.win.n {
		return nil
	}
	r.renderPending()
	if r.win.n > 0 && r.prompt.Len()-len(r.srv.renderer.Item(r.items[r.win.n-1])) < threshold/2 {
		return nil
	}
	if r.compactions >= r.srv.opts.Limits.MaxCompactions {
		r.capped = "max_compactions" // the response ends before its next step
		return nil
	}
	content, next, err := r.sealContext(ctx, r.modelItems())
	if err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.CodeServerError, "", "Could not compact the context: %v.", err)
	}
	r.mu.Lock()
	var cmp *protocol.Compaction
	idx := r.placeLocked(func(idx int) protocol.Item {
		cmp = &protocol.Compaction{ID: ids.Output(r.resp.ID, "cmp", idx), EncryptedContent: content, CreatedBy: contextCompaction}
		return cmp
	})
	r.emitLocked(&protocol.OutputItemEvent{EventHeader: protocol.EventHeader{Type: protocol.EventOutputItemAdded}, OutputIndex: idx, Item: cmp})
	r.emitLocked(&protocol.CompactionCompactingEvent{EventHeader: protocol.EventHeader{Type: protocol.EventCompactionCompacting}, ItemID: cmp.ID, OutputIndex: idx})
	r.itemDoneLocked(idx, cmp)
	r.mu.Unlock()
	r.items = append(r.items, cmp)
	next.n = len(r.items)
	r.win = next
	r.srv.windows.put(r.tenant, sealedKey(content), next) // a stateless client's next turn sends the item back
	r.compactions++
	r.outBytes += int64(len(content))
	t0 := r.srv.now()
	r.prompt = r.srv.renderFrom(r.items, r.win)
	r.rendered = len(r.items)
	r.tm.RenderedTokens += r.prompt.Len()
	r.tm.RenderMicros += r.srv.now().Sub(t0).Microseconds()
	return nil
}
