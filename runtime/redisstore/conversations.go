package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// A Store is also a runtime.ConversationPager: every server on the Redis
// reads and adds to the same conversations, and reads a page of one
// without the rest. A conversation is three keys in its tenant's slot:
//
//   - tether:{tTENANT}:c:ID, the conversation object (JSON);
//   - tether:{tTENANT}:cz:ID, its items: a sorted set whose members are
//     an item's place (16 decimal digits, counted up from 1 as items are
//     added) and its msgpack, scored by the place, so that a window of
//     them is one ZRANGE by rank or by score, and deleting one shifts no
//     other's place;
//   - tether:{tTENANT}:cx:ID, the index of its items' ids: members
//     HEXID:PLACE, all scored 0, so that the places of an id are one
//     ZRANGEBYLEX (the id hex-coded, so that no id's prefix is another's);
//
// all three live for the store's TTL from the last creation or addition.
// Each tenant's conversations are counted in three keys of its slot:
// tether:{tTENANT}:cb, a hash of each conversation's bytes (its object's,
// and each item's member and index entry's: what MaxConversationBytes
// bounds), tether:{tTENANT}:ct, their sum (what
// MaxTenantConversationBytes bounds), and tether:{tTENANT}:ce, a sorted
// set of the conversations by when their keys expire, in milliseconds of
// Redis's clock, so that a conversation that expired is no longer counted:
// each write first forgets those that expired a second ago or more (the
// second, so that none Redis still holds is forgotten). Every write is one
// Lua script, which checks the bounds and changes the items, their index
// and the counts together.
//
// Past a tenant's bound an addition is refused, not made room for by
// evicting the tenant's least recently written conversation, as the memory
// store does: the conversations in Redis are the servers' shared, durable
// record, which another server may be adding a response's items to, kept
// for their TTL; and the keys of the conversation to evict are known only
// inside the script, where a script must not touch keys it was not given
// (Redis Cluster).
//
// A conversation that Redis itself evicts (a maxmemory-policy that evicts
// keys with a TTL) stays counted until its TTL would have ended.

// convKeys are the keys of conversation id of tenant, as every
// conversation script takes them: its object, items and index, and its
// tenant's bytes by conversation, expiries and sum.
func (s *Store) convKeys(tenant, id string) []string {
	t := s.slot(tenant)
	return []string{s.convKey(tenant, id), t + ":cz:" + id, t + ":cx:" + id, t + ":cb", t + ":ce", t + ":ct"}
}

// convKey is where conversation id of tenant's object is kept.
func (s *Store) convKey(tenant, id string) string { return s.slot(tenant) + ":c:" + id }

// onceKey marks an addition named once as made to conversation id, for
// the store's TTL ("" when there is no name: a key no addition sets).
func (s *Store) onceKey(tenant, id, once string) string {
	return s.slot(tenant) + ":co:" + id + ":" + once
}

// hexID is an item id as the index keeps it.
func hexID(id string) string { return hex.EncodeToString([]byte(id)) }

// itemArgs are items as the scripts take them: each its hex-coded id and
// its msgpack.
func itemArgs(items protocol.Items) ([]any, error) {
	out := make([]any, 0, 2*len(items))
	for _, it := range items {
		b, err := protocol.MarshalAs(protocol.EncodingMsgpack, it)
		if err != nil {
			return nil, err
		}
		out = append(out, hexID(it.ItemID()), b)
	}
	return out, nil
}

// decodeMembers decodes items as the sorted set keeps them, each after
// its place.
func decodeMembers(members []string) (protocol.Items, error) {
	arr := []byte{'['}
	for i, m := range members {
		if len(m) < placeDigits {
			return nil, errors.New("redisstore: a conversation's item is shorter than its place")
		}
		js, err := protocol.ToJSON(protocol.EncodingMsgpack, []byte(m[placeDigits:]))
		if err != nil {
			return nil, fmt.Errorf("redisstore: a conversation's item: %w", err)
		}
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, js...)
	}
	arr = append(arr, ']')
	items, perr := protocol.DecodeItems(arr, "items")
	if perr != nil {
		return nil, fmt.Errorf("redisstore: a conversation's items: %v", perr)
	}
	return items, nil
}

// bounds are the scripts' ARGV[2] and ARGV[3]: the bound on one
// conversation (no larger than the tenant's: one that passes it on its own
// is too large, not a full tenant's), and on the tenant's.
func (s *Store) bounds() (conv, tenant int) {
	return min(s.opts.MaxConversationBytes, s.opts.MaxTenantConversationBytes), s.opts.MaxTenantConversationBytes
}

// written is a write script's answer as an error.
func (s *Store) written(n int64, err error) error {
	switch {
	case err != nil:
		return s.unavailable(err)
	case n == convNone:
		return runtime.ErrNotStored
	case n == convTooLarge:
		return runtime.ErrTooLarge
	case n == convFull:
		return runtime.ErrTenantFull
	}
	return nil
}

// CreateConversation writes the conversation and its first items, within
// the bounds, in one script.
func (s *Store) CreateConversation(ctx context.Context, c *protocol.Conversation, items protocol.Items) error {
	b, err := protocol.Marshal(c)
	if err != nil {
		return err
	}
	elems, err := itemArgs(items)
	if err != nil {
		return err
	}
	maxConv, maxTenant := s.bounds()
	args := append([]any{s.opts.TTL.Milliseconds(), maxConv, maxTenant, c.ID, b}, elems...)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.written(s.convScripts.create.Run(ctx, s.c, s.convKeys(runtime.Tenant(ctx), c.ID), args...).Int64())
}

