package redisstore

import "github.com/redis/go-redis/v9"

// backgroundScripts are the Lua scripts of background responses
// (background.go), each run with EVALSHA (EVAL once after Redis forgets
// it). Each takes as KEYS the response's record, a hash with the fields
// epoch, owner, lease, request, response, stream, ended and cancel (the
// last three 1 or 0), and its log, a stream whose entry 0-N, of one field
// f, is the event of sequence number N-1: a log of N events ends at 0-N,
// and the events after sequence number a are the entries after 0-(a+1).
// Epochs are compared as strings, canonical decimals on both sides
// (strconv, HINCRBY).
type backgroundScripts struct {
	create, write, get, events, cancel, take *redis.Script
}

// scriptCancelAsked is a write done, whose response's cancel was asked.
const scriptCancelAsked = 2

// bgLua, in a script after leaseLua, keeps a response's two keys:
// keepUntil(at) until at, in milliseconds of Redis's clock, both at once
// so that the log never outlives its record (a log's first XADD makes it
// with no TTL); keepLive(ms) for ms from now at least, never shorter than
// they were kept. appendLog(n, from) appends ARGV[from] on to a log of n
// events, each at its sequence number's id, so that Redis itself refuses
// one out of order.
const bgLua = `local function keepUntil(at)
  redis.call('PEXPIREAT', KEYS[1], at)
  redis.call('PEXPIREAT', KEYS[2], at)
end
local function keepLive(ms) keepUntil(math.max(redis.call('PEXPIRETIME', KEYS[1]), now + tonumber(ms))) end
local function appendLog(n, from)
  for i = from, #ARGV do
    n = n + 1
    redis.call('XADD', KEYS[2], string.format('0-%d', n), 'f', ARGV[i])
  end
end
`

// bgCreateScript: ARGV the owner, its lease in ms, how long a live
// record is kept in ms, the request, the response, stream, ended and
// cancel, then the events. A response created again under its id begins
// anew.
const bgCreateScript = `redis.call('DEL', KEYS[1], KEYS[2])
` + leaseLua + bgLua + `redis.call('HSET', KEYS[1], 'epoch', '1', 'owner', ARGV[1], 'lease', leaseEnd(ARGV[2]),
  'request', ARGV[4], 'response', ARGV[5], 'stream', ARGV[6], 'ended', ARGV[7], 'cancel', ARGV[8])
appendLog(0, 9)
keepLive(ARGV[3])
return 1`

// bgWriteScript: ARGV the writer's epoch, the events its log holds before
// these, the owner, its lease in ms, 1 and the response or 0 and nothing,
// ended (1 or 0), Keep in ms, how long a live record is kept in ms, then
// the events. Ended, the record is kept for Keep from now; live, as long
// as a live one is at least; a write after the end leaves its TTL be.
const bgWriteScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'ended', 'cancel')
if not h[1] then return -1 end
if h[1] ~= ARGV[1] then return 0 end
local n = redis.call('XLEN', KEYS[2])
if n ~= tonumber(ARGV[2]) then return -2 end
` + leaseLua + bgLua + `appendLog(n, 10)
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'lease', leaseEnd(ARGV[4]))
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'response', ARGV[6]) end
if ARGV[7] == '1' then
  redis.call('HSET', KEYS[1], 'ended', '1')
  keepUntil(now + tonumber(ARGV[8]))
elseif h[2] ~= '1' then
  keepLive(ARGV[9])
end
if h[3] == '1' then return 2 end
return 1`

// bgGetScript returns the record's epoch, owner, whether its lease is
// live (1 or 0), request, response, stream, its log's length, ended and
// cancel; nothing when there is none.
const bgGetScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'owner', 'lease', 'request', 'response', 'stream', 'ended', 'cancel')
if not h[1] then return {} end
` + leaseLua + `return {h[1], h[2], leaseLive(h[3]) and '1' or '0', h[4], h[5], h[6], tostring(redis.call('XLEN', KEYS[2])), h[7], h[8]}`

// bgEventsScript: ARGV[1] the id of the last event not wanted. It
// returns the events after it, -1 when there is no record.
const bgEventsScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local out = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[2], '(' .. ARGV[1], '+')) do out[#out + 1] = e[2][2] end
return out`

// bgCancelScript marks a cancel asked of a record there is.
const bgCancelScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'cancel', '1')
return 1`

// bgTakeScript: ARGV the epoch read, the owner, its lease in ms, how long
// a live record is kept in ms.
const bgTakeScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'owner', 'lease', 'ended')
if not h[1] then return -1 end
if h[1] ~= ARGV[1] then return 0 end
` + leaseLua + bgLua + `if h[2] ~= ARGV[2] and leaseLive(h[3]) then return -3 end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'lease', leaseEnd(ARGV[3]))
if h[4] ~= '1' then keepLive(ARGV[4]) end
return 1`

func newBackgroundScripts() backgroundScripts {
	return backgroundScripts{create: redis.NewScript(bgCreateScript), write: redis.NewScript(bgWriteScript),
		get: redis.NewScript(bgGetScript), events: redis.NewScript(bgEventsScript),
		cancel: redis.NewScript(bgCancelScript), take: redis.NewScript(bgTakeScript)}
}
