//go:build race

package lockrank

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/petermattis/goid"
)

// holding is every lock held, by the goroutine that took it. It is this
// package's one mutable global, and only the race build has it: the order
// is checked per goroutine, and Go gives a goroutine no storage of its own
// that a library can reach. Go's runtime keeps the same list per M, in the
// M; a list keyed by goroutine id stands in for it here.
//
// The check must not hide a data race of the program's from the race
// detector: a lock shared by every goroutine would order, for the
// detector, everything a goroutine did before one Unlock before everything
// another does after its next Lock, of any mutex. So its lock is taken
// with the detector's handling of synchronization off (lockHolding), and
// what it guards is read and written only by functions the detector does
// not see (//go:norace), with no map, append or copy, which the Go runtime
// reports to the detector itself.
var holding struct {
	mu   sync.Mutex
	gs   *goroutineLocks // the goroutines holding locks, linked by next
	free *goroutineLocks // records of goroutines that held none since, for reuse
}

// goroutineLocks are the locks goroutine g holds, in the order taken: at
// most one a rank, for the order lets no goroutine hold two.
type goroutineLocks struct {
	g    int64
	n    int
	held [len(order)]held
	next *goroutineLocks
}

// held is one lock a goroutine holds.
type held struct {
	rank rankID
	lock any     // its *Mutex or *RWMutex, to find it when it is unlocked
	at   uintptr // where it was taken: the pc of the call to Lock
}

func (m *Mutex[R]) Lock() {
	var r R
	g, at := check(r.id(), m)
	m.mu.Lock()
	hold(g, held{r.id(), m, at})
}

func (m *Mutex[R]) Unlock() {
	release(m) // first: once unlocked, another goroutine may take m and hold it too
	m.mu.Unlock()
}

func (m *RWMutex[R]) Lock() {
	var r R
	g, at := check(r.id(), m)
	m.mu.Lock()
	hold(g, held{r.id(), m, at})
}

func (m *RWMutex[R]) Unlock() {
	release(m)
	m.mu.Unlock()
}

func (m *RWMutex[R]) RLock() {
	var r R
	g, at := check(r.id(), m)
	m.mu.RLock()
	hold(g, held{r.id(), m, at})
}

func (m *RWMutex[R]) RUnlock() {
	release(m)
	m.mu.RUnlock()
}

// lockHolding takes holding.mu unseen by the race detector, which then
// sees no order between goroutines that the program does not make.
func lockHolding() {
	runtime.RaceDisable()
	holding.mu.Lock()
}

func unlockHolding() {
	holding.mu.Unlock()
	runtime.RaceEnable()
}

// check ends the process if the calling goroutine may not take lock, of
// rank r, now: before it waits for it, so that an order that could deadlock
// reports instead. It returns the goroutine and where lock is being taken.
func check(r rankID, lock any) (g int64, at uintptr) {
	var pc [1]uintptr
	runtime.Callers(3, pc[:]) // 0 is Callers, 1 check, 2 Lock, 3 Lock's caller
	g = goid.Get()
	lockHolding()
	hs, bad := breaks(g, r, lock)
	unlockHolding()
	if hs != nil {
		broken(r, lock, pc[0], hs, bad)
	}
	return g, pc[0]
}

// breaks reports whether goroutine g, taking lock of rank r, breaks the
// order: if it does, the locks g holds, copied, and which of them it
// breaks the order with. Its caller holds holding.mu.
//
//go:norace
func breaks(g int64, r rankID, lock any) (hs []held, bad int) {
	gl := find(g)
	if gl == nil {
		return nil, 0
	}
	for i := 0; i < gl.n; i++ {
		if h := gl.held[i]; h.lock == lock || !mayTake(h.rank, r) {
			hs = make([]held, gl.n)
			for j := range hs {
				hs[j] = gl.held[j]
			}
			return hs, i
		}
	}
	return nil, 0
}

