package lockrank

import "sync"

// Mutex is a sync.Mutex of rank R. In the race build, Lock checks the order
// first (see the package comment); otherwise it is a sync.Mutex. The zero
// value is an unlocked mutex; like a sync.Mutex it may be unlocked by a
// goroutine other than the one that locked it, and must not be copied after
// first use. It has no TryLock: runtime takes none.
type Mutex[R Rank] struct {
	mu sync.Mutex // not embedded: every Lock goes through the check
}

// RWMutex is a sync.RWMutex of rank R, checked as Mutex is: a read lock
// counts as holding it, since a reader that waits on a lock under it can
// hold up a writer, and every reader after the writer.
type RWMutex[R Rank] struct {
	mu sync.RWMutex
}
