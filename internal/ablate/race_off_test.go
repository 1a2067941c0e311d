//go:build !race

package ablate

const raceEnabled = false
