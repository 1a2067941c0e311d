// Package webtransport serves a runtime.Server over WebTransport: HTTP/3 on
// UDP, where a WebTransport CONNECT to /v1/responses opens a connection
// whose bidirectional streams are its lanes, each a session of one lane
// that speaks the WebSocket protocol's client and server events; every
// other request is served as over HTTP (runtime.Server.ServeHTTP).
//
// It is an optional layer over package runtime: it plugs into the frame
// transport seam runtime declares (runtime.FrameConn, runtime.Connection),
// and runtime does not import it, nor quic-go. It is not a client (see
// clienttools.TransportWebTransport), nor a general WebTransport server:
// Listen serves one runtime.Server.
//
// A stream carries frames: a 4-byte big-endian length, then that many bytes.
// The client's first frame is the stream's header, a JSON object that names
// the encoding of every later frame in both directions:
//
//	{"encoding":"json"}  or  {"encoding":"msgpack"}
//
// The stream is the lane, so events name no stream_id. Closing or resetting
// the stream ends the lane as closing a WebSocket ends a connection: a
// cached-state response running on it is cancelled, a suspended rollout
// detaches (response.resume on a new stream takes it back). The streams of
// one connection share its cache (previous_response_id) and its limits.
//
// Browsers accept a self-signed certificate by its hash
// (serverCertificateHashes) when it is valid for under 14 days:
// SelfSignedCertificate makes one, CertificateHash pins it.
package webtransport
