package runtime

import "errors"

// Sentinel errors.
var (
	ErrSessionClosed = errors.New("runtime: session closed")
	ErrSlowClient    = errors.New("runtime: client did not read events in time")
)
