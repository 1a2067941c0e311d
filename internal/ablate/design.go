package ablate

import (
	"fmt"
	"strings"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// Design is one of the ways of running a rollout that ablate compares: a
// mode of the client kit and, for the WebSocket modes (turns, suspend),
// the frames' encoding. Its name is the mode's, with "+msgpack" for msgpack
// frames: "suspend", "suspend+msgpack".
type Design struct {
	Mode     clienttools.Mode
	Encoding protocol.Encoding
}

func (d Design) String() string {
	if d.Encoding == protocol.EncodingMsgpack {
		return d.Mode.String() + "+" + d.Encoding.String()
	}
	return d.Mode.String()
}

// webSocket reports whether the design's turns go over a WebSocket.
func (d Design) webSocket() bool {
	return d.Mode == clienttools.ModeSuspend || d.Mode == clienttools.ModeTurns
}

// On is d with its frames in enc when it runs over a WebSocket; an HTTP
// design is JSON whatever enc is, and a design named with its encoding
// keeps it.
func (d Design) On(enc protocol.Encoding) Design {
	if d.webSocket() && d.Encoding == protocol.EncodingJSON {
		d.Encoding = enc
	}
	return d
}

// ParseDesign reads a design's name: a mode (stateless, chained, turns,
// suspend), and for turns and suspend optionally "+msgpack".
func ParseDesign(s string) (Design, error) {
	name, enc, msgpack := strings.Cut(s, "+")
	mode, err := clienttools.ParseMode(name)
	if err != nil {
		return Design{}, err
	}
	d := Design{Mode: mode}
	if msgpack {
		if d.Encoding, err = protocol.ParseEncoding(enc); err != nil {
			return Design{}, err
		}
		if !d.webSocket() {
			return Design{}, fmt.Errorf("design %q: %s runs over HTTP, whose bodies are JSON", s, mode)
		}
	}
	return d, nil
}

// Designs are modes with JSON frames.
func Designs(modes ...clienttools.Mode) []Design {
	var ds []Design
	for _, m := range modes {
		ds = append(ds, Design{Mode: m})
	}
	return ds
}
