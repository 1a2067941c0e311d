package redisstore

import (
	"time"

	"github.com/tether-run/tether/runtime"
)

// This file is what the scripts of checkpoints (checkpoints.go) and of
// background responses (bgscripts.go) share: their leases, their
// refusals, and their TTLs.

// The scripts' refusals; 1 is done.
const (
	scriptFenced = 0  // the stored epoch is not the caller's (higher, for a checkpoint's Write)
	scriptNone   = -1 // nothing stored
	scriptGap    = -2 // the journal or log does not hold the entries its writer counted
	scriptLeased = -3 // another owner's lease is live
)

// refusal is the error a script's answer n stands for, none when there is
// nothing stored (each store says that its own way); nil when it is done.
func refusal(n int64, none error) error {
	switch n {
	case scriptFenced:
		return runtime.ErrFenced
	case scriptNone:
		return none
	case scriptGap:
		return runtime.ErrJournalGap
	case scriptLeased:
		return runtime.ErrOwnedElsewhere
	}
	return nil
}

// leaseLua, in a script, is Redis's clock in milliseconds (TIME), now, so
// that the servers' clocks need not agree, and the arithmetic of leases
// on it: leaseEnd(ms) is when a lease of ms taken now ends, as a hash's
// lease field keeps it (a decimal), and leaseLive(v) whether the lease a
// field kept as v (nil: none) still runs.
const leaseLua = `local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local function leaseEnd(ms) return string.format('%d', now + tonumber(ms)) end
local function leaseLive(v) return tonumber(v or '0') > now end
`

// keepMs is how long a key is kept, in milliseconds as PEXPIRE takes
// them: at least one, for PEXPIRE 0 would delete the key at once.
func keepMs(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
