//go:build race

package sampler

// raceEnabled is set under the race detector, whose sync.Pool drops a
// quarter of what is put back and so skews allocation counts.
const raceEnabled = true
