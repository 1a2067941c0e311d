package runtime

import (
	"crypto/rand"
	"encoding/hex"
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
