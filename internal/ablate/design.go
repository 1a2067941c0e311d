package ablate

import (
	"fmt"
	"strings"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// Design is one of the ways of running a rollout that ablate compares: a
// mode of the client kit and, for the connection modes (turns, suspend,
// inject), the transport and the frames' encoding. Its name is the mode's,
// with "wt-" for WebTransport and "+msgpack" for msgpack frames:
// "suspend", "wt-suspend", "suspend+msgpack", "wt-turns+msgpack".
// "suspend+durable" and "inject+durable" are suspend and inject against a
// server that checkpoints every pause (durable suspended rollouts), for
// what the checkpoints cost.
type Design struct {
	Mode      clienttools.Mode
	Transport clienttools.Transport
	Encoding  protocol.Encoding
	Durable   bool // the server checkpoints each pause (runtime.Options.Checkpoints)
}

func (d Design) String() string {
	name := d.Mode.String()
	if d.Transport == clienttools.TransportWebTransport {
		name = "wt-" + name
	}
	if d.Encoding == protocol.EncodingMsgpack {
		name += "+" + d.Encoding.String()
	}
	if d.Durable {
		name += "+durable"
	}
	return name
}

// connected reports whether the design's turns go over a connection (a
// WebSocket or WebTransport), not HTTP requests.
func (d Design) connected() bool {
	return d.Mode == clienttools.ModeSuspend || d.Mode == clienttools.ModeInject || d.Mode == clienttools.ModeTurns
}

// suspended reports whether the design's rollout is one response that
// waits on its client: suspend and inject.
func (d Design) suspended() bool {
	return d.Mode == clienttools.ModeSuspend || d.Mode == clienttools.ModeInject
}

// webTransport reports whether the design runs over WebTransport.
func (d Design) webTransport() bool { return d.Transport == clienttools.TransportWebTransport }

// On is d with its frames in enc when it runs over a connection; an HTTP
// design is JSON whatever enc is, and a design named with its encoding
// keeps it.
func (d Design) On(enc protocol.Encoding) Design {
	if d.connected() && !d.Durable && d.Encoding == protocol.EncodingJSON {
		d.Encoding = enc
	}
	return d
}

// ParseDesign reads a design's name: a mode (stateless, chained,
// background, turns, suspend, inject), and for turns, suspend and inject
// optionally "wt-" before it (WebTransport) and "+msgpack" after it. It
// accepts exactly the names of AllDesigns, and its error lists them.
func ParseDesign(s string) (Design, error) {
	all := AllDesigns()
	names := make([]string, len(all))
	for i, d := range all {
		if d.String() == s {
			return d, nil
		}
		names[i] = d.String()
	}
	hint := ""
	name, _, _ := strings.Cut(strings.TrimPrefix(s, "wt-"), "+")
	if m, err := clienttools.ParseMode(name); err == nil && !(Design{Mode: m}).connected() {
		hint = name + " runs over HTTP requests, JSON bodies on TCP; "
	}
	return Design{}, fmt.Errorf("ablate: unknown mode %q: %swant one of %s", s, hint, strings.Join(names, ", "))
}

// AllDesigns is every design ablate can run: each mode of the client kit,
// and the connection modes over each transport with each frame encoding.
func AllDesigns() []Design {
	var ds []Design
	for _, m := range clienttools.Modes {
		for _, tp := range []clienttools.Transport{clienttools.TransportWebSocket, clienttools.TransportWebTransport} {
			for _, enc := range []protocol.Encoding{protocol.EncodingJSON, protocol.EncodingMsgpack} {
				d := Design{Mode: m, Transport: tp, Encoding: enc}
				if d.connected() || tp == clienttools.TransportWebSocket && enc == protocol.EncodingJSON {
					ds = append(ds, d)
				}
				if d.suspended() && tp == clienttools.TransportWebSocket && enc == protocol.EncodingJSON {
					d.Durable = true
					ds = append(ds, d)
				}
			}
		}
	}
	return ds
}

// Designs are modes with JSON frames, over WebSocket.
func Designs(modes ...clienttools.Mode) []Design {
	var ds []Design
	for _, m := range modes {
		ds = append(ds, Design{Mode: m})
	}
	return ds
}
