//go:build race

package main

// raceEnabled: the race detector is on, and with it the memory figures of
// the binaries this package builds are not those of a release build.
const raceEnabled = true
