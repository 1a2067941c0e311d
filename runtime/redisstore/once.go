package redisstore

import (
	"context"
	"time"
)

// UseOnce records the use of id (a client secret's nonce) until until for
// every server on this Redis, and reports whether it was the first
// (runtime.OnceStore): SET NX with the secret's expiry, so that no two
// servers take one secret.
func (s *Store) UseOnce(ctx context.Context, id string, until time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	ttl := time.Until(until)
	if ttl <= 0 {
		return false, nil
	}
	first, err := s.c.SetNX(ctx, "tether:once:"+id, 1, ttl).Result()
	if err != nil {
		return false, s.unavailable(err)
	}
	return first, nil
}
