package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tether-run/tether/runtime"
)

// A Store is a runtime.BackgroundStore too: each background response is
// its record, a hash, and its event log, a stream, both in its tenant's
// slot and kept alike (bgscripts.go); each operation is one script.
//
// A follower (BackgroundEvents with a wait) first reads the log after the
// event it has (XRANGE, in the script that checks the record is there),
// then, when there is nothing yet, waits for the next write with XREAD
// BLOCK from that event's id: what lands between the two is not lost, for
// XREAD answers at once with any entry past the id it is given. A blocked
// XREAD holds its connection for the wait, so followers take theirs from a
// pool of their own (Options.MaxFollowers), and never the connections
// that writes need.

// backgroundKeys are the keys of background response id of tenant: its
// record's hash and its log's stream.
func (s *Store) backgroundKeys(tenant, id string) []string {
	slot := s.slot(tenant)
	return []string{slot + ":b:" + id, slot + ":bl:" + id}
}

// logID is the id of the event of sequence number seq in its log; that of
// -1, 0-0, is before every event.
func logID(seq int) string { return "0-" + strconv.Itoa(seq+1) }

// liveMs is how long a live record is kept past a write or a take that
// leases it: its lease, then keep or another lease, whichever is longer,
// so that once its owner has died another server may still take it over,
// and its clients read it.
func liveMs(lease runtime.Lease, keep time.Duration) int64 {
	return keepMs(lease.TTL + max(lease.TTL, keep))
}

// flag is a boolean as the record's fields keep it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// CreateBackground implements runtime.BackgroundStore: one script that
// begins the record and its log anew, at epoch 1.
func (s *Store) CreateBackground(ctx context.Context, rec *runtime.BackgroundRecord, events [][]byte, lease runtime.Lease) error {
	args := make([]any, 0, 8+len(events))
	args = append(args, lease.Owner, lease.TTL.Milliseconds(), liveMs(lease, 0), rec.Request, rec.Response,
		flag(rec.Stream), flag(rec.Ended), flag(rec.Cancel))
	for _, e := range events {
		args = append(args, e)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.unavailable(s.bgScripts.create.Run(ctx, s.c, s.backgroundKeys(rec.Tenant, rec.ID), args...).Err())
}

// WriteBackground implements runtime.BackgroundStore: one script that
// compares the epoch and the log's length, appends the events, sets the
// response, the lease and the TTLs, and answers whether a cancel was
// asked.
func (s *Store) WriteBackground(ctx context.Context, w *runtime.BackgroundWrite) (bool, error) {
	args := make([]any, 0, 9+len(w.Events))
	args = append(args, strconv.FormatUint(w.Epoch, 10), w.At, w.Lease.Owner, w.Lease.TTL.Milliseconds(),
		flag(w.Response != nil), w.Response, flag(w.Ended), keepMs(w.Keep), liveMs(w.Lease, w.Keep))
	for _, e := range w.Events {
		args = append(args, e)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.bgScripts.write.Run(ctx, s.c, s.backgroundKeys(w.Tenant, w.ID), args...).Int64()
	switch {
	case err != nil:
		return false, s.unavailable(err)
	case n == scriptCancelAsked:
		return true, nil
	}
	return false, refusal(n, runtime.ErrNotStored)
}

// GetBackground implements runtime.BackgroundStore: one script that reads
// the record and its log's length, and compares its lease with Redis's
// clock.
func (s *Store) GetBackground(ctx context.Context, tenant, id string) (*runtime.BackgroundRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	v, err := s.bgScripts.get.Run(ctx, s.c, s.backgroundKeys(tenant, id)).StringSlice()
	switch {
	case err != nil:
		return nil, s.unavailable(err)
	case len(v) == 0:
		return nil, runtime.ErrNotStored
	case len(v) != 9:
		return nil, fmt.Errorf("redisstore: the background record of %s has %d fields", id, len(v))
	}
	epoch, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstore: the background record of %s: epoch %q", id, v[0])
	}
	events, err := strconv.Atoi(v[6])
	if err != nil {
		return nil, fmt.Errorf("redisstore: the background log of %s: length %q", id, v[6])
	}
	return &runtime.BackgroundRecord{Tenant: tenant, ID: id, Epoch: epoch, Owner: v[1], Leased: v[2] == "1",
		Request: []byte(v[3]), Response: []byte(v[4]), Stream: v[5] == "1", Events: events, Ended: v[7] == "1", Cancel: v[8] == "1"}, nil
}

// BackgroundEvents implements runtime.BackgroundStore. Without a wait it
// is one script, which reads the events after after, checking the record
// is there. With one, it runs that script on a connection of the
// followers' pool, and, when there is nothing yet, waits there with XREAD
// BLOCK. When ctx ends meanwhile, CLIENT UNBLOCK, from another
// connection, ends the wait: go-redis does not watch a context while it
// reads, and the connection would otherwise stay blocked, out of the pool,
// for the rest of the wait.
func (s *Store) BackgroundEvents(ctx context.Context, tenant, id string, after int, wait time.Duration) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	after = max(after, -1) // any after below 0 is every event
	keys := s.backgroundKeys(tenant, id)
	if wait <= 0 {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		v, err := s.bgScripts.events.Run(ctx, s.c, keys, logID(after)).Result()
		if err != nil {
			return nil, s.unavailable(err)
		}
		return logFrames(v)
	}

	rctx, cancel := context.WithTimeout(ctx, wait+s.opts.Timeout)
	defer cancel()
	cn := s.follow.Conn()
	defer cn.Close()
	client, frames, err := s.replayOn(rctx, cn, keys, after)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil || len(frames) > 0:
		return frames, err
	}
	// Should ctx end in the moment before Redis blocks (the read is on its
	// way, or queued behind nothing yet), the unblock finds nothing to end:
	// it is tried again until it ends the wait or the read has returned,
	// for the store's timeout at most (then the wait ends by itself).
	unblocked, read := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(unblocked)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
		defer cancel()
		for {
			if n, err := s.c.ClientUnblock(uctx, client).Result(); n > 0 || err != nil {
				return
			}
			select {
			case <-read:
				return
			case <-uctx.Done():
				return
			case <-time.After(unblockRetry):
			}
		}
	})
	// A sub-millisecond wait is one millisecond: BLOCK 0 is forever.
	block := max(wait.Round(time.Millisecond), time.Millisecond)
	streams, err := cn.XRead(rctx, &redis.XReadArgs{Streams: []string{keys[1], logID(after)}, Block: block}).Result()
	close(read)
	if !stop() {
		// The unblock has run, or runs: let it end before the connection
		// goes back to the pool, where it would end another's wait.
		<-unblocked
	}
	switch {
	case err == nil:
		return streamFrames(streams)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, redis.Nil): // the wait passed
		return nil, nil
	}
	return nil, s.unavailable(err)
}

