package redisstore

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/runtime"
)

// checkpointScripts are the Lua scripts that write checkpoints, each run
// with EVALSHA (EVAL once after Redis forgets it, as after a restart).
// Epochs are compared as Lua numbers in Save, exact below 2^53 (they count
// takeovers), and as strings in Take and Drop: both sides are canonical
// decimals, written by strconv or HINCRBY.
type checkpointScripts struct {
	save, take, drop *redis.Script
}

// The scripts' refusals; 1 is done.
const (
	scriptFenced = 0  // the stored epoch is not the caller's (higher, for Save)
	scriptNone   = -1 // no checkpoint (Take)
)

func newCheckpointScripts() checkpointScripts {
	return checkpointScripts{
		// KEYS[1] the checkpoint; ARGV epoch, creds, data, ttl in ms.
		save: redis.NewScript(`
local stored = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if stored > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'creds', ARGV[2], 'data', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`),
		// KEYS[1] the checkpoint; ARGV the epoch read.
		take: redis.NewScript(`
local stored = redis.call('HGET', KEYS[1], 'epoch')
if not stored or redis.call('HEXISTS', KEYS[1], 'data') == 0 then return -1 end
if stored ~= ARGV[1] then return 0 end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
return 1`),
		// KEYS[1] the checkpoint; ARGV the caller's epoch, the TTL in ms.
		drop: redis.NewScript(`
local stored = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if stored > tonumber(ARGV[1]) then return 0 end
redis.call('HDEL', KEYS[1], 'creds', 'data')
redis.call('HSET', KEYS[1], 'epoch', tonumber(ARGV[1]) + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`),
	}
}

// cpKey is the hash of rollout id's checkpoint under tenant, hash-tagged
// by the response. Two checkpoints never share a key, whatever braces or
// colons an id holds: the tenant, last, is hex-coded and has no colon.
func (s *Store) cpKey(tenant, id string) string {
	return "tether:{r:" + id + "}:cp:" + hex.EncodeToString([]byte(tenant))
}

// Save implements runtime.Checkpoints: one script that compares the
// epochs, writes the fields and sets the TTL.
func (s *Store) Save(ctx context.Context, cp *runtime.Checkpoint, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms == 0 && ttl > 0 {
		ms = 1 // PEXPIRE 0 would delete it at once
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.scripts.save.Run(ctx, s.c, []string{s.cpKey(cp.Tenant, cp.ID)},
		strconv.FormatUint(cp.Epoch, 10), cp.Creds, cp.Data, ms).Int()
	if err != nil {
		return s.unavailable(err)
	}
	if n == scriptFenced {
		return runtime.ErrFenced
	}
	return nil
}

// Load implements runtime.Checkpoints: one HMGET.
func (s *Store) Load(ctx context.Context, tenant, id, creds string) (*runtime.Checkpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	vals, err := s.c.HMGet(ctx, s.cpKey(tenant, id), "epoch", "creds", "data").Result()
	if err != nil {
		return nil, s.unavailable(err)
	}
	epoch, ok1 := vals[0].(string)
	stored, ok2 := vals[1].(string)
	data, ok3 := vals[2].(string)
	if !ok3 {
		return nil, runtime.ErrNoCheckpoint // expired, dropped (its epoch kept) or never saved
	}
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("redisstore: the checkpoint of %s lacks a field", id)
	}
	if subtle.ConstantTimeCompare([]byte(stored), []byte(creds)) != 1 {
		return nil, runtime.ErrNoCheckpoint
	}
	e, err := strconv.ParseUint(epoch, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstore: the checkpoint of %s: epoch %q", id, epoch)
	}
	return &runtime.Checkpoint{Tenant: tenant, ID: id, Creds: creds, Epoch: e, Data: []byte(data)}, nil
}

// Take implements runtime.Checkpoints: one script, a compare-and-swap of
// the epoch that keeps the TTL.
func (s *Store) Take(ctx context.Context, tenant, id string, epoch uint64) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.scripts.take.Run(ctx, s.c, []string{s.cpKey(tenant, id)}, strconv.FormatUint(epoch, 10)).Int()
	switch {
	case err != nil:
		return s.unavailable(err)
	case n == scriptNone:
		return runtime.ErrNoCheckpoint
	case n == scriptFenced:
		return runtime.ErrFenced
	}
	return nil
}

// Drop implements runtime.Checkpoints: one script that, unless a higher
// epoch owns the hash, deletes its credentials and data and leaves only
// the epoch, raised past the caller's, for ttl.
func (s *Store) Drop(ctx context.Context, tenant, id string, epoch uint64, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.unavailable(s.scripts.drop.Run(ctx, s.c, []string{s.cpKey(tenant, id)}, strconv.FormatUint(epoch, 10),
		max(ttl.Milliseconds(), 1)).Err())
}

var _ runtime.Checkpoints = (*Store)(nil)
