package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"log/slog"
	"net/url"
	"time"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/redisstore"
)

// openRedis opens --store redis://… (rediss://, unix://): a store every
// tether on that database shares, which makes suspended rollouts durable.
// It sets opts' compaction key to the one every server there shares, so
// that a compaction item (in a request, or in a checkpoint taken over)
// opens on any of them, and the client-secret key drawn from it. A Redis
// that does not answer yet is served all the same: it may come up later,
// and store: false traffic needs none.
func openRedis(ctx context.Context, url string, o redisstore.Options, opts *runtime.Options, log *slog.Logger) (*redisstore.Store, error) {
	rs, err := redisstore.New(url, o)
	if err != nil {
		return nil, err
	}
	if err := rs.Ping(ctx); err != nil {
		log.Warn("the store does not answer yet", "store", redactURL(url), "err", err)
	}
	if key, err := sharedCompactionKey(ctx, rs); err != nil {
		log.Warn("no shared compaction key: compaction items (and checkpoints holding them) open only on this server", "err", err)
	} else {
		opts.CompactionKey = key
		// Client secrets one server mints, the others take.
		opts.SecretKey = derivedKey(key, "tether client secrets")
	}
	return rs, nil
}

// redactURL is u without its password, for logs.
func redactURL(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable)"
}

// sharedCompactionKey reads the compaction key every server on rs shares,
// trying for a second and a half: a server that starts while Redis is down and
// seals with a key of its own makes items no other server opens.
func sharedCompactionKey(ctx context.Context, rs *redisstore.Store) ([]byte, error) {
	var err error
	for wait := 100 * time.Millisecond; wait <= time.Second; wait *= 2 { // 1.5 s in all
		var key []byte
		if key, err = rs.CompactionKey(ctx); err == nil {
			return key, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil, err
}

// derivedKey is a key for purpose drawn from a shared one (HMAC-SHA256):
// the servers that share key share it, and it says nothing of key.
func derivedKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
