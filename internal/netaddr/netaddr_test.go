package netaddr

import (
	"net"
	"testing"
)

func TestDialable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:8080", "127.0.0.1:8080"},
		{"[::]:8080", "127.0.0.1:8080"},
		{"127.0.0.1:9", "127.0.0.1:9"},
		{"[::1]:9", "[::1]:9"},
		{"192.0.2.7:443", "192.0.2.7:443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := Dialable(addr); got != c.want {
			t.Errorf("Dialable(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
}
