package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
)

// Store keeps store: true responses in Redis, where every tether
// server that uses the same database reads them: a chain started on one
// continues on another, over HTTP or after a WebSocket's cache miss, and a
// response deleted on one is gone on all. Connection caches stay in the
// process that holds them. A Store is also a runtime.Checkpoints, which
// keeps suspended rollouts' state at their pauses (checkpoints.go), a
// runtime.ConversationPager, which keeps the Conversations API's
// conversations (conversations.go), and a runtime.BackgroundStore, which
// keeps background responses and their event logs (background.go).
//
// Each response is one key, written whole in one SET (so it is visible
// only once whole), with a TTL: tether:{tTENANT}:r:ID, its tenant hex-coded
// in the key, so that an id read under another tenant's key is simply not
// there. The value is msgpack of the record, with the ids of the stored
// responses before it in its conversation: a chain loads in two round
// trips whatever its length (GET the last, MGET the rest). Rendered tokens
// are not kept (a continuation renders the chain again).
//
// When Redis is down or slow, every operation fails within Timeout with
// store_unavailable (503); the client reconnects by itself.
type Store struct {
	c           *redis.Client
	follow      *redis.Client // the followers' pool: XREAD BLOCK holds a connection while it waits (background.go)
	opts        Options
	scripts     checkpointScripts
	convScripts conversationScripts
	bgScripts   backgroundScripts
}

// Options tune a RedisStore; zero fields take the defaults.
type Options struct {
	TTL            time.Duration // how long a response is kept, and a conversation after its last addition: DefaultTTL
	MaxRecordBytes int           // the largest record kept: DefaultMaxRecordBytes
	Timeout        time.Duration // bounds each operation: DefaultTimeout

	// MaxConversationBytes bounds one conversation of the Conversations
	// API: what its keys hold (its object, metadata included, and its
	// items, encoded, each with its entry in the index of their ids). An
	// addition past it, or past MaxTenantConversationBytes, is refused
	// (runtime.ErrTooLarge): DefaultMaxConversationBytes.
	MaxConversationBytes int
	// MaxTenantConversationBytes bounds one tenant's conversations
	// together, counted alike: an addition past it is refused
	// (runtime.ErrTenantFull): runtime.DefaultTenantStoreBytes, as the
	// memory store bounds a tenant's.
	MaxTenantConversationBytes int

	// MaxFollowers bounds the connections on which followers of
	// background responses' logs wait for their next events (XREAD
	// BLOCK), one each while it waits, apart from those of every other
	// operation: past it a follower waits up to half the Timeout for one,
	// then fails with store_unavailable. DefaultMaxFollowers.
	MaxFollowers int
}

// The defaults of a Store.
const (
	DefaultTTL            = 30 * 24 * time.Hour // as OpenAI keeps responses
	DefaultMaxRecordBytes = 64 << 20
	DefaultTimeout        = 2 * time.Second
	// As large as the largest record: a response on a conversation reads
	// all of it as its context, as a continuation reads its record.
	DefaultMaxConversationBytes = DefaultMaxRecordBytes
	DefaultMaxFollowers         = 256
)

// setDefaults fills o's zero fields.
func (o *Options) setDefaults() {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxConversationBytes <= 0 {
		o.MaxConversationBytes = DefaultMaxConversationBytes
	}
	if o.MaxTenantConversationBytes <= 0 {
		o.MaxTenantConversationBytes = runtime.DefaultTenantStoreBytes
	}
	if o.MaxFollowers <= 0 {
		o.MaxFollowers = DefaultMaxFollowers
	}
}

// New connects to the Redis at url (redis://[:PASSWORD@]HOST:PORT/DB,
// or rediss:// for TLS). The connection is made lazily; Ping checks it.
func New(url string, opts Options) (*Store, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %q: %w", url, err)
	}
	opts.setDefaults()
	quietRedis.Do(func() { redis.SetLogger(redisLog{}) })
	// Fail fast when Redis is down: one retry, each step bounded well
	// inside the operation's Timeout.
	ro.MaxRetries = 1
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = opts.Timeout/2, opts.Timeout/2, opts.Timeout/2, opts.Timeout/2
	fo := *ro
	fo.PoolSize = opts.MaxFollowers
	return &Store{c: redis.NewClient(ro), follow: redis.NewClient(&fo), opts: opts, scripts: newCheckpointScripts(),
		convScripts: newConversationScripts(), bgScripts: newBackgroundScripts()}, nil
}

// quietRedis makes go-redis's own log (process-wide: a dial that failed,
// while Redis is down) slog debug messages: what matters reaches the
// client as store_unavailable, and the server's log says so.
var quietRedis sync.Once

type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.unavailable(s.c.Ping(ctx).Err())
}

// Close closes the connections to Redis.
func (s *Store) Close() error { return errors.Join(s.c.Close(), s.follow.Close()) }

