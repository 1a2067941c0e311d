package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// A Store is also a runtime.ConversationStore: every server on the Redis
// reads and adds to the same conversations. A conversation is two keys in
// its tenant's slot: tether:{tTENANT}:c:ID, the conversation object (JSON),
// and tether:{tTENANT}:ci:ID, a list of its items (msgpack, one element
// an item), so that adding items is one RPUSH whatever the conversation's
// length. Both keys live for the store's TTL from the last write.

func (s *Store) convKey(tenant, id string) string  { return s.slot(tenant) + ":c:" + id }
func (s *Store) itemsKey(tenant, id string) string { return s.slot(tenant) + ":ci:" + id }

// onceKey marks an addition named once as made to conversation id, for
// the store's TTL ("" when there is no name: a key no addition sets).
func (s *Store) onceKey(tenant, id, once string) string {
	return s.slot(tenant) + ":co:" + id + ":" + once
}

// addItems pushes items onto a conversation that exists, a thousand at a
// time (Lua's unpack has a stack limit), and renews both keys' TTL: 0 when
// the conversation does not exist, 2 when the addition named by KEYS[3]
// (ARGV[2] "1") was made already.
var addItems = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[2] == "1" and redis.call('SET', KEYS[3], 1, 'NX', 'PX', ARGV[1]) == false then return 2 end
for i = 3, #ARGV, 1000 do redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1`)

// encodeItems encodes items one by one, as the list keeps them.
func encodeItems(items protocol.Items) ([]any, error) {
	out := make([]any, len(items))
	for i, it := range items {
		b, err := protocol.MarshalAs(protocol.EncodingMsgpack, it)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func decodeItems(elems []string) (protocol.Items, error) {
	arr := []byte{'['}
	for i, e := range elems {
		js, err := protocol.ToJSON(protocol.EncodingMsgpack, []byte(e))
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

// CreateConversation writes the conversation and its first items in one
// transaction.
func (s *Store) CreateConversation(ctx context.Context, c *protocol.Conversation, items protocol.Items) error {
	b, err := protocol.Marshal(c)
	if err != nil {
		return err
	}
	elems, err := encodeItems(items)
	if err != nil {
		return err
	}
	tenant := runtime.Tenant(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ck, ik := s.convKey(tenant, c.ID), s.itemsKey(tenant, c.ID)
		p.Set(ctx, ck, b, s.opts.TTL)
		p.Del(ctx, ik)
		if len(elems) > 0 {
			p.RPush(ctx, ik, elems...)
			p.PExpire(ctx, ik, s.opts.TTL)
		}
		return nil
	})
	return s.unavailable(err)
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

// UpdateConversation replaces the metadata of a conversation that exists
// (SET XX, its TTL kept).
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
	tctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	err = s.c.SetArgs(tctx, s.convKey(runtime.Tenant(ctx), id), b, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
	if errors.Is(err, redis.Nil) { // deleted meanwhile
		return nil, runtime.ErrNotStored
	}
	return c, s.unavailable(err)
}

func (s *Store) DeleteConversation(ctx context.Context, id string) error {
	tenant := runtime.Tenant(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var del *redis.IntCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.Del(ctx, s.convKey(tenant, id))
		p.Del(ctx, s.itemsKey(tenant, id))
		return nil
	})
	if err != nil {
		return s.unavailable(err)
	}
	if del.Val() == 0 {
		return runtime.ErrNotStored
	}
	return nil
}

func (s *Store) AddConversationItems(ctx context.Context, id, once string, items protocol.Items) error {
	elems, err := encodeItems(items)
	if err != nil {
		return err
	}
	tenant := runtime.Tenant(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	named := "0"
	if once != "" {
		named = "1"
	}
	args := append([]any{s.opts.TTL.Milliseconds(), named}, elems...)
	n, err := addItems.Run(ctx, s.c, []string{s.convKey(tenant, id), s.itemsKey(tenant, id), s.onceKey(tenant, id, once)}, args...).Int()
	if err != nil {
		return s.unavailable(err)
	}
	if n == 0 {
		return runtime.ErrNotStored
	}
	return nil
}

func (s *Store) ConversationItems(ctx context.Context, id string) (protocol.Items, error) {
	elems, err := s.conversationElems(ctx, id)
	if err != nil {
		return nil, err
	}
	return decodeItems(elems)
}

// conversationElems reads a conversation's items as kept, checking in the
// same transaction that it exists.
func (s *Store) conversationElems(ctx context.Context, id string) ([]string, error) {
	tenant := runtime.Tenant(ctx)
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var exists *redis.IntCmd
	var elems *redis.StringSliceCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.convKey(tenant, id))
		elems = p.LRange(ctx, s.itemsKey(tenant, id), 0, -1)
		return nil
	})
	if err != nil {
		return nil, s.unavailable(err)
	}
	if exists.Val() == 0 {
		return nil, runtime.ErrNotStored
	}
	return elems.Val(), nil
}

// DeleteConversationItem finds the item and removes it by its value
// (LREM): an item another server removed meanwhile is not found.
func (s *Store) DeleteConversationItem(ctx context.Context, id, itemID string) error {
	elems, err := s.conversationElems(ctx, id)
	if err != nil {
		return err
	}
	items, err := decodeItems(elems)
	if err != nil {
		return err
	}
	for i, it := range items {
		if it.ItemID() != itemID {
			continue
		}
		tenant := runtime.Tenant(ctx)
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		n, err := s.c.LRem(ctx, s.itemsKey(tenant, id), 1, elems[i]).Result()
		if err != nil {
			return s.unavailable(err)
		}
		if n == 0 {
			return runtime.ErrNotStored
		}
		return nil
	}
	return runtime.ErrNotStored
}

var _ runtime.ConversationStore = (*Store)(nil)
