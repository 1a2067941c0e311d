package runtime

import (
	"crypto/rand"
	"encoding/hex"

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
