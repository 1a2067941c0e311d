package lockrank_test

import (
	"sync"
	"testing"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// TestMutexExcludes: a zero Mutex is a mutex, with or without the check:
// goroutines adding under it lose no update.
func TestMutexExcludes(t *testing.T) {
	t.Parallel()
	var (
		mu lockrank.Mutex[lockrank.Session]
		n  int
		wg sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n != 8000 {
		t.Fatalf("n = %d, want 8000", n)
	}
}

// TestRWMutexReadersShare: a zero RWMutex lets readers in together, and
// a writer alone.
func TestRWMutexReadersShare(t *testing.T) {
	t.Parallel()
	var mu lockrank.RWMutex[lockrank.Store]
	mu.RLock()
	inside := make(chan struct{})
	go func() { // a second reader, while the first holds it
		mu.RLock()
		mu.RUnlock()
		close(inside)
	}()
	<-inside
	mu.RUnlock()
	mu.Lock()
	mu.Unlock()
}

// TestUnlockOnAnotherGoroutine: sync.Mutex lets a goroutine unlock what
// another locked; so does Mutex, and with the check on the lock is no
// longer the locker's: it may take a lock the order puts before it.
func TestUnlockOnAnotherGoroutine(t *testing.T) {
	t.Parallel()
	var (
		rollout    lockrank.Mutex[lockrank.Rollout]
		suspension lockrank.Mutex[lockrank.Suspension]
	)
	suspension.Lock()
	unlocked := make(chan struct{})
	go func() {
		suspension.Unlock()
		close(unlocked)
	}()
	<-unlocked
	rollout.Lock() // out of order if the suspension's were still this goroutine's
	suspension.Lock()
	suspension.Unlock()
	rollout.Unlock()
}

// TestOrderKept: locks taken in the order pass, let go in any order.
func TestOrderKept(t *testing.T) {
	t.Parallel()
	var (
		set        lockrank.Mutex[lockrank.SuspendedSet]
		rollout    lockrank.Mutex[lockrank.Rollout]
		suspension lockrank.Mutex[lockrank.Suspension]
		outbox     lockrank.Mutex[lockrank.Outbox]
		stopper    lockrank.Mutex[lockrank.Stopper]
		server     lockrank.Mutex[lockrank.Server]
	)
	rollout.Lock()
	suspension.Lock()
	outbox.Lock()
	outbox.Unlock()
	rollout.Unlock() // not last in, first out: suspension.mu is still held
	stopper.Lock()
	stopper.Unlock()
	server.Lock()
	server.Unlock()
	suspension.Unlock()

	set.Lock()
	suspension.Lock()
	suspension.Unlock()
	set.Unlock()
}
