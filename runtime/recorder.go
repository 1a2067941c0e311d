package runtime

import (
	"time"

	"github.com/tether-run/tether/protocol"
)

// Recorder is given the traffic of every response as the server serves it:
// the request that created it, each event in the order its client gets
// them (sequence numbers stamped), and the input of each append that
// resumed it. It is the seam through which `tether serve --record` keeps a
// traffic log (package runtime/record), as Observer is the seam for
// metrics. Options.Recorder nil records nothing.
//
// Its methods are called on the goroutines that serve, concurrently for
// different responses and in order for one, with the response's lock held:
// they must encode or copy what they keep before they return (the server
// goes on changing what they are given) and must not wait on anything but
// their own writing. A response that did not begin with a request here (a
// fork's, or one taken over from another server's checkpoint) has no
// Created; requests refused before their response began have nothing.
type Recorder interface {
	// Created: a response.create (WebSocket, WebTransport) or a POST
	// /v1/responses that arrived at at began response id, served along
	// path.
	Created(at time.Time, id string, path ServePath, req *protocol.CreateRequest)
	// Event: the server queued ev of response id for its client at at (or
	// made it for nobody: a non-streaming HTTP response's events are
	// recorded all the same).
	Event(at time.Time, id string, ev protocol.Event)
	// Appended: a response.append delivered input (tool outputs, steering
	// messages) to the suspended response id at at, or a response.steer
	// was accepted into the response id (in either design; a steer that
	// then fails, response.steer.failed, never joined its context).
	Appended(at time.Time, id string, input protocol.Items)
}
