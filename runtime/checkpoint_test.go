package runtime_test

import (
	"testing"

	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/internal/checkpointtest"
)

func TestMemoryCheckpoints(t *testing.T) {
	checkpointtest.Run(t, runtime.NewMemoryCheckpoints(), "")
}
