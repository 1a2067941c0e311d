package runtime

import "errors"

// secretNonce is a client secret's nonce, decoded: what marks it used.
type secretNonce [16]byte

// usedRingSeconds is the span of usedSecrets' ring, in seconds: past the
// longest life a secret is minted with (maxSecretLife), with room for a
// clock that steps back a few minutes between a secret's minting and its
// use.
const usedRingSeconds = 1024

// The ways usedSecrets.use refuses a secret.
var (
	errSecretUsed      = errors.New("runtime: client secret used already")
	errSecretTooLong   = errors.New("runtime: client secret expires past what the used set spans")
	errUsedSecretsFull = errors.New("runtime: too many client secrets in use")
)

// usedSecrets is the set of the client secrets used on a server that has
// no OnceStore, each held until it expires, when it could not be used
// again anyway.
//
// Its entries sit in a ring of one-second buckets by expiry. A use first
// empties the buckets whose second has passed since the one before, then
// looks its nonce up and adds it to its expiry's bucket: each entry is
// added once and dropped once, so that a use costs the same whether the
// set holds none or a million (amortized: a use after a quiet spell empties
// what expired meanwhile, at most the ring's length of buckets).
//
// It holds at most max entries. At the bound a use is refused
// (errUsedSecretsFull) until some expire: forgetting a used secret early
// would let it be used again. An expiry further ahead than the ring spans
// is refused too (errSecretTooLong), as its bucket would be emptied before
// its time.
//
// It is not safe for concurrent use: clientSecrets.mu guards it.
type usedSecrets struct {
	max  int
	held map[secretNonce]struct{}
	ring [usedRingSeconds][]secretNonce // by expiry second, modulo the ring's length
	// next is the earliest expiry second still held: the bucket of every
	// second before it has been emptied.
	next int64
	// examined counts the buckets and entries the emptying has looked at:
	// the work uses do besides their own lookup, which tests bound.
	examined int
}

func newUsedSecrets(max int) *usedSecrets {
	return &usedSecrets{max: max, held: map[secretNonce]struct{}{}}
}

// use marks nonce, which expires at exp (Unix seconds), used at now (Unix
// seconds), or says why it cannot: it was used, its expiry is past what
// the ring spans, or the set is full.
func (u *usedSecrets) use(nonce secretNonce, exp, now int64) error {
	u.expire(now)
	if _, used := u.held[nonce]; used {
		return errSecretUsed
	}
	// An expiry before next (the clock stepped back since the last use)
	// lands in a bucket emptied later than it expires: held longer, never
	// shorter.
	if exp >= u.next+usedRingSeconds {
		return errSecretTooLong
	}
	if len(u.held) >= u.max {
		return errUsedSecretsFull
	}
	u.held[nonce] = struct{}{}
	b := &u.ring[exp%usedRingSeconds]
	*b = append(*b, nonce)
	return nil
}

// expire drops the entries expired at now: those of every bucket from next
// through now, the whole ring at most.
func (u *usedSecrets) expire(now int64) {
	if now < u.next {
		return
	}
	if len(u.held) > 0 {
		for s, end := u.next, min(now+1, u.next+usedRingSeconds); s < end; s++ {
			b := &u.ring[s%usedRingSeconds]
			for _, n := range *b {
				delete(u.held, n)
			}
			u.examined += 1 + len(*b)
			*b = nil // not kept for reuse: every bucket keeping its largest would hold far more than max
		}
	}
	u.next = now + 1
}