// unblockRetry is how long an unblock that found no wait to end lets the
// read reach Redis before it tries again.
const unblockRetry = time.Millisecond

// replayOn runs the events script on cn, and CLIENT ID, which names cn to
// CLIENT UNBLOCK, in one round trip (EVAL in a second when Redis had
// forgotten the script).
func (s *Store) replayOn(ctx context.Context, cn *redis.Conn, keys []string, after int) (client int64, frames [][]byte, err error) {
	run := func(eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) (*redis.IntCmd, *redis.Cmd, error) {
		var id *redis.IntCmd
		var events *redis.Cmd
		_, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
			events = eval(ctx, p, keys, logID(after))
			id = p.ClientID(ctx)
			return nil
		})
		return id, events, err
	}
	id, events, err := run(s.bgScripts.events.EvalSha)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		id, events, err = run(s.bgScripts.events.Eval)
	}
	if err != nil {
		return 0, nil, s.unavailable(err)
	}
	frames, err = logFrames(events.Val())
	return id.Val(), frames, err
}

// logFrames are the events the events script answered, or ErrNotStored.
func logFrames(v any) ([][]byte, error) {
	switch v := v.(type) {
	case int64:
		return nil, runtime.ErrNotStored
	case []any:
		frames := make([][]byte, len(v))
		for i, f := range v {
			s, ok := f.(string)
			if !ok {
				return nil, fmt.Errorf("redisstore: a background event of type %T", f)
			}
			frames[i] = []byte(s)
		}
		return frames, nil
	}
	return nil, fmt.Errorf("redisstore: the background events script answered %T", v)
}

// streamFrames are the events an XREAD of one log answered.
func streamFrames(streams []redis.XStream) ([][]byte, error) {
	var frames [][]byte
	for _, st := range streams {
		for _, m := range st.Messages {
			f, ok := m.Values["f"].(string)
			if !ok {
				return nil, fmt.Errorf("redisstore: background event %s has no frame", m.ID)
			}
			frames = append(frames, []byte(f))
		}
	}
	return frames, nil
}

// CancelBackground implements runtime.BackgroundStore: one script that
// marks the cancel on a record there is.
func (s *Store) CancelBackground(ctx context.Context, tenant, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.bgScripts.cancel.Run(ctx, s.c, s.backgroundKeys(tenant, id)).Int64()
	if err != nil {
		return s.unavailable(err)
	}
	return refusal(n, runtime.ErrNotStored)
}

// TakeBackground implements runtime.BackgroundStore: one script, a
// compare-and-swap of the epoch, refused while another owner's lease is
// live, that leases the response to its new owner and keeps a live one as
// long as its lease needs.
func (s *Store) TakeBackground(ctx context.Context, tenant, id string, epoch uint64, lease runtime.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	n, err := s.bgScripts.take.Run(ctx, s.c, s.backgroundKeys(tenant, id), strconv.FormatUint(epoch, 10),
		lease.Owner, lease.TTL.Milliseconds(), liveMs(lease, 0)).Int64()
	if err != nil {
		return s.unavailable(err)
	}
	return refusal(n, runtime.ErrNotStored)
}

var _ runtime.BackgroundStore = (*Store)(nil)