// redisRecord is a record as it is kept.
type redisRecord struct {
	Response *protocol.Response `json:"response"`
	Input    protocol.Items     `json:"input"`
	Items    protocol.Items     `json:"items"`
	Chain    []string           `json:"chain,omitempty"`
	Tenant   string             `json:"tenant"`
}

// slot is the prefix of a tenant's keys: its tenant hex-coded in a hash tag,
// so that one tenant's keys share a Redis Cluster slot.
func (s *Store) slot(tenant string) string {
	return "tether:{t" + hex.EncodeToString([]byte(tenant)) + "}"
}

func (s *Store) key(tenant, id string) string { return s.slot(tenant) + ":r:" + id }

// itemKey is where the id of the latest response of tenant that holds
// item id is kept, in the tenant's slot.
func (s *Store) itemKey(tenant, id string) string { return s.slot(tenant) + ":i:" + id }

// Put writes rec whole, and the index of its items by id, in one
// pipeline of SETs with the TTL.
func (s *Store) Put(ctx context.Context, rec *runtime.Record) error {
	b, err := protocol.MarshalAs(protocol.EncodingMsgpack, redisRecord{rec.Response, rec.Input, rec.Items, rec.Chain, rec.Tenant})
	if err != nil {
		return err
	}
	if len(b) > s.opts.MaxRecordBytes {
		return runtime.ErrTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.key(rec.Tenant, rec.Response.ID), b, s.opts.TTL)
		items := rec.Items
		if items == nil {
			items = append(slices.Clip(rec.Input), rec.Response.Output...)
		}
		for _, it := range items {
			if id := it.ItemID(); id != "" {
				p.Set(ctx, s.itemKey(rec.Tenant, id), rec.Response.ID, s.opts.TTL)
			}
		}
		return nil
	})
	return s.unavailable(err)
}

// GetItemRecord reads the record of the latest response of the context's
// tenant that holds item itemID (runtime.ItemStore): its id from the
// index, then the record. An item of a response deleted since is not
// found.
func (s *Store) GetItemRecord(ctx context.Context, itemID string) (*runtime.Record, error) {
	tctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	id, err := s.c.Get(tctx, s.itemKey(runtime.Tenant(ctx), itemID)).Result()
	cancel()
	if errors.Is(err, redis.Nil) {
		return nil, runtime.ErrNotStored
	}
	if err != nil {
		return nil, s.unavailable(err)
	}
	return s.Get(ctx, id)
}

// Get reads id under the context's tenant.
func (s *Store) Get(ctx context.Context, id string) (*runtime.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	b, err := s.c.Get(ctx, s.key(runtime.Tenant(ctx), id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, runtime.ErrNotStored
	}
	if err != nil {
		return nil, s.unavailable(err)
	}
	return decodeRedisRecord(b)
}

// Delete removes id under the context's tenant.
func (s *Store) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.c.Del(ctx, s.key(runtime.Tenant(ctx), id)).Result()
	if err != nil {
		return s.unavailable(err)
	}
	if n == 0 {
		return runtime.ErrNotStored
	}
	return nil
}

// GetChain reads the conversation that ends with id, last first: its
// record, then every record its chain names, in one MGET.
func (s *Store) GetChain(ctx context.Context, id string) ([]*runtime.Record, error) {
	head, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	chain := head.Chain
	if len(chain) == 0 {
		return []*runtime.Record{head}, nil
	}
	tenant := runtime.Tenant(ctx)
	keys := make([]string, len(chain))
	for i, c := range chain {
		keys[i] = s.key(tenant, c)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	vals, err := s.c.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, s.unavailable(err)
	}
	recs := []*runtime.Record{head}
	for i := len(vals) - 1; i >= 0; i-- { // the chain is oldest first
		v, ok := vals[i].(string)
		if !ok {
			return nil, runtime.ErrNotStored // expired or deleted: the conversation is broken, as a missing parent
		}
		rec, err := decodeRedisRecord([]byte(v))
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

func decodeRedisRecord(b []byte) (*runtime.Record, error) {
	js, err := protocol.ToJSON(protocol.EncodingMsgpack, b)
	if err != nil {
		return nil, fmt.Errorf("redisstore: a stored record: %w", err)
	}
	var r redisRecord
	if err := protocol.Unmarshal(js, &r); err != nil || r.Response == nil {
		return nil, fmt.Errorf("redisstore: a stored record: %v", err)
	}
	return &runtime.Record{Response: r.Response, Input: r.Input, Items: r.Items, Chain: r.Chain, Tenant: r.Tenant}, nil
}

// unavailable turns a Redis failure into store_unavailable.
func (s *Store) unavailable(err error) error {
	if err == nil {
		return nil
	}
	return runtime.StoreUnavailable(err)
}

var (
	_ runtime.ChainStore = (*Store)(nil)
	_ runtime.ItemStore  = (*Store)(nil)
)
