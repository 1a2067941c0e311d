package redisstore

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/runtime"
)

// checkpointScripts are the Lua scripts that read and write journals and
// their leases, each run with EVALSHA (EVAL once after Redis forgets it,
// as after a restart). Epochs are compared as Lua numbers in Write and
// Drop, exact below 2^53 (they count takeovers), and as strings elsewhere:
// both sides are canonical decimals, written by strconv or HINCRBY. A
// lease ends at a time in milliseconds of Redis's clock (TIME), so that
// the servers' clocks need not agree.
type checkpointScripts struct {
	write, load, take, drop, renew, release *redis.Script
}

// writeScript: KEYS the head's hash, the entries' list; ARGV epoch, creds,
// head, ttl in ms, reset (1) or append (0), the entries the append
// expects, the owner, its lease in ms, the entries.
const writeScript = `
local stored = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if stored > tonumber(ARGV[1]) then return 0 end
if ARGV[5] == '1' then
  redis.call('DEL', KEYS[2])
elseif redis.call('HEXISTS', KEYS[1], 'head') == 0 or redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[6]) then
  return -2
end
if #ARGV >= 9 then redis.call('RPUSH', KEYS[2], unpack(ARGV, 9)) end
` + leaseLua + `redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'creds', ARGV[2], 'head', ARGV[3],
  'owner', ARGV[7], 'lease', leaseEnd(ARGV[8]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1`

