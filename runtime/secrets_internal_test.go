package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// nonceOf is a distinct nonce for each i.
func nonceOf(i int) secretNonce {
	var n secretNonce
	binary.BigEndian.PutUint64(n[:], uint64(i))
	return n
}

// TestUsedSecretsWork: a use examines as much of the set of used secrets
// when it holds 20,000 as when it holds none; and over a run where they
// expire as fast as they come, the emptying examines each entry once and
// each second's bucket once. (Every redeem once swept the whole set under
// its lock: +21 µs at none held, +266 to 434 µs at 20,000.)
func TestUsedSecretsWork(t *testing.T) {
	t.Parallel()
	const now = 1_000_000_000
	u := newUsedSecrets(1 << 20)
	work := func(i int, exp, at int64) int {
		t.Helper()
		before := u.examined
		if err := u.use(nonceOf(i), exp, at); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		return u.examined - before
	}
	atNone := work(0, now+600, now)
	for i := 1; i < 20_000; i++ {
		work(i, now+600, now)
	}
	if at20k := work(20_000, now+600, now); at20k != atNone {
		t.Errorf("a use examined %d entries at 20,000 held, %d at none", at20k, atNone)
	}

	// A steady state: 40 uses a second, each expiring 500 s after it, so
	// that 20,000 are held; over 10,000 s of it.
	u = newUsedSecrets(1 << 20)
	const perSecond, life, seconds = 40, 500, 10_000
	total := 0
	for i := range perSecond * seconds {
		at := int64(now + i/perSecond)
		total += work(i, at+life, at)
	}
	if held := len(u.held); held != perSecond*life {
		t.Errorf("%d held in the steady state, want %d", held, perSecond*life)
	}
	if dropped := perSecond*seconds - len(u.held); total > dropped+seconds {
		t.Errorf("%d uses examined %d entries and buckets: more than the %d dropped and the %d seconds' buckets",
			perSecond*seconds, total, dropped, seconds)
	}
}

// TestUsedSecretsBound: the set holds at most its bound; past it a fresh
// secret is refused, and those held are still refused as used (none is
// forgotten to make room), until they expire. An expiry further ahead than
// the ring spans is refused, and one behind the ring's start (a clock that
// stepped back) is held until it passes.
func TestUsedSecretsBound(t *testing.T) {
	t.Parallel()
	const now = 1_000_000_000
	u := newUsedSecrets(3)
	for i := range 3 {
		if err := u.use(nonceOf(i), now+10+int64(i), now); err != nil {
			t.Fatalf("use %d of 3: %v", i, err)
		}
	}
	if err := u.use(nonceOf(3), now+10, now); !errors.Is(err, errUsedSecretsFull) {
		t.Errorf("a fourth use of a set of 3: %v, want errUsedSecretsFull", err)
	}
	if err := u.use(nonceOf(0), now+10, now+9); !errors.Is(err, errSecretUsed) {
		t.Errorf("a used secret at the bound: %v, want errSecretUsed", err)
	}
	if err := u.use(nonceOf(3), now+20, now+10); err != nil { // the first has expired
		t.Errorf("a use once one has expired: %v", err)
	}
	if err := u.use(nonceOf(1), now+11, now+10); !errors.Is(err, errSecretUsed) {
		t.Errorf("a used secret not yet expired: %v, want errSecretUsed", err)
	}
	if got := len(u.held); got != 3 {
		t.Errorf("%d held, want 3", got)
	}

	u = newUsedSecrets(10)
	if err := u.use(nonceOf(0), now+usedRingSeconds+1, now); !errors.Is(err, errSecretTooLong) {
		t.Errorf("an expiry past the ring: %v, want errSecretTooLong", err)
	}
	if err := u.use(nonceOf(1), now+100, now+50); err != nil {
		t.Fatal(err)
	}
	// The clock steps back 40 s: a secret expiring before the ring's start
	// is held as long as it lives, at least.
	if err := u.use(nonceOf(2), now+20, now+10); err != nil {
		t.Fatal(err)
	}
	if err := u.use(nonceOf(2), now+20, now+19); !errors.Is(err, errSecretUsed) {
		t.Errorf("a secret used after the clock stepped back, before its expiry: %v, want errSecretUsed", err)
	}
}

// BenchmarkRedeem checks and spends a client secret, at a steady count of
// used secrets held by a server without a OnceStore: none (each expires as
// the next comes), and 20,000 (40 a second, each living 500 s).
func BenchmarkRedeem(b *testing.B) {
	for _, held := range []int{0, 20_000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			life, perSecond := time.Second, 1
			if held > 0 {
				life, perSecond = 500*time.Second, held/500
			}
			cs := newClientSecrets(nil, nil, 1<<20)
			t0 := time.Unix(1_000_000_000, 0)
			at := func(i int) time.Time { return t0.Add(time.Duration(i/perSecond) * time.Second) }
			n := held + b.N
			secrets := make([]string, n)
			for i := range secrets {
				secrets[i] = cs.mint("acme", "", at(i).Add(life))
			}
			redeem := func(i int) {
				p, ok := cs.check(secrets[i], "", at(i))
				if !ok {
					b.Fatalf("secret %d not valid", i)
				}
				if perr := cs.spend(context.Background(), p, at(i)); perr != nil {
					b.Fatalf("secret %d refused: %v", i, perr)
				}
			}
			for i := range held {
				redeem(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := held; i < n; i++ {
				redeem(i)
			}
		})
	}
}
