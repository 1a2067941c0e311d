package clienttools_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the client joins
// its tool goroutines and closes its connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
