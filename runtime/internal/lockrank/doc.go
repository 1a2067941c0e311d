// Package lockrank makes package runtime's lock order executable: every
// mutex of runtime (and of runtime/record) is a Mutex or RWMutex whose type
// parameter is its rank, and one table, order, says which ranks may be held
// when a lock of each rank is taken. Go's own runtime checks its locks the
// same way (runtime/lockrank.go).
//
// In the race build (go test -race) a lock taken out of that order ends the
// process at once, naming it and the held lock the order does not allow it
// under, with where each was taken. An inversion shows as soon as one test
// takes one pair of locks the wrong way round, on one goroutine: no second
// goroutine has to be there to deadlock with. It ends the process rather
// than panic because a panic can be recovered (net/http recovers a
// handler's, a session recovers a rollout's), and a broken order would then
// pass as a logged error. The check's own bookkeeping is hidden from the
// race detector, so that it orders nothing between goroutines that the
// program does not, and hides no data race. Without the race tag the types
// are sync.Mutex and sync.RWMutex, and the check costs nothing.
//
// It does not find every deadlock: it knows nothing of channels, of
// sync.WaitGroup, or of locks outside runtime's, so a lock held while
// waiting on a goroutine that needs it is beyond it. Nor does it prove the
// order kept: it sees only the orders the tests take.
package lockrank
