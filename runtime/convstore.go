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
// store, within bounds of its own: a share of Limits.MaxMemory by default).
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
	// last step too). A store that bounds what it keeps refuses an
	// addition past its bound on a conversation with ErrTooLarge, and
	// one past its bound on a tenant's with ErrTenantFull unless it makes
	// room.
	AddConversationItems(ctx context.Context, id, once string, items protocol.Items) error
	// ConversationItems is every item of the conversation, oldest first.
	ConversationItems(ctx context.Context, id string) (protocol.Items, error)
	// DeleteConversationItem deletes one item: ErrNotStored when the
	// conversation does not hold it.
	DeleteConversationItem(ctx context.Context, id, itemID string) error
}

// MemoryConversations is the default ConversationStore: conversations in
// memory, bounded by bytes, in all and per tenant. A conversation's bytes
// are what it holds in memory: its items' encoded size, its metadata's
// keys and values, the once names of its additions, and the overhead of
// its structs and of its entries in the store's map and lists. Past a
// tenant's bound that tenant's own least recently written conversations go
// first; past the bound in all, the least recently written of all, as
// MemoryStore evicts records. A conversation larger than a bound on its own
// is not kept (ErrTooLarge): created, updated or added to, it stays as it
// was.
type MemoryConversations struct {
	maxBytes, maxTenant int

	mu      lockrank.Mutex[lockrank.Conversations]
	convs   map[itemKey]*memConversation    // by tenant and id; guarded by mu
	lru     list.List                       // of *memConversation, least recently written first; guarded by mu
	bytes   int                             // guarded by mu
	tenants map[string]*tenantConversations // guarded by mu
}

// tenantConversations are one tenant's conversations, least recently
// written first, and their bytes.
type tenantConversations struct {
	lru   list.List // of *memConversation
	bytes int
}

type memConversation struct {
	key       itemKey
	conv      protocol.Conversation
	items     protocol.Items
	bytes     int
	all, mine *list.Element   // in MemoryConversations.lru and its tenant's
	added     map[string]bool // the once names of the additions made
}

// What a conversation holds in memory besides its items (itemsBytes) and
// its strings' bytes, from the heap measured with go1.26's maps: for
// conversations, metadata and additions of many sizes, the heap came
// within a few percent of what these count, or under it
// (TestConversationMetadataMemory checks thousands of them).
const (
	// The conversation's struct and id, its empty metadata map, its
	// entry in the store's map, its elements in the two lists, and the
	// map of its additions' once names with its first slots.
	conversationOverhead = 576
	// A non-empty metadata map's header and first group of slots, which
	// holds up to 8 pairs.
	metadataOverhead = 256
	// A metadata pair's slot in its map, with the room a map keeps to
	// grow into, and its strings rounded up to an allocation's size.
	metadataPairOverhead = 64
	// A once name's slot in the added map, and its string's rounding.
	onceOverhead = 48
)

// metadataBytes is what a conversation's metadata holds in memory.
func metadataBytes(md map[string]string) int {
	if len(md) == 0 {
		return 0
	}
	n := metadataOverhead
	for k, v := range md {
		n += metadataPairOverhead + len(k) + len(v)
	}
	return n
}

// conversationBytes is what a conversation holds in memory before any
// addition: itself and its first items.
func conversationBytes(c *protocol.Conversation, items protocol.Items) int {
	return conversationOverhead + len(c.ID) + metadataBytes(c.Metadata) + itemsBytes(items)
}

// NewMemoryConversations returns an empty store of at most maxBytes
// (DefaultStoreBytes when 0), maxTenant of them a tenant's (a quarter of
// maxBytes when 0).
func NewMemoryConversations(maxBytes, maxTenant int) *MemoryConversations {
	bounds := MemoryStoreOptions{MaxBytes: maxBytes, MaxTenantBytes: maxTenant}
	bounds.setDefaults()
	return &MemoryConversations{maxBytes: bounds.MaxBytes, maxTenant: bounds.MaxTenantBytes,
		convs: make(map[itemKey]*memConversation), tenants: make(map[string]*tenantConversations)}
}

// fits reports whether a conversation of n bytes fits the bounds on its
// own.
func (m *MemoryConversations) fits(n int) bool { return n <= m.maxBytes && n <= m.maxTenant }

// growLocked counts n bytes more (or fewer) of mc's.
func (m *MemoryConversations) growLocked(mc *memConversation, n int) {
	mc.bytes += n
	m.bytes += n
	m.tenants[mc.key.tenant].bytes += n
}

// writtenLocked makes mc the most recently written conversation, and
// makes room for it: its tenant's least recently written go while the
// tenant is past its bound, then the least recently written of all while
// the store is. mc itself fits (fits), so neither reaches it.
func (m *MemoryConversations) writtenLocked(mc *memConversation) {
	t := m.tenants[mc.key.tenant]
	m.lru.MoveToBack(mc.all)
	t.lru.MoveToBack(mc.mine)
	for t.bytes > m.maxTenant && t.lru.Front() != mc.mine {
		m.removeLocked(t.lru.Front().Value.(*memConversation))
	}
	for m.bytes > m.maxBytes && m.lru.Front() != mc.all {
		m.removeLocked(m.lru.Front().Value.(*memConversation))
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
	n := conversationBytes(c, items)
	if !m.fits(n) {
		return ErrTooLarge
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.convs[mc.key]; old != nil {
		m.removeLocked(old)
	}
	t := m.tenants[mc.key.tenant]
	if t == nil {
		t = new(tenantConversations)
		m.tenants[mc.key.tenant] = t
	}
	m.convs[mc.key] = mc
	mc.all, mc.mine = m.lru.PushBack(mc), t.lru.PushBack(mc)
	m.growLocked(mc, n)
	m.writtenLocked(mc)
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
	n := metadataBytes(metadata) - metadataBytes(mc.conv.Metadata)
	if !m.fits(mc.bytes + n) {
		return nil, ErrTooLarge
	}
	mc.conv.Metadata = metadata
	m.growLocked(mc, n)
	m.writtenLocked(mc)
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
	if once != "" {
		n += onceOverhead + len(once)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mc, err := m.getLocked(ctx, id)
	if err != nil {
		return err
	}
	if once != "" && mc.added[once] {
		return nil
	}
	if !m.fits(mc.bytes + n) {
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
	m.writtenLocked(mc)
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
	t := m.tenants[mc.key.tenant]
	m.lru.Remove(mc.all)
	t.lru.Remove(mc.mine)
	m.bytes -= mc.bytes
	t.bytes -= mc.bytes
	if t.lru.Len() == 0 {
		delete(m.tenants, mc.key.tenant)
	}
}

var _ ConversationStore = (*MemoryConversations)(nil)
