// Package layering holds the tests that keep package runtime a core that
// imports little: what importing it costs a program (no goroutine started,
// nothing registered on a global), and which modules it may bring. Its test
// binary imports runtime and nothing else of tether's.
package layering
