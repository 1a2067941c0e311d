package runtime

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/seal"
	"github.com/tether-run/tether/sampler"
)

// conversation is the state one response leaves for its successor: what the
// connection-local cache holds per lane, and what a store load rebuilds. It is
// immutable once published, so forks from two lanes can share it.
type conversation struct {
	response *protocol.Response // terminal snapshot
	items    protocol.Items     // whole context: every input and output up to and including this response
	prompt   *sampler.Prompt    // items rendered to tokens
	rendered int                // tokens of prompt rendered to rebuild it from the store (0 when cached)
	chain    []string           // the stored responses its items came from, oldest first (see Record.Chain)
	// steered is the response.steer input the response ended holding (it
	// completed on calls its client answers): the first create that
	// continues it on this connection takes it (steeredInput).
	steered atomic.Pointer[protocol.Items]
	win     window // the latest context compaction of items, which it reads from

	// The rendered system block, reused while instructions and tools stay the same.
	instructions string
	tools        []protocol.Tool
	header       []sampler.Token
}

// bytes estimates what the conversation holds in memory, for the
// connection's Limits.CacheBytes: about 4 bytes of item text and 4 of token per
// rendered token. It costs nothing to compute, and conversations of one
// chain share most of it, so it errs on the safe side.
func (c *conversation) bytes() int { return 8 * (c.prompt.Len() + len(c.header)) }

// sameTools reports whether two tool lists are byte-for-byte the same definitions.
func sameTools(a, b []protocol.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y protocol.Tool) bool {
		return x.Type == y.Type && x.Name == y.Name && bytes.Equal(x.Raw, y.Raw)
	})
}

// hydrate rebuilds a conversation from the store: the cold path of an HTTP
// chained request, or of a WebSocket continuation whose id is not cached. It
// decodes nothing (records hold decoded items) but renders the whole
// context, unless the record kept its tokens (Options.StoreTokens) or
// render is false: a multi-agent request renders its agents' contexts
// itself (agents_http.go).
func (s *Server) hydrate(ctx context.Context, id string, render bool) (*conversation, *protocol.Error) {
	head, items, chain, err := loadChain(ctx, s.store, id)
	if err != nil {
		if errors.Is(err, ErrNotStored) {
			return nil, previousNotFound(id)
		}
		return nil, protocol.AsError(err)
	}
	if perr := notInConversation(head.Response); perr != nil {
		return nil, perr
	}
	items, _, perr := s.expand(items, nil, "input", nil)
	if perr != nil {
		return nil, perr
	}
	conv := &conversation{response: head.Response, items: items, chain: chain}
	if conv.win, perr = s.windowOf(ctx, Tenant(ctx), items, 0, "previous_response_id"); perr != nil {
		return nil, perr
	}
	if s.opts.StoreTokens {
		conv.prompt = head.Prompt
	}
	if conv.prompt == nil && render {
		conv.prompt = s.renderFrom(items, conv.win)
		conv.rendered = conv.prompt.Len()
	}
	return conv, nil
}

// errItemNotFound: an item_reference to an item neither the conversation
// nor the store holds, answered as OpenAI answers it.
func errItemNotFound(id, param string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, "", param,
		"Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", id)
}

// findItemFunc finds a stored item by id: nil when there is none.
type findItemFunc func(id string) (protocol.Item, *protocol.Error)

// storedItems finds items by id in the store (ItemStore), under ctx's
// tenant; nil when the server has no store that can.
func (s *Server) storedItems(ctx context.Context) findItemFunc {
	st, ok := s.store.(scopedStore)
	if _, can := st.Store.(ItemStore); !ok || !can {
		return nil
	}
	return func(id string) (protocol.Item, *protocol.Error) {
		rec, err := st.GetItemRecord(ctx, id)
		switch {
		case errors.Is(err, ErrNotStored):
			return nil, nil
		case err != nil:
			return nil, protocol.AsError(err) // a store's errors are StoreUnavailable
		}
		return findItem(rec.added(), id), nil
	}
}

func previousNotFound(id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodePreviousResponseNotFound, "previous_response_id",
		"Previous response with id '%s' not found.", id)
}

