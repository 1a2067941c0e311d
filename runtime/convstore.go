package runtime

import (
	"container/list"
	"context"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// ConversationStore keeps the Conversations API's conversations: each its
// object and its items, in order, every item with an id. Every method acts
// under the context's tenant (Tenant): another tenant's conversation reads
// as one that does not exist (ErrNotStored). Implementations must be safe
// for concurrent use and treat what they are given and return as immutable.
//
// A Store that is also a ConversationStore keeps a server's conversations
// (package redisstore's does); otherwise the server keeps them in memory
// (MemoryConversations, bounded as Options.MemoryStore bounds the response
// store, with a budget of its own).
type ConversationStore interface {
	// CreateConversation keeps a new conversation with its first items.
	CreateConversation(ctx context.Context, c *protocol.Conversation, items protocol.Items) error
	GetConversation(ctx context.Context, id string) (*protocol.Conversation, error)
	// UpdateConversation replaces the conversation's metadata.
	UpdateConversation(ctx context.Context, id string, metadata map[string]string) (*protocol.Conversation, error)
	// DeleteConversation deletes it and its items.
	DeleteConversation(ctx context.Context, id string) error
	// AddConversationItems adds items at the end: all or none. A
	// non-empty once names the addition: a second with the same once adds
	// nothing and succeeds (a response's items, added by the server that
	// ends it, and again by a server that took the rollout over and ran its
	// last step too).
	AddConversationItems(ctx context.Context, id, once string, items protocol.Items) error
	// ConversationItems is every item of the conversation, oldest first.
	ConversationItems(ctx context.Context, id string) (protocol.Items, error)
	// DeleteConversationItem deletes one item: ErrNotStored when the
	// conversation does not hold it.
	DeleteConversationItem(ctx context.Context, id, itemID string) error
}

// MemoryConversations is the default ConversationStore: conversations in
// memory, bounded by bytes (an item's encoded size and its overhead), in
// all and per tenant. Past the bound in all the conversation written least
// recently goes first; a tenant past its own bound is refused (ErrTooLarge)
// rather than let evict the others'.
type MemoryConversations struct {
	maxBytes, maxTenant int

	mu      lockrank.Mutex[lockrank.Conversations]
	convs   map[itemKey]*memConversation // by tenant and id; guarded by mu
	lru     list.List                    // of *memConversation, least recently written first; guarded by mu
	bytes   int                          // guarded by mu
	tenants map[string]int               // each tenant's bytes; guarded by mu
}

type memConversation struct {
	key   itemKey
	conv  protocol.Conversation
	items protocol.Items
	bytes int
	elem  *list.Element
	added map[string]bool // the once names of the additions made
}

// NewMemoryConversations returns an empty store of at most maxBytes
// (DefaultStoreBytes when 0), maxTenant of them a tenant's
// (DefaultTenantStoreBytes when 0).
func NewMemoryConversations(maxBytes, maxTenant int) *MemoryConversations {
	if maxBytes <= 0 {
		maxBytes = DefaultStoreBytes
	}
	if maxTenant <= 0 {
		maxTenant = DefaultTenantStoreBytes
	}
	return &MemoryConversations{maxBytes: maxBytes, maxTenant: maxTenant, convs: make(map[itemKey]*memConversation), tenants: make(map[string]int)}
}

// fitsLocked reports whether tenant may hold n bytes more.
func (m *MemoryConversations) fitsLocked(tenant string, n int) bool {
	return n <= m.maxBytes && m.tenants[tenant]+n <= m.maxTenant
}

// growLocked counts n bytes more (or fewer) of mc's.
func (m *MemoryConversations) growLocked(mc *memConversation, n int) {
	mc.bytes += n
	m.bytes += n
	m.tenants[mc.key.tenant] += n
	if m.tenants[mc.key.tenant] == 0 {
		delete(m.tenants, mc.key.tenant)
	}
}

// itemsBytes is what items hold in memory.
func itemsBytes(items protocol.Items) int {
	n := 0
	for _, it := range items {
		n += itemOverhead
		if b, err := protocol.Marshal(it); err == nil {
			n += len(b)
		}
	}
	return n
}

func (m *MemoryConversations) CreateConversation(ctx context.Context, c *protocol.Conversation, items protocol.Items) error {
	mc := &memConversation{key: itemKey{Tenant(ctx), c.ID}, conv: *c, items: slices.Clip(items)}
	n := recordOverhead + itemsBytes(items)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.convs[mc.key]; old != nil {
		m.removeLocked(old)
	}
	if !m.fitsLocked(mc.key.tenant, n) {
		return ErrTooLarge
	}
	m.convs[mc.key] = mc
	mc.elem = m.lru.PushBack(mc)
	m.growLocked(mc, n)
	m.evictLocked(mc)
	return nil
}

func (m *MemoryConversations) getLocked(ctx context.Context, id string) (*memConversation, error) {
	mc := m.convs[itemKey{Tenant(ctx), id}]
	if mc == nil {
		return nil, ErrNotStored
	}
	return mc, nil
}

func (m *MemoryConversations) GetConversation(ctx context.Context, id string) (*protocol.Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	c := mc.conv
	return &c, nil
}

func (m *MemoryConversations) UpdateConversation(ctx context.Context, id string, metadata map[string]string) (*protocol.Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	mc.conv.Metadata = metadata
	m.lru.MoveToBack(mc.elem)
	c := mc.conv
	return &c, nil
}

func (m *MemoryConversations) DeleteConversation(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return err
	}
	m.removeLocked(mc)
	return nil
}

func (m *MemoryConversations) AddConversationItems(ctx context.Context, id, once string, items protocol.Items) error {
	n := itemsBytes(items)
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return err
	}
	if once != "" && mc.added[once] {
		return nil
	}
	if mc.bytes+n > m.maxBytes || !m.fitsLocked(mc.key.tenant, n) {
		return ErrTooLarge
	}
	if once != "" {
		if mc.added == nil {
			mc.added = make(map[string]bool)
		}
		mc.added[once] = true
	}
	// A new slice: readers hold the old one.
	mc.items = append(slices.Clip(mc.items), items...)
	m.growLocked(mc, n)
	m.lru.MoveToBack(mc.elem)
	m.evictLocked(mc)
	return nil
}

func (m *MemoryConversations) ConversationItems(ctx context.Context, id string) (protocol.Items, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	return mc.items, nil
}

func (m *MemoryConversations) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(mc.items, func(it protocol.Item) bool { return it.ItemID() == itemID })
	if i < 0 {
		return ErrNotStored
	}
	n := itemsBytes(mc.items[i : i+1])
	mc.items = slices.Delete(slices.Clone(mc.items), i, i+1)
	m.growLocked(mc, -n)
	return nil
}

func (m *MemoryConversations) removeLocked(mc *memConversation) {
	delete(m.convs, mc.key)
	m.lru.Remove(mc.elem)
	m.growLocked(mc, -mc.bytes)
}

// evictLocked drops the conversations written least recently until the
// store is within its bound, never keep.
func (m *MemoryConversations) evictLocked(keep *memConversation) {
	for m.bytes > m.maxBytes {
		oldest := m.lru.Front().Value.(*memConversation)
		if oldest == keep {
			return
		}
		m.removeLocked(oldest)
	}
}

var _ ConversationStore = (*MemoryConversations)(nil)
