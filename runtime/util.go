package runtime

import (
	"strings"
	"time"
	"weak"
)

func ptr[T any](v T) *T { return &v }

// afterFunc is time.AfterFunc(d, func() { f(p) }) holding p weakly, for a
// timer that is mostly stopped before it fires. A stopped timer stays in
// the runtime's timer heap, with all its function refers to, until the
// runtime sweeps it, which it does once a quarter of a P's timers are
// stopped ones: a suspended rollout's pause timer, stopped when its client
// answers, kept the whole rollout alive after it ended, and while a
// minute's tails' expiry timers were live, up to a third as many ended
// rollouts as tails stayed so. p must be held elsewhere for as long as the
// timer matters (a suspended rollout is the suspended set's): once p is
// gone, f is not called.
func afterFunc[T any](d time.Duration, p *T, f func(*T)) *time.Timer {
	w := weak.Make(p)
	return time.AfterFunc(d, func() {
		if p := w.Value(); p != nil {
			f(p)
		}
	})
}

// andList is "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
