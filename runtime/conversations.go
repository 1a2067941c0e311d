package runtime

import (
	"context"
	"errors"
	"net/http"

	"github.com/tether-run/tether/runtime/internal/ids"

	"github.com/tether-run/tether/protocol"
)

// The Conversations API (/v1/conversations): a conversation's items kept
// on the server, which a create that names the conversation reads as its
// context and adds its own input and output to when it ends (a suspended
// rollout: everything it added, tool outputs included, at its end). Kept
// in the ConversationStore, under the key's tenant. Not to be confused
// with the unexported conversation, the state one response leaves for the
// next on a connection.

func conversationNotFound(id, param string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeConversationNotFound, param,
		"Conversation with id '%s' not found.", id)
}

// convError is a ConversationStore's error as the API answers it.
func convError(err error, id, param string) *protocol.Error {
	switch {
	case errors.Is(err, ErrNotStored):
		return conversationNotFound(id, param)
	case errors.Is(err, ErrTooLarge):
		// Only a conversation larger than the bound on its own: a full
		// store makes room by evicting others.
		return protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeRequestTooLarge, param,
			"Conversation '%s' would be larger on its own than this server keeps of a conversation.", id)
	case errors.Is(err, ErrTenantFull):
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeTenantStore, param,
			"Conversation '%s' cannot grow: your conversations hold all this server keeps of a tenant's. Delete some, or wait for them to expire.", id)
	}
	return protocol.AsError(err) // a store's errors are StoreUnavailable
}

// readConversationItems reads a body of items (and metadata) to add.
func (s *Server) readConversationItems(w http.ResponseWriter, r *http.Request, needItems bool) (*protocol.ConversationItems, bool) {
	body, perr := s.readBody(w, r)
	if perr == nil {
		if len(body) == 0 && !needItems {
			body = []byte("{}")
		}
		var items *protocol.ConversationItems
		if items, perr = protocol.DecodeConversationItems(body, needItems); perr == nil {
			ids.NameInputs(items.Items)
			return items, true
		}
	}
	writeError(w, perr)
	return nil, false
}

// handleConversationCreate serves POST /v1/conversations.
func (s *Server) handleConversationCreate(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readConversationItems(w, r, false)
	if !ok {
		return
	}
	c := &protocol.Conversation{ID: ids.New("conv"), Object: "conversation", CreatedAt: s.now().Unix(), Metadata: body.Metadata}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	if err := s.convs.CreateConversation(r.Context(), c, body.Items); err != nil {
		writeError(w, convError(err, c.ID, ""))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleConversationGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := s.convs.GetConversation(r.Context(), id)
	if err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// handleConversationUpdate serves POST /v1/conversations/{id}: new metadata.
func (s *Server) handleConversationUpdate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, perr := s.readBody(w, r)
	var md map[string]string
	if perr == nil {
		md, perr = protocol.DecodeConversationUpdate(body)
	}
	if perr != nil {
		writeError(w, perr)
		return
	}
	c, err := s.convs.UpdateConversation(r.Context(), id, md)
	if err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleConversationDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.convs.DeleteConversation(r.Context(), id); err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, protocol.Deleted{ID: id, Object: "conversation.deleted", Deleted: true})
}

// handleConversationItems lists a conversation's items as writeItemPage
// does: the page alone read from a store that pages (ConversationPager),
// else all of them.
func (s *Server) handleConversationItems(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q, perr := itemPageOf(r)
	if perr != nil {
		writeError(w, perr)
		return
	}
	pager, ok := s.convs.(ConversationPager)
	if !ok {
		all, err := s.convs.ConversationItems(r.Context(), id)
		if err != nil {
			writeError(w, convError(err, id, "conversation_id"))
			return
		}
		writePage(w, all, q)
		return
	}
	items, more, err := pager.ConversationPage(r.Context(), id, q)
	if errors.Is(err, ErrItemNotStored) {
		writeError(w, errUnknownAfter(q.After))
		return
	}
	if err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, pageList(items, more))
}

