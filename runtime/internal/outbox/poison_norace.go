//go:build !race

package outbox

// poisonRecycled: see poison_race.go.
const poisonRecycled = false