// find is goroutine g's record, nil if it holds no lock. Its caller holds
// holding.mu.
//
//go:norace
func find(g int64) *goroutineLocks {
	for gl := holding.gs; gl != nil; gl = gl.next {
		if gl.g == g {
			return gl
		}
	}
	return nil
}

// hold records that goroutine g holds h.
func hold(g int64, h held) {
	lockHolding()
	holdLocked(g, h)
	unlockHolding()
}

//go:norace
func holdLocked(g int64, h held) {
	gl := find(g)
	if gl == nil {
		if gl = holding.free; gl != nil {
			holding.free = gl.next
		} else {
			gl = new(goroutineLocks)
		}
		gl.g, gl.next, holding.gs = g, holding.gs, gl
	}
	gl.held[gl.n] = h
	gl.n++
}

// release forgets lock, being unlocked: held by the calling goroutine, or,
// unlocked on behalf of the goroutine that took it (sync.Mutex allows it),
// by that goroutine; a read lock, by one of its readers.
func release(lock any) {
	g := goid.Get()
	lockHolding()
	releaseLocked(g, lock)
	unlockHolding()
}

//go:norace
func releaseLocked(g int64, lock any) {
	if gl := find(g); gl != nil && drop(gl, lock) {
		return
	}
	for gl := holding.gs; gl != nil; gl = gl.next {
		if drop(gl, lock) {
			return
		}
	}
	// Not held: sync.Mutex's Unlock fails on it, as it would unchecked.
}

// drop forgets lock among gl's, and reports whether gl held it. A record
// left empty goes to the free list: goroutine ids are not reused, and a
// finished goroutine's would stay. Its caller holds holding.mu.
//
//go:norace
func drop(gl *goroutineLocks, lock any) bool {
	for i := gl.n - 1; i >= 0; i-- { // the last taken is the likeliest let go
		if gl.held[i].lock != lock {
			continue
		}
		for j := i; j < gl.n-1; j++ {
			gl.held[j] = gl.held[j+1]
		}
		gl.n--
		gl.held[gl.n] = held{}
		if gl.n == 0 {
			unlink(gl)
		}
		return true
	}
	return false
}

//go:norace
func unlink(gl *goroutineLocks) {
	for p := &holding.gs; *p != nil; p = &(*p).next {
		if *p == gl {
			*p = gl.next
			break
		}
	}
	gl.g, gl.next, holding.free = 0, holding.free, gl
}

// broken reports that lock, of rank r, taken at at breaks the order with
// hs[bad], among the locks its goroutine holds, hs, and ends the process:
// like a throw in Go's runtime, nothing can recover it.
func broken(r rankID, lock any, at uintptr, hs []held, bad int) {
	fmt.Fprintf(os.Stderr, "%s\nlocks held, in the order taken:\n", violation(r, lock, at, hs[bad]))
	for _, h := range hs {
		fmt.Fprintf(os.Stderr, "\t%s, taken at %s\n", order[h.rank].name, where(h.at))
	}
	os.Stderr.Write(debug.Stack())
	os.Exit(2)
}

// violation says why lock, of rank r, may not be taken at at while h is
// held.
func violation(r rankID, lock any, at uintptr, h held) string {
	name, hname := order[r].name, order[h.rank].name
	var why string
	switch {
	case h.lock == lock:
		why = "it is held already, and would wait for itself"
	case order[h.rank].leaf:
		why = hname + " is a leaf: no lock is taken under it"
	case h.rank == r:
		why = "two locks of one rank have no order between them"
	case len(order[r].after) == 0:
		why = "the order takes " + name + " under no other lock"
	default:
		var after []string
		for _, a := range order[r].after {
			after = append(after, order[a].name)
		}
		why = "the order takes " + name + " under only " + strings.Join(after, ", ")
	}
	return fmt.Sprintf("lockrank: lock order broken: %s taken at %s while holding %s, taken at %s: %s (see order in runtime/internal/lockrank)",
		name, where(at), hname, where(h.at), why)
}

// where is the file and line of the call at pc.
func where(pc uintptr) string {
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return fmt.Sprintf("%s:%d", f.File, f.Line)
}
