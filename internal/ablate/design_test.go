package ablate

import (
	"testing"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
)

// TestDesigns: names parse to designs and back; WebTransport and msgpack
// only for the connection designs; On switches their frames and no others'.
func TestDesigns(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stateless", "chained", "background", "turns", "suspend", "turns+msgpack", "suspend+msgpack", "wt-turns", "wt-suspend", "wt-suspend+msgpack", "suspend+durable",
		"inject", "inject+msgpack", "wt-inject", "inject+durable"} {
		d, err := ParseDesign(name)
		if err != nil || d.String() != name {
			t.Errorf("%s: %v, %v", name, d, err)
		}
	}
	for _, bad := range []string{"stateless+msgpack", "chained+msgpack", "suspend+cbor", "rpc", "wt-chained", "wt-stateless", "background+msgpack", "wt-background", "background+durable", "wt-", "ws-turns", "turns+durable", "wt-suspend+durable", "suspend+msgpack+durable", "wt-inject+durable"} {
		if _, err := ParseDesign(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	got := map[string]string{}
	for _, d := range Designs(clienttools.Modes...) {
		got[d.String()] = d.On(protocol.EncodingMsgpack).String()
	}
	want := map[string]string{"stateless": "stateless", "chained": "chained", "background": "background", "turns": "turns+msgpack", "suspend": "suspend+msgpack", "inject": "inject+msgpack"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s on msgpack: %s, want %s", k, got[k], v)
		}
	}
}

// TestAllDesigns: every design AllDesigns lists parses from its name.
func TestAllDesigns(t *testing.T) {
	t.Parallel()
	all := AllDesigns()
	if len(all) != 17 {
		t.Errorf("%d designs, want 17: %v", len(all), all)
	}
	for _, d := range all {
		if got, err := ParseDesign(d.String()); err != nil || got != d {
			t.Errorf("%s: %v, %v", d, got, err)
		}
	}
}
