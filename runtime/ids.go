package runtime

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/tether-run/tether/protocol"
)

// newID returns prefix_ followed by 48 random hex digits, the shape of
// OpenAI's ids (resp_, msg_, fc_, cmp_).
func newID(prefix string) string {
	var b [24]byte
	rand.Read(b[:])
	out := make([]byte, len(prefix)+1+48)
	copy(out, prefix)
	out[len(prefix)] = '_'
	hex.Encode(out[len(prefix)+1:], b[:])
	return string(out)
}

// outputID is the id of the response's output item at index, of the kind
// prefix names: drawn from the response's id, so that a step run again
// (a rollout taken over from its checkpoint mid-step) names its items as
// the first run did, and as unguessable as the response id.
func outputID(respID, prefix string, index int) string {
	sum := sha256.Sum256([]byte(respID + "/" + prefix + "/" + strconv.Itoa(index)))
	out := make([]byte, len(prefix)+1+48)
	copy(out, prefix)
	out[len(prefix)] = '_'
	hex.Encode(out[len(prefix)+1:], sum[:24])
	return string(out)
}

// nameInputs gives the input items a client sent without an id the id
// OpenAI gives them (msg_, fco_, ctco_), so that input_items lists every
// item with one and pages past it with after.
func nameInputs(items protocol.Items) {
	for _, it := range items {
		switch it := it.(type) {
		case *protocol.Message:
			if it.ID == "" {
				it.ID = newID("msg")
			}
		case *protocol.FunctionCallOutput:
			if it.ID == "" {
				it.ID = newID("fco")
			}
		case *protocol.CustomToolCallOutput:
			if it.ID == "" {
				it.ID = newID("ctco")
			}
		}
	}
}
