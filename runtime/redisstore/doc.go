// Package redisstore keeps a tether server's stored responses in Redis, so
// that every server sharing the database continues any of them, and
// suspended rollouts' checkpoints, so that any of them can take a rollout
// over. It is an optional layer: its Store implements runtime.Store (and
// runtime.ChainStore) and runtime.Checkpoints, and brings go-redis, which
// package runtime does not import.
//
// A stored response is one string key, tether:{tTENANT}:r:ID (see Store).
// A checkpoint is one hash, tether:{r:ID}:cp:TENANT, with the fields epoch,
// creds and data, and a TTL; TENANT is hex-coded in both, so that an id
// read under another tenant is simply not there. The checkpoint's key is
// hash-tagged by the response, so that in a Redis Cluster one slot holds a
// rollout's keys. Each write is one Lua script, atomic in Redis: Save
// refuses when the stored epoch (none is 0) is higher than the one it
// writes at, else sets the three fields and the TTL; Take raises the epoch
// by one (HINCRBY, which keeps the TTL) only when it is still the one the
// caller read, and the checkpoint is not dropped; Drop, only when the epoch
// is the caller's, deletes the credentials and the data and keeps the epoch
// until the TTL ends, so that a server fenced out cannot write it again.
// Load is one HMGET, its credentials compared here.
package redisstore