// handleConversationAdd serves POST /v1/conversations/{id}/items: the items
// added, as a list.
func (s *Server) handleConversationAdd(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	body, ok := s.readConversationItems(w, r, true)
	if !ok {
		return
	}
	if err := s.convs.AddConversationItems(r.Context(), id, "", body.Items); err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, pageList(body.Items, false))
}

// handleConversationItem serves GET /v1/conversations/{id}/items/{item}:
// the newest item of that id, read alone from a store that pages
// (ConversationPager).
func (s *Server) handleConversationItem(w http.ResponseWriter, r *http.Request) {
	id, itemID := r.PathValue("id"), r.PathValue("item")
	var it protocol.Item
	var err error
	if pager, ok := s.convs.(ConversationPager); ok {
		it, err = pager.ConversationItem(r.Context(), id, itemID)
	} else {
		var all protocol.Items
		if all, err = s.convs.ConversationItems(r.Context(), id); err == nil {
			if it = findItem(all, itemID); it == nil {
				err = ErrItemNotStored
			}
		}
	}
	switch {
	case errors.Is(err, ErrItemNotStored):
		writeError(w, itemNotFound(id, itemID))
	case err != nil:
		writeError(w, convError(err, id, "conversation_id"))
	default:
		writeJSON(w, http.StatusOK, it)
	}
}

// handleConversationItemDelete deletes an item and answers with the
// conversation, as the API does.
func (s *Server) handleConversationItemDelete(w http.ResponseWriter, r *http.Request) {
	id, itemID := r.PathValue("id"), r.PathValue("item")
	c, err := s.convs.GetConversation(r.Context(), id)
	if err == nil {
		err = s.convs.DeleteConversationItem(r.Context(), id, itemID)
		if errors.Is(err, ErrNotStored) {
			writeError(w, itemNotFound(id, itemID))
			return
		}
	}
	if err != nil {
		writeError(w, convError(err, id, "conversation_id"))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func itemNotFound(conv, item string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, protocol.CodeItemNotFound, "item_id",
		"Item with id '%s' not found in conversation '%s'.", item, conv)
}

// conversationContext is a conversation's items as the context a create
// that names it continues from: expanded (compaction windows, references)
// and rendered.
func (s *Server) conversationContext(ctx context.Context, id string) (*conversation, *protocol.Error) {
	items, err := s.convs.ConversationItems(ctx, id)
	if err != nil {
		return nil, convError(err, id, "conversation")
	}
	items, _, perr := s.expand(items, nil, "conversation", nil)
	if perr != nil {
		return nil, perr
	}
	conv := &conversation{items: items}
	if conv.win, perr = s.windowOf(ctx, Tenant(ctx), items, 0, "conversation"); perr != nil {
		return nil, perr
	}
	conv.prompt = s.renderFrom(items, conv.win)
	conv.rendered = conv.prompt.Len()
	return conv, nil
}

// parentOf is the context a create continues from: its
// previous_response_id's (hydrated from the store; a session looks in its
// cache first), its conversation's, or none.
func (s *Server) parentOf(ctx context.Context, req *protocol.CreateRequest) (*conversation, *protocol.Error) {
	if perr := req.ValidateContext(); perr != nil {
		return nil, perr
	}
	switch {
	case req.PreviousResponseID != "":
		return s.hydrate(ctx, req.PreviousResponseID, !req.MultiAgentEnabled())
	case req.Conversation != nil:
		return s.conversationContext(ctx, req.Conversation.ID)
	}
	return nil, nil
}

// addToConversation adds what the response added to the context (its
// input, what was appended between its steps, its output) to the
// conversation it named.
func (r *rollout) addToConversation(ctx context.Context) *protocol.Error {
	id := r.req.Conversation.ID
	sctx, cancel := context.WithTimeout(WithTenant(context.WithoutCancel(ctx), r.tenant), storeTimeout)
	defer cancel()
	if err := r.srv.convs.AddConversationItems(sctx, id, r.resp.ID, r.transcript()[r.base:]); err != nil {
		return convError(err, id, "conversation")
	}
	return nil
}
