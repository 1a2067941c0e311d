// Package redisstore keeps a tether server's stored responses in Redis, so
// that every server sharing the database continues any of them, and
// suspended rollouts' checkpoints, so that any of them can take a rollout
// over, and the Conversations API's conversations, bounded per
// conversation and per tenant and read a page at a time
// (conversations.go). It is an optional layer: its Store implements
// runtime.Store (and runtime.ChainStore), runtime.Checkpoints and
// runtime.ConversationPager, and brings go-redis, which package runtime
// does not import.
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
package redisstore