// expand replaces compaction items by the items they seal and item references
// by the items they name: earlier in the input, in ctxItems, then by find
// (nil: nowhere else), which looks in the store. from holds, for each item
// it returns, the index in input it came from (nil: input itself).
func (s *Server) expand(input, ctxItems protocol.Items, param string, find findItemFunc) (_ protocol.Items, from []int, _ *protocol.Error) {
	need := false
	for _, it := range input {
		switch it.(type) {
		case *protocol.Compaction, *protocol.ItemReferenceItem:
			need = true
		}
	}
	if !need {
		return input, nil, nil
	}
	out := make(protocol.Items, 0, len(input))
	from = make([]int, 0, len(input))
	var refs *references // made at the first reference
	for i, it := range input {
		n := len(out)
		switch it := it.(type) {
		case *protocol.Compaction:
			if it.CreatedBy == contextCompaction { // read from, never opened into the context (contextcompact.go)
				out = append(out, it)
				break
			}
			at := protocol.IndexParam(param, i) + ".encrypted_content"
			sealed, perr := s.sealer.Open(it.EncryptedContent, at)
			if perr == nil && sealed.Prev != nil {
				// Only a context compaction refers to a segment: this
				// one's created_by was changed.
				perr = seal.Unverified(at)
			}
			if perr != nil {
				return nil, nil, perr
			}
			out = append(out, sealed.Items...)
		case *protocol.ItemReferenceItem:
			if refs == nil {
				refs = newReferences(param, s.opts.Limits.MaxFrame)
				refs.index(ctxItems)
				refs.index(out)
			}
			ref := refs.earlier[it.ID]
			if ref == nil && find != nil {
				var perr *protocol.Error
				if ref, perr = find(it.ID); perr != nil {
					return nil, nil, perr
				}
			}
			if ref == nil {
				return nil, nil, errItemNotFound(it.ID, param)
			}
			if perr := refs.count(i, ref); perr != nil {
				return nil, nil, perr
			}
			out = append(out, ref)
		default:
			out = append(out, it)
		}
		if refs != nil {
			refs.index(out[n:])
		}
		for range len(out) - n {
			from = append(from, i)
		}
	}
	return out, from, nil
}

func findItem(items protocol.Items, id string) protocol.Item {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].ItemID() == id {
			return items[i]
		}
	}
	return nil
}

// checkOutputs checks that every output item of input answers a call of
// its type: the newest such call before it in input, else in ctx. It is
// linear: one pass over input with its calls indexed by id, then ctx read
// from its newest item only as far back as the oldest call still wanted
// (usually the last step's). The first output in input order that fails
// is the error, named by its index in the request: from[i] for input[i]
// (nil: i), as expand returns it.
func checkOutputs(input protocol.Items, from []int, ctx protocol.Items) *protocol.Error {
	type output struct {
		i       int
		callID  string
		answers protocol.ItemType
		call    protocol.Call
		found   bool
	}
	var outs []output
	seen := map[string]protocol.Call{} // calls of input so far, by call_id (and a local shell call's id)
	want := map[string]bool{}          // call ids looked for in ctx
	for i, it := range input {
		if c, ok := protocol.CallOf(it); ok {
			for _, id := range c.Names() {
				seen[id] = c
			}
			continue
		}
		callID, answers, ok := protocol.AnswerOf(it)
		if !ok {
			continue
		}
		c, found := seen[callID]
		if !found {
			want[callID] = true
		}
		outs = append(outs, output{i, callID, answers, c, found})
	}
	got := map[string]protocol.Call{}
	for k := len(ctx) - 1; k >= 0 && len(got) < len(want); k-- {
		c, ok := protocol.CallOf(ctx[k])
		if !ok {
			continue
		}
		for _, id := range c.Names() {
			if _, have := got[id]; want[id] && !have {
				got[id] = c
			}
		}
	}
	for _, o := range outs {
		if !o.found {
			o.call, o.found = got[o.callID]
		}
		at := o.i
		if from != nil {
			at = from[o.i]
		}
		switch {
		case !o.found:
			return protocol.Invalid(protocol.CodeToolCallNotFound, protocol.IndexParam("input", at)+".call_id",
				"No tool call found for %s with call_id '%s'.", input[o.i].ItemType(), o.callID)
		case o.call.Type != o.answers:
			return protocol.OutputMismatch(input[o.i], o.callID, o.call.Type, protocol.IndexParam("input", at))
		}
	}
	return nil
}

// notInConversation refuses to continue, by previous_response_id, a response
// that belongs to a Conversations API conversation: its record holds what it
// added, not the conversation before it, so its context is the
// conversation's, reached by naming the conversation.
func notInConversation(resp *protocol.Response) *protocol.Error {
	if resp == nil || resp.Conversation == nil {
		return nil
	}
	return protocol.Invalid(protocol.CodeInvalidValue, "previous_response_id",
		"Response '%s' belongs to conversation '%s': continue it with 'conversation', not 'previous_response_id'.", resp.ID, resp.Conversation.ID)
}

// steeredInput is input with the steering the parent response ended
// holding, taken once: after the outputs input begins with (those that
// answer the parent's calls, which must follow them), before the rest.
// OpenAI puts it first; a call's output must follow its call on every
// backend tether may send it to.
func (c *conversation) steeredInput(input protocol.Items) protocol.Items {
	p := c.steered.Swap(nil)
	if p == nil || len(*p) == 0 {
		return input
	}
	n := 0
	for n < len(input) {
		if _, _, ok := protocol.AnswerOf(input[n]); !ok {
			break
		}
		n++
	}
	out := make(protocol.Items, 0, len(input)+len(*p))
	out = append(append(append(out, input[:n]...), *p...), input[n:]...)
	return out
}