func (s *Store) GetConversation(ctx context.Context, id string) (*protocol.Conversation, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b, err := s.c.Get(ctx, s.convKey(runtime.Tenant(ctx), id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, runtime.ErrNotStored
	}
	if err != nil {
		return nil, s.unavailable(err)
	}
	var c protocol.Conversation
	if err := protocol.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("redisstore: a stored conversation: %w", err)
	}
	return &c, nil
}

// UpdateConversation replaces the metadata of a conversation that exists,
// its TTL kept, within the bounds.
func (s *Store) UpdateConversation(ctx context.Context, id string, metadata map[string]string) (*protocol.Conversation, error) {
	c, err := s.GetConversation(ctx, id)
	if err != nil {
		return nil, err
	}
	c.Metadata = metadata
	b, err := protocol.Marshal(c)
	if err != nil {
		return nil, err
	}
	maxConv, maxTenant := s.bounds()
	tctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	err = s.written(s.convScripts.update.Run(tctx, s.c, s.convKeys(runtime.Tenant(ctx), id),
		s.opts.TTL.Milliseconds(), maxConv, maxTenant, id, b).Int64())
	if err != nil { // ErrNotStored: deleted meanwhile
		return nil, err
	}
	return c, nil
}

func (s *Store) DeleteConversation(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.written(s.convScripts.del.Run(ctx, s.c, s.convKeys(runtime.Tenant(ctx), id), id).Int64())
}

func (s *Store) AddConversationItems(ctx context.Context, id, once string, items protocol.Items) error {
	elems, err := itemArgs(items)
	if err != nil {
		return err
	}
	tenant := runtime.Tenant(ctx)
	named := "0"
	if once != "" {
		named = "1"
	}
	maxConv, maxTenant := s.bounds()
	args := append([]any{s.opts.TTL.Milliseconds(), maxConv, maxTenant, id, named}, elems...)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.convScripts.add.Run(ctx, s.c, append(s.convKeys(tenant, id), s.onceKey(tenant, id, once)), args...).Int64()
	if n == convAdded {
		return nil
	}
	return s.written(n, err)
}

// ConversationItems reads all of a conversation's items, checking in the
// same transaction that it exists: at most MaxConversationBytes.
func (s *Store) ConversationItems(ctx context.Context, id string) (protocol.Items, error) {
	keys := s.convKeys(runtime.Tenant(ctx), id)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var exists *redis.IntCmd
	var members *redis.StringSliceCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, keys[0])
		members = p.ZRange(ctx, keys[1], 0, -1)
		return nil
	})
	if err != nil {
		return nil, s.unavailable(err)
	}
	if exists.Val() == 0 {
		return nil, runtime.ErrNotStored
	}
	return decodeMembers(members.Val())
}

// ConversationPage reads the page alone: the place of q.After from the
// index, then a window of the items by rank or by place.
func (s *Store) ConversationPage(ctx context.Context, id string, q runtime.ItemPage) (protocol.Items, bool, error) {
	desc, after := "0", ""
	if q.Desc {
		desc = "1"
	}
	if q.After != "" {
		after = hexID(q.After)
	}
	members, err := s.read(ctx, s.convScripts.page, id, after, strconv.Itoa(q.Limit+1), desc)
	if err != nil {
		return nil, false, err
	}
	more := len(members) > q.Limit
	if more {
		members = members[:q.Limit]
	}
	items, err := decodeMembers(members)
	return items, more, err
}

// ConversationItem reads the item alone.
func (s *Store) ConversationItem(ctx context.Context, id, itemID string) (protocol.Item, error) {
	members, err := s.read(ctx, s.convScripts.item, id, hexID(itemID))
	if err != nil {
		return nil, err
	}
	items, err := decodeMembers(members)
	if err != nil {
		return nil, err
	}
	if len(items) != 1 {
		return nil, fmt.Errorf("redisstore: a conversation's item read as %d", len(items))
	}
	return items[0], nil
}

// read runs a script that reads conversation id: its answer, then the
// members it read.
func (s *Store) read(ctx context.Context, script *redis.Script, id string, args ...any) ([]string, error) {
	keys := s.convKeys(runtime.Tenant(ctx), id)[:3]
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	res, err := script.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return nil, s.unavailable(err)
	}
	if len(res) == 0 {
		return nil, errors.New("redisstore: a conversation script answered nothing")
	}
	switch res[0] {
	case int64(convNone):
		return nil, runtime.ErrNotStored
	case int64(convNoSuchOne):
		return nil, runtime.ErrItemNotStored
	}
	members := make([]string, len(res)-1)
	for i, m := range res[1:] {
		str, ok := m.(string)
		if !ok {
			return nil, fmt.Errorf("redisstore: a conversation's item read as %T", m)
		}
		members[i] = str
	}
	return members, nil
}

// DeleteConversationItem deletes the oldest item of that id, found in the
// index, in one script.
func (s *Store) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.convScripts.delItem.Run(ctx, s.c, s.convKeys(runtime.Tenant(ctx), id), id, hexID(itemID)).Int64()
	if n == convNoSuchOne {
		return runtime.ErrNotStored
	}
	return s.written(n, err)
}

var _ runtime.ConversationPager = (*Store)(nil)
