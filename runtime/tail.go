package runtime

import (
	"container/list"
	"time"
)

// maxTailBytes bounds the tails a server keeps, all together; beyond it the
// oldest go first.
const maxTailBytes = 64 << 20

// A tail is the end of a suspended rollout that ended on a connection: the
// frames since its client last appended, and its terminal frame. The
// connection it went out on may have been dying (half-open: the writes
// succeed, nothing arrives), and nothing but the client can tell, so the
// server keeps the tail for the resume window, and a response.resume with
// the same credentials reads it back from the sequence_number it names,
// store or not. response.processed (Codex sends it for every response it
// has read) lets it go early. A tail is immutable once kept.
type tail struct {
	id, creds, lane string
	frames          []frame // in sequence order
	terminal        []byte
	bytes           int
	elem            *list.Element // in the server's tails, oldest first
	expiry          *time.Timer
}

// since is what a client that has seen every frame up to after (nil: all
// that went out) has not: the frames after it, then the terminal frame.
func (t *tail) since(after *int) [][]byte {
	var out [][]byte
	if after != nil {
		for _, f := range t.frames {
			if f.seq > *after {
				out = append(out, f.b)
			}
		}
	}
	return append(out, t.terminal)
}
