package runtime

import (
	"net/http"

	"github.com/tether-run/tether/protocol"
)

// An item_reference saves a client sending an item's bytes again; it does
// not let a request be larger than one the server would take inline. So
// the items a request's references name add up to at most Limits.MaxFrame
// bytes, as they encode, and a request holds at most maxItemReferences
// references: both checked as each reference is resolved, before anything
// is rendered, so that a small request naming one large item thousands of
// times is refused rather than rendered thousands of times.
const maxItemReferences = 4096

// references resolves one request's item references, counting them and
// the bytes of what they name against those bounds.
type references struct {
	param    string // the request's parameter the references are in ("input")
	maxBytes int64
	n        int
	bytes    int64
	sizes    map[protocol.Item]int64 // each item named, encoded once
	// earlier indexes items by id, newest last: the request's items
	// resolved so far, then the context's (find's fallback).
	earlier map[string]protocol.Item
}

func newReferences(param string, maxBytes int64) *references {
	return &references{param: param, maxBytes: maxBytes, sizes: map[protocol.Item]int64{}, earlier: map[string]protocol.Item{}}
}

// index makes items findable by id, later ones hiding earlier ones of the
// same id (findItem's order).
func (rs *references) index(items protocol.Items) {
	for _, it := range items {
		if id := it.ItemID(); id != "" {
			rs.earlier[id] = it
		}
	}
}

// count takes a reference at index i of the request to item, or refuses it
// past the bounds.
func (rs *references) count(i int, item protocol.Item) *protocol.Error {
	rs.n++
	if rs.n > maxItemReferences {
		return protocol.Invalid(protocol.CodeTooManyReferences, protocol.IndexParam(rs.param, i),
			"Too many item references: a request may hold at most %d.", maxItemReferences)
	}
	size, ok := rs.sizes[item]
	if !ok {
		if b, err := protocol.Marshal(item); err == nil {
			size = int64(len(b))
		}
		rs.sizes[item] = size
	}
	if rs.bytes += size; rs.bytes > rs.maxBytes {
		return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeRequestTooLarge, protocol.IndexParam(rs.param, i),
			"The items this request's references name come to more than %d bytes, the most a request may hold (--max-frame): send fewer references, or the items themselves.", rs.maxBytes)
	}
	return nil
}
