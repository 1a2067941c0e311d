// Package profiling mounts net/http/pprof's profiles on a server that
// asks for them (tether serve --pprof). The handlers are mounted by name:
// importing net/http/pprof registers them on http.DefaultServeMux too,
// which is why no library package of tether imports it.
package profiling

import (
	"net/http"
	"net/http/pprof"
)

// Mount serves the profiles under /debug/pprof/ on m.
func Mount(m interface{ Handle(string, http.Handler) }) {
	m.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	m.Handle("GET /debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	m.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	m.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	m.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}
