//go:build !race

package flushers

const raceEnabled = false
