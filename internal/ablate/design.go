package ablate

import (
	"fmt"
	"strings"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// Design is one of the ways of running a rollout that ablate compares: a
// mode of the client kit and, for the connection modes (turns, suspend),
// the transport and the frames' encoding. Its name is the mode's, with
// "wt-" for WebTransport and "+msgpack" for msgpack frames: "suspend",
// "wt-suspend", "suspend+msgpack", "wt-turns+msgpack".
type Design struct {
	Mode      clienttools.Mode
	Transport clienttools.Transport
	Encoding  protocol.Encoding
}

func (d Design) String() string {
	name := d.Mode.String()
	if d.Transport == clienttools.TransportWebTransport {
		name = "wt-" + name
	}
	if d.Encoding == protocol.EncodingMsgpack {
		name += "+" + d.Encoding.String()
	}
	return name
}

// connected reports whether the design's turns go over a connection (a
// WebSocket or WebTransport), not HTTP requests.
func (d Design) connected() bool {
	return d.Mode == clienttools.ModeSuspend || d.Mode == clienttools.ModeTurns
}

// webTransport reports whether the design runs over WebTransport.
func (d Design) webTransport() bool { return d.Transport == clienttools.TransportWebTransport }

// On is d with its frames in enc when it runs over a connection; an HTTP
// design is JSON whatever enc is, and a design named with its encoding
// keeps it.
func (d Design) On(enc protocol.Encoding) Design {
	if d.connected() && d.Encoding == protocol.EncodingJSON {
		d.Encoding = enc
	}
	return d
}

// ParseDesign reads a design's name: a mode (stateless, chained, turns,
// suspend), and for turns and suspend optionally "wt-" before it
// (WebTransport) and "+msgpack" after it.
func ParseDesign(s string) (Design, error) {
	name, enc, msgpack := strings.Cut(s, "+")
	name, wt := strings.CutPrefix(name, "wt-")
	mode, err := clienttools.ParseMode(name)
	if err != nil {
		return Design{}, err
	}
	d := Design{Mode: mode}
	if wt {
		d.Transport = clienttools.TransportWebTransport
	}
	if msgpack {
		if d.Encoding, err = protocol.ParseEncoding(enc); err != nil {
			return Design{}, err
		}
	}
	if (wt || msgpack) && !d.connected() {
		return Design{}, fmt.Errorf("design %q: %s runs over HTTP requests, JSON bodies on TCP", s, mode)
	}
	return d, nil
}

// Designs are modes with JSON frames, over WebSocket.
func Designs(modes ...clienttools.Mode) []Design {
	var ds []Design
	for _, m := range modes {
		ds = append(ds, Design{Mode: m})
	}
	return ds
}
