package redisstore

import "github.com/redis/go-redis/v9"

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
