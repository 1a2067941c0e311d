package runtime_test

import (
	"testing"
	"testing/synctest"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/backgroundtest"
)

// TestMemoryBackgrounds: MemoryBackgrounds passes the suite every
// runtime.BackgroundStore passes, its clock the bubble's, so that the
// leases and the Keep the suite waits out pass at once.
func TestMemoryBackgrounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backgroundtest.Run(t, runtime.NewMemoryBackgrounds(), "")
	})
}
