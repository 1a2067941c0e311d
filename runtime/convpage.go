package runtime

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/tether-run/tether/protocol"
)

// ConversationPager is a ConversationStore that reads part of a
// conversation without the rest. The Conversations API lists a
// conversation's items, and reads one of them, through it when the
// server's store has it (package redisstore's does), so that a page of a
// large conversation costs what the page holds; with another store it
// reads every item (ConversationItems) and pages them itself. A response
// on a conversation reads all of it either way: it is the context.
type ConversationPager interface {
	ConversationStore
	// ConversationPage is the window q asks for of the conversation's
	// items, in q's order, and whether more follow it: ErrNotStored when
	// there is no such conversation, ErrItemNotStored when q.After is not
	// one of its items.
	ConversationPage(ctx context.Context, id string, q ItemPage) (items protocol.Items, more bool, err error)
	// ConversationItem is the newest of the conversation's items with id
	// itemID: ErrNotStored when there is no such conversation,
	// ErrItemNotStored when it holds no such item.
	ConversationItem(ctx context.Context, id, itemID string) (protocol.Item, error)
}

// ItemPage is a window of a list of items, as the API asks for one.
type ItemPage struct {
	// Limit is how many items the window holds at most: 1 to 100.
	Limit int
	// Desc lists the newest first, as the API does by default.
	Desc bool
	// After is the id of the item the window begins after, in its order:
	// with Desc the newest item of that id, else the oldest. "" begins at
	// the first.
	After string
}

// itemPageOf reads the window a request asks for: ?order=asc|desc
// (default desc, as OpenAI), ?limit=1..100 (default 20), ?after=ITEM_ID.
func itemPageOf(r *http.Request) (ItemPage, *protocol.Error) {
	q := r.URL.Query()
	page := ItemPage{Limit: 20, After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return page, protocol.Invalid(protocol.CodeInvalidValue, "limit", "Invalid 'limit': expected an integer between 1 and 100.")
		}
		page.Limit = n
	}
	switch q.Get("order") {
	case "", "desc":
		page.Desc = true
	case "asc":
	default:
		return page, protocol.Invalid(protocol.CodeInvalidValue, "order", "Invalid 'order': expected 'asc' or 'desc'.")
	}
	return page, nil
}

// pageOf is q's window of all (oldest first) and whether more follow it,
// or errUnknownAfter.
func pageOf(all protocol.Items, q ItemPage) (protocol.Items, bool, *protocol.Error) {
	items := slices.Clone(all)
	if q.Desc {
		slices.Reverse(items)
	}
	if q.After != "" {
		i := slices.IndexFunc(items, func(it protocol.Item) bool { return it.ItemID() == q.After })
		if i < 0 {
			return nil, false, errUnknownAfter(q.After)
		}
		items = items[i+1:]
	}
	if len(items) > q.Limit {
		return items[:q.Limit], true, nil
	}
	return items, false, nil
}

// errUnknownAfter refuses an after that names no item of the list (one
// deleted since the page before, or never there): a page from the start
// would send a client that pages on until has_more is false round again.
func errUnknownAfter(after string) *protocol.Error {
	return protocol.Invalid(protocol.CodeInvalidValue, "after",
		"Invalid 'after': no item '%s' in this list (deleted since, or never in it). List from the start, without 'after'.", after)
}

// writePage writes q's window of all (oldest first) as the API lists it.
func writePage(w http.ResponseWriter, all protocol.Items, q ItemPage) {
	items, more, perr := pageOf(all, q)
	if perr != nil {
		writeError(w, perr)
		return
	}
	writeJSON(w, http.StatusOK, pageList(items, more))
}

// pageList is the API's list of a page of items.
func pageList(items protocol.Items, more bool) protocol.List[protocol.Item] {
	list := protocol.List[protocol.Item]{Object: "list", Data: items, HasMore: more}
	if n := len(items); n > 0 {
		list.FirstID, list.LastID = items[0].ItemID(), items[n-1].ItemID()
	}
	return list
}
