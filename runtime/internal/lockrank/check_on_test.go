//go:build race

package lockrank_test

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime/internal/lockrank"
)

// brokenOrders each take locks out of the order, and the words the check
// must say about it: the lock taken, the lock held, and why.
var brokenOrders = map[string]struct {
	take func()
	want []string
}{
	"inverted": {
		take: func() {
			var rollout lockrank.Mutex[lockrank.Rollout]
			var suspension lockrank.Mutex[lockrank.Suspension]
			suspension.Lock()
			rollout.Lock()
		},
		want: []string{"rollout.mu taken at", "while holding suspension.mu, taken at", "under no other lock"},
	},
	"under a leaf": {
		take: func() {
			var suspension lockrank.Mutex[lockrank.Suspension]
			var outbox lockrank.Mutex[lockrank.Outbox]
			outbox.Lock()
			suspension.Lock()
		},
		want: []string{"suspension.mu taken at", "while holding outbox.mu", "outbox.mu is a leaf"},
	},
	"nested inverted": {
		take: func() {
			var scope lockrank.Mutex[lockrank.ConnScope]
			var session lockrank.Mutex[lockrank.Session]
			var suspension lockrank.Mutex[lockrank.Suspension]
			scope.Lock()
			suspension.Lock()
			session.Lock()
		},
		want: []string{"session.mu taken at", "while holding suspension.mu", "under only connScope.mu",
			"connScope.mu, taken at", "suspension.mu, taken at"},
	},
	"twice": {
		take: func() {
			var session lockrank.Mutex[lockrank.Session]
			session.Lock()
			session.Lock()
		},
		want: []string{"session.mu taken at", "while holding session.mu", "held already"},
	},
	"one rank": {
		take: func() {
			var a, b lockrank.Mutex[lockrank.Session]
			a.Lock()
			b.Lock()
		},
		want: []string{"session.mu taken at", "while holding session.mu", "two locks of one rank"},
	},
	"read lock": {
		take: func() {
			var suspension lockrank.Mutex[lockrank.Suspension]
			var store lockrank.RWMutex[lockrank.Store]
			suspension.Lock()
			store.RLock()
		},
		want: []string{"MemoryStore.mu taken at", "while holding suspension.mu"},
	},
	"read lock held": {
		take: func() {
			var store lockrank.RWMutex[lockrank.Store]
			var session lockrank.Mutex[lockrank.Session]
			store.RLock()
			session.Lock()
		},
		want: []string{"session.mu taken at", "while holding MemoryStore.mu"},
	},
}

// childEnv names, in a child test process (this test binary again), the
// case it runs.
const childEnv = "LOCKRANK_CHILD"

// child runs test's case name in a child process, and returns how it
// exited and what it wrote to stderr.
func child(t *testing.T, test, name string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	var out strings.Builder
	cmd.Stderr = &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("child %s: %v", name, err)
	}
	return 0, out.String()
}

// TestBrokenOrderEndsTheProcess: each broken order, taken in a child
// process, ends it at once with a message that names the lock taken and
// the lock held, and where this file took each. A child, because nothing
// recovers the check, on purpose.
func TestBrokenOrderEndsTheProcess(t *testing.T) {
	if name := os.Getenv(childEnv); name != "" {
		brokenOrders[name].take()
		os.Stderr.WriteString("the check let it pass\n")
		os.Exit(0)
	}
	t.Parallel()
	for name, c := range brokenOrders {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, msg := child(t, "TestBrokenOrderEndsTheProcess", name)
			if code != 2 {
				t.Fatalf("child exited with %d, want 2; stderr:\n%s", code, msg)
			}
			for _, w := range append(c.want, "lockrank: lock order broken", "check_on_test.go:") {
				if !strings.Contains(msg, w) {
					t.Errorf("the report lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestCheckHidesNoRace: the check orders nothing between goroutines for the
// race detector. One goroutine writes x and then locks and unlocks a
// mutex, another then locks and unlocks another mutex and reads x: a data
// race, which the detector reports (the child fails) unless the check's
// own bookkeeping made the unlock of one happen before the lock of the
// other. The goroutines keep to that order by channels hidden from the
// detector.
func TestCheckHidesNoRace(t *testing.T) {
	if os.Getenv(childEnv) == "race" {
		racyAcrossTwoMutexes()
		return
	}
	t.Parallel()
	code, msg := child(t, "TestCheckHidesNoRace", "race")
	if code == 0 || !strings.Contains(msg, "WARNING: DATA RACE") || !strings.Contains(msg, "racyAcrossTwoMutexes") {
		t.Fatalf("child exited with %d, want the race between its goroutines reported; stderr:\n%s", code, msg)
	}
}

func racyAcrossTwoMutexes() {
	var (
		session lockrank.Mutex[lockrank.Session]
		rollout lockrank.Mutex[lockrank.Rollout]
		x       = new(int)
	)
	written, read := make(chan struct{}), make(chan struct{})
	unseen := func(f func()) { // a synchronization the detector does not see
		runtime.RaceDisable()
		f()
		runtime.RaceEnable()
	}
	go func() {
		*x = 1
		session.Lock()
		session.Unlock()
		unseen(func() { close(written) })
	}()
	go func() {
		unseen(func() { <-written })
		rollout.Lock()
		rollout.Unlock()
		_ = *x
		unseen(func() { close(read) })
	}()
	unseen(func() { <-read })
}
