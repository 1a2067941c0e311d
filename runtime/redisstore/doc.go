// Package redisstore keeps a tether server's stored responses in Redis, so
// that every server sharing the database continues any of them, and
// suspended rollouts' checkpoints, so that any of them can take a rollout
// over, and the Conversations API's conversations, bounded per
// conversation and per tenant and read a page at a time
// (conversations.go), and background responses, so that any of them
// serves a poll or a resumed stream of one another runs, or takes it over
// (background.go). It is an optional layer: its Store implements
// runtime.Store (and runtime.ChainStore), runtime.Checkpoints,
// runtime.ConversationPager and runtime.BackgroundStore, and brings
// go-redis, which package runtime does not import.
//
// A stored response is one string key, tether:{tTENANT}:r:ID (see Store).
// A suspended rollout's journal is two keys: its head, the hash
// tether:{r:ID}:cp:TENANT with the fields epoch, creds, head, owner and
// lease, and its
// entries, the list tether:{r:ID}:cj:TENANT, both with one TTL; TENANT is
// hex-coded in all, so that an id read under another tenant is simply not
// there. The journal's keys are hash-tagged by the response, so that in a
// Redis Cluster one slot holds them. Each operation is one Lua script,
// atomic in Redis: Write refuses when the stored epoch (none is 0) is
// higher than the one it writes at, or when it appends and the list does
// not hold the entries its writer counted, else appends the entries (or
// begins the list anew), sets the head's fields and the TTL of both keys;
// Load reads the head's fields and the entries at one moment, the
// credentials compared here; Take raises the epoch by one (HINCRBY, which
// keeps the TTL) only when it is still the one the caller read, the
// journal is not dropped, and no other owner's lease is live; Drop, only
// when the epoch is the caller's, deletes the entries, the credentials,
// the head and the lease and keeps the epoch until the TTL ends, so that a
// server fenced out cannot write it again. A Write or a Take leases the
// rollout to its caller (owner, and lease: when it ends, in milliseconds
// of Redis's clock, TIME, so that servers' clocks need not agree); Renew
// and Release act on many rollouts in one pipeline, a script each, for
// their keys hash to different slots.
//
// A background response is two keys in its tenant's slot: its record, the
// hash tether:{tTENANT}:b:ID with the fields epoch, owner, lease, request,
// response, stream, ended and cancel, and its event log, the Redis Stream
// tether:{tTENANT}:bl:ID, whose entry 0-N holds the event of sequence
// number N-1 in its one field, f. A stream, rather than a list and
// Pub/Sub, because it is at once the log a late reader replays (XRANGE
// from an id) and the channel a live one waits on (XREAD BLOCK from the
// id it has read to, which answers at once with anything written past it:
// nothing lands unseen between the replay and the wait, as it would
// between a read and a SUBSCRIBE, and nothing is lost for want of a
// subscriber, as a message published to none is); and ids of the
// sequence numbers make Redis refuse an append out of order. Each write
// is one script: it refuses unless the stored epoch is the writer's
// (ErrFenced) and the log holds the events the writer counted
// (ErrJournalGap), appends the events, replaces the response when there
// is one, leases the response to its writer (in Redis's TIME, as for
// journals), sets both keys to expire at one moment, and answers whether
// a cancel was asked. A live response is kept its lease and, after it,
// Keep or another lease, whichever is longer, never shortened while it
// runs, so that a dead owner's response stays to be taken over; an ended
// one, Keep. A follower waits on a connection of a pool of its own
// (Options.MaxFollowers), which CLIENT UNBLOCK frees if the follower's
// context ends first.
package redisstore
