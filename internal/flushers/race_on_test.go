//go:build race

package flushers

// raceEnabled: the race detector drops what sync.Pool is given at random,
// so a pooled buffer is allocated again now and then.
const raceEnabled = true
