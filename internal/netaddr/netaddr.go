// Package netaddr says how a client on this machine reaches a listener:
// the address tether prints on start, and the URL a test or a child server
// is dialled at. It is for tether's command and transports, not an API.
package netaddr

import "net"

// Dialable is addr as a client on this machine dials it: a listener on
// every interface (0.0.0.0 or ::) is reached at 127.0.0.1.
func Dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
