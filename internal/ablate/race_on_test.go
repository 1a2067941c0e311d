//go:build race

package ablate

// raceEnabled is set under the race detector, which makes the memory tests
// slow beyond their timeouts and their figures meaningless; .ci/run runs
// them without it.
const raceEnabled = true