// loadScript: KEYS the head's hash, the entries' list. It returns the
// epoch, the credentials and the head, then the entries; nothing when
// there is no journal.
const loadScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'creds', 'head')
if not h[1] or not h[2] or not h[3] then return {} end
local out = {h[1], h[2], h[3]}
for _, e in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do out[#out + 1] = e end
return out`

// takeScript: KEYS[1] the head's hash; ARGV the epoch read, the owner,
// its lease in ms.
const takeScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'owner', 'lease')
if not h[1] or redis.call('HEXISTS', KEYS[1], 'head') == 0 then return -1 end
if h[1] ~= ARGV[1] then return 0 end
` + leaseLua + `if h[2] ~= ARGV[2] and leaseLive(h[3]) then return -3 end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'lease', leaseEnd(ARGV[3]))
return 1`

// renewScript: KEYS the head's hash, the entries' list; ARGV the owner's
// epoch, the owner, its lease in ms, the journal's TTL in ms. 0: the
// journal is no longer there at that epoch.
const renewScript = `
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'head') == 0 then return 0 end
` + leaseLua + `redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'lease', leaseEnd(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[4], 'GT')
redis.call('PEXPIRE', KEYS[2], ARGV[4], 'GT')
return 1`

// releaseScript: KEYS[1] the head's hash; ARGV the owner's epoch, the
// owner.
const releaseScript = `
local h = redis.call('HMGET', KEYS[1], 'epoch', 'owner')
if h[1] == ARGV[1] and h[2] == ARGV[2] then redis.call('HSET', KEYS[1], 'lease', '0') end
return 1`

// dropScript: KEYS the head's hash, the entries' list; ARGV the caller's
// epoch, the TTL in ms.
const dropScript = `
local stored = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if stored > tonumber(ARGV[1]) then return 0 end
redis.call('HDEL', KEYS[1], 'creds', 'head', 'owner', 'lease')
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'epoch', tonumber(ARGV[1]) + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`

func newCheckpointScripts() checkpointScripts {
	return checkpointScripts{write: redis.NewScript(writeScript), load: redis.NewScript(loadScript),
		take: redis.NewScript(takeScript), drop: redis.NewScript(dropScript),
		renew: redis.NewScript(renewScript), release: redis.NewScript(releaseScript)}
}

// journalKeys are the keys of rollout id's journal under tenant: its head's
// hash and its entries' list, hash-tagged by the response. Two journals
// never share a key, whatever braces or colons an id holds: the tenant,
// last, is hex-coded and has no colon.
func (s *Store) journalKeys(tenant, id string) []string {
	t := hex.EncodeToString([]byte(tenant))
	return []string{"tether:{r:" + id + "}:cp:" + t, "tether:{r:" + id + "}:cj:" + t}
}

// Write implements runtime.Checkpoints: one script that compares the
// epochs and the entries' count, appends the entries (or begins the list
// anew), rewrites the head and sets the TTL of both keys.
func (s *Store) Write(ctx context.Context, w *runtime.JournalWrite, ttl time.Duration) error {
	reset := "0"
	if w.Reset {
		reset = "1"
	}
	args := make([]any, 0, 8+len(w.Entries))
	args = append(args, strconv.FormatUint(w.Epoch, 10), w.Creds, w.Head, keepMs(ttl), reset, w.At, w.Lease.Owner, w.Lease.TTL.Milliseconds())
	for _, e := range w.Entries {
		args = append(args, e)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.scripts.write.Run(ctx, s.c, s.journalKeys(w.Tenant, w.ID), args...).Int64()
	if err != nil {
		return s.unavailable(err)
	}
	return refusal(n, runtime.ErrNoCheckpoint)
}

// Load implements runtime.Checkpoints: one script that reads the head's
// fields and the entries, at one moment.
func (s *Store) Load(ctx context.Context, tenant, id, creds string) (*runtime.Journal, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	vals, err := s.scripts.load.Run(ctx, s.c, s.journalKeys(tenant, id)).StringSlice()
	if err != nil {
		return nil, s.unavailable(err)
	}
	if len(vals) == 0 {
		return nil, runtime.ErrNoCheckpoint // expired, dropped (its epoch kept) or never written
	}
	if len(vals) < 3 {
		return nil, fmt.Errorf("redisstore: the journal of %s lacks a field", id)
	}
	if subtle.ConstantTimeCompare([]byte(vals[1]), []byte(creds)) != 1 {
		return nil, runtime.ErrNoCheckpoint
	}
	e, err := strconv.ParseUint(vals[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstore: the journal of %s: epoch %q", id, vals[0])
	}
	j := &runtime.Journal{Tenant: tenant, ID: id, Creds: creds, Epoch: e, Head: []byte(vals[2]), Entries: make([][]byte, len(vals)-3)}
	for i, v := range vals[3:] {
		j.Entries[i] = []byte(v)
	}
	return j, nil
}

// Take implements runtime.Checkpoints: one script, a compare-and-swap of
// the epoch, refused while another owner's lease is live, that keeps the
// TTL.
func (s *Store) Take(ctx context.Context, tenant, id string, epoch uint64, lease runtime.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.scripts.take.Run(ctx, s.c, s.journalKeys(tenant, id)[:1], strconv.FormatUint(epoch, 10),
		lease.Owner, lease.TTL.Milliseconds()).Int64()
	if err != nil {
		return s.unavailable(err)
	}
	return refusal(n, runtime.ErrNoCheckpoint)
}

// Renew implements runtime.Checkpoints: one script a rollout, in one
// pipeline (their keys hash to different slots, so no one script may
// touch them all).
func (s *Store) Renew(ctx context.Context, lease runtime.Lease, refs []runtime.LeaseRef, ttl time.Duration) ([]bool, error) {
	cmds, err := s.pipelined(ctx, s.scripts.renew, refs, 2, func(r runtime.LeaseRef) []any {
		return []any{strconv.FormatUint(r.Epoch, 10), lease.Owner, lease.TTL.Milliseconds(), keepMs(ttl)}
	})
	if err != nil {
		return nil, err
	}
	lost := make([]bool, len(refs))
	for i, c := range cmds {
		n, err := c.Int()
		if err != nil {
			return nil, s.unavailable(err)
		}
		lost[i] = n == scriptFenced
	}
	return lost, nil
}

// Release implements runtime.Checkpoints: one script a rollout, in one
// pipeline.
func (s *Store) Release(ctx context.Context, owner string, refs []runtime.LeaseRef) error {
	cmds, err := s.pipelined(ctx, s.scripts.release, refs, 1, func(r runtime.LeaseRef) []any {
		return []any{strconv.FormatUint(r.Epoch, 10), owner}
	})
	for _, c := range cmds {
		err = cmp.Or(err, c.Err())
	}
	return s.unavailable(err)
}

// pipelined runs script once for each of refs, on the first keys of its
// journal (1: the head's; 2: and the entries') with args(ref), in one
// round trip: EVALSHA, and EVAL once more for them all if Redis had
// forgotten the script.
func (s *Store) pipelined(ctx context.Context, script *redis.Script, refs []runtime.LeaseRef, keys int, args func(runtime.LeaseRef) []any) ([]*redis.Cmd, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	run := func(eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, len(refs))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, r := range refs {
				cmds[i] = eval(ctx, p, s.journalKeys(r.Tenant, r.ID)[:keys], args(r)...)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run(script.EvalSha)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = run(script.Eval)
	}
	if err != nil {
		return nil, s.unavailable(err)
	}
	return cmds, nil
}

// Drop implements runtime.Checkpoints: one script that, unless a higher
// epoch owns the journal, deletes its entries, credentials and head and
// leaves only the epoch, raised past the caller's, for ttl.
func (s *Store) Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.unavailable(s.scripts.drop.Run(ctx, s.c, s.journalKeys(tenant, id), strconv.FormatUint(epoch, 10),
		keepMs(ttl)).Err())
}

var _ runtime.Checkpoints = (*Store)(nil)
