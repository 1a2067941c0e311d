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

// placeDigits is the width of an item's place, at the head of its member
// and the tail of its index entry: exact as Redis's scores (doubles) up to
// 2^53, past what any conversation adds.
const placeDigits = 16

// conversationScripts are the Lua scripts that write and read
// conversations, each run with EVALSHA (EVAL once after Redis forgets it).
// Their KEYS are convKeys' (and the addition's once key).
type conversationScripts struct {
	create, add, update, del, delItem, page, item *redis.Script
}

// The scripts' answers besides 1 (done).
const (
	convNone      = 0  // no such conversation
	convAdded     = 2  // the addition named once was made already
	convTooLarge  = -1 // the conversation would pass its bound (or the tenant's) on its own
	convFull      = -2 // the tenant's conversations would pass their bound
	convNoSuchOne = -3 // no such item (deleting, reading, or a page's after)
)

// convWrite begins every script that may grow a tenant's conversations:
// now, Redis's clock in milliseconds; the conversations whose keys
// expired a second ago or more forgotten, a thousand at a time (Lua's
// unpack has a stack limit); tenant, the bytes of those left. It defines
// bytesOf, what the items from ARGV[from] (pairs of the hex-coded id and
// the msgpack) add; push, which adds them at the places after seq; and
// keepTenant, which makes the tenant's keys outlive every conversation
// (never shortening them: servers may differ in their TTL).
const convWrite = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', string.format('(%d', now - 1000))
for i = 1, #gone, 1000 do
  local batch = {unpack(gone, i, math.min(i + 999, #gone))}
  local freed = 0
  for _, b in ipairs(redis.call('HMGET', KEYS[4], unpack(batch))) do freed = freed + tonumber(b or '0') end
  redis.call('HDEL', KEYS[4], unpack(batch))
  redis.call('ZREM', KEYS[5], unpack(batch))
  redis.call('DECRBY', KEYS[6], freed)
end
local tenant = tonumber(redis.call('GET', KEYS[6]) or '0')
local function bytesOf(from)
  local n = 0
  for i = from, #ARGV, 2 do n = n + #ARGV[i] + #ARGV[i + 1] + 2 * 16 + 1 end
  return n
end
local function push(from, seq)
  local items, index = {}, {}
  for i = from, #ARGV, 2 do
    seq = seq + 1
    local place = string.format('%016d', seq)
    items[#items + 1] = place
    items[#items + 1] = place .. ARGV[i + 1]
    index[#index + 1] = '0'
    index[#index + 1] = ARGV[i] .. ':' .. place
    if #items == 1000 or i + 2 > #ARGV then
      redis.call('ZADD', KEYS[2], unpack(items))
      redis.call('ZADD', KEYS[3], unpack(index))
      items, index = {}, {}
    end
  end
end
local function keepTenant(ttl)
  for k = 4, 6 do
    if redis.call('PTTL', KEYS[k]) < ttl then redis.call('PEXPIRE', KEYS[k], ttl) end
  end
end
`

// createScript: ARGV the TTL in ms, the bound on the conversation, on the
// tenant's, its id, its object, then its items. A conversation made again
// under its id is replaced.
const createScript = convWrite + `
local ttl = tonumber(ARGV[1])
local old = tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0')
local n = #ARGV[5] + bytesOf(6)
if n > tonumber(ARGV[2]) then return -1 end
if tenant - old + n > tonumber(ARGV[3]) then return -2 end
redis.call('UNLINK', KEYS[2], KEYS[3])
redis.call('SET', KEYS[1], ARGV[5], 'PX', ttl)
push(6, 0)
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('HSET', KEYS[4], ARGV[4], n)
redis.call('ZADD', KEYS[5], string.format('%d', now + ttl), ARGV[4])
redis.call('INCRBY', KEYS[6], n - old)
keepTenant(ttl)
return 1`

// addScript: KEYS[7] the addition's once key; ARGV the TTL in ms, the
// bound on the conversation, on the tenant's, its id, "1" when the
// addition is named once, then the items, at the places after its last.
const addScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[7]) == 1 then return 2 end
` + convWrite + `
local ttl = tonumber(ARGV[1])
local n = bytesOf(6)
if tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0') + n > tonumber(ARGV[2]) then return -1 end
if tenant + n > tonumber(ARGV[3]) then return -2 end
if ARGV[5] == '1' then redis.call('SET', KEYS[7], 1, 'PX', ttl) end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
push(6, tonumber(last[2] or '0'))
for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ttl) end
redis.call('HINCRBY', KEYS[4], ARGV[4], n)
redis.call('ZADD', KEYS[5], string.format('%d', now + ttl), ARGV[4])
redis.call('INCRBY', KEYS[6], n)
keepTenant(ttl)
return 1`

// updateScript: ARGV the TTL in ms, the bound on the conversation, on the
// tenant's, its id, its new object (its TTL kept). A conversation counted
// nowhere (one written before the counts were kept) is still not.
const updateScript = `
local old = redis.call('GET', KEYS[1])
if not old then return 0 end
` + convWrite + `
local d = #ARGV[5] - #old
local mine = redis.call('HGET', KEYS[4], ARGV[4])
if d > 0 and tonumber(mine or '0') + d > tonumber(ARGV[2]) then return -1 end
if d > 0 and tenant + d > tonumber(ARGV[3]) then return -2 end
redis.call('SET', KEYS[1], ARGV[5], 'KEEPTTL')
if mine then
  redis.call('HINCRBY', KEYS[4], ARGV[4], d)
  redis.call('INCRBY', KEYS[6], d)
end
keepTenant(tonumber(ARGV[1]))
return 1`

// deleteScript: ARGV the conversation's id. Its items go with UNLINK,
// which frees a large set outside Redis's main thread.
const deleteScript = `
local n = redis.call('DEL', KEYS[1])
redis.call('UNLINK', KEYS[2], KEYS[3])
local mine = redis.call('HGET', KEYS[4], ARGV[1])
if mine then
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('ZREM', KEYS[5], ARGV[1])
  redis.call('DECRBY', KEYS[6], mine)
end
return n`

// deleteItemScript: ARGV the conversation's id, the hex-coded id of the
// item, whose oldest is deleted.
const deleteItemScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local at = redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[2] .. ':', '(' .. ARGV[2] .. ';', 'LIMIT', 0, 1)
if #at == 0 then return -3 end
local place = string.sub(at[1], #ARGV[2] + 2)
local item = redis.call('ZRANGEBYSCORE', KEYS[2], place, place)
redis.call('ZREM', KEYS[3], at[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], place, place)
local n = #at[1] + #(item[1] or '')
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[4], ARGV[1], -n)
  redis.call('DECRBY', KEYS[6], n)
end
return 1`

// pageScript: ARGV the hex-coded id of the item the page begins after
// ("" from the first), how many items, "1" newest first. It returns the
// answer, then the page's members.
const pageScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local n, desc = tonumber(ARGV[2]), ARGV[3] == '1'
local out
if ARGV[1] == '' then
  if desc then out = redis.call('ZREVRANGE', KEYS[2], 0, n - 1)
  else out = redis.call('ZRANGE', KEYS[2], 0, n - 1) end
else
  local lo, hi = '[' .. ARGV[1] .. ':', '(' .. ARGV[1] .. ';'
  local at
  if desc then at = redis.call('ZREVRANGEBYLEX', KEYS[3], hi, lo, 'LIMIT', 0, 1)
  else at = redis.call('ZRANGEBYLEX', KEYS[3], lo, hi, 'LIMIT', 0, 1) end
  if #at == 0 then return {-3} end
  local place = '(' .. string.sub(at[1], #ARGV[1] + 2)
  if desc then out = redis.call('ZREVRANGEBYSCORE', KEYS[2], place, '-inf', 'LIMIT', 0, n)
  else out = redis.call('ZRANGEBYSCORE', KEYS[2], place, '+inf', 'LIMIT', 0, n) end
end
table.insert(out, 1, 1)
return out`

// itemScript: ARGV the hex-coded id of the item, whose newest it returns
// after the answer.
const itemScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local at = redis.call('ZREVRANGEBYLEX', KEYS[3], '(' .. ARGV[1] .. ';', '[' .. ARGV[1] .. ':', 'LIMIT', 0, 1)
if #at == 0 then return {-3} end
local place = string.sub(at[1], #ARGV[1] + 2)
local item = redis.call('ZRANGEBYSCORE', KEYS[2], place, place)
if #item == 0 then return {-3} end
return {1, item[1]}`

func newConversationScripts() conversationScripts {
	return conversationScripts{create: redis.NewScript(createScript), add: redis.NewScript(addScript),
		update: redis.NewScript(updateScript), del: redis.NewScript(deleteScript),
		delItem: redis.NewScript(deleteItemScript), page: redis.NewScript(pageScript), item: redis.NewScript(itemScript)}
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
