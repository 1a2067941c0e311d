// Package runtime is tether's engine: the rollout (one response's sampling
// loop), the session (one WebSocket connection's lanes, queue, limits and
// connection-local cache), the transports (WebSocket and HTTP/SSE on
// /v1/responses) and the response store.
//
// The data flow of one turn, whatever the transport:
//
//	frame -> protocol.Decode -> validate (new input only, when cached)
//	      -> lane (FIFO) -> resolve model -> resolve parent (cache | store)
//	      -> render new items onto the cached prompt -> Sampler.Sample
//	      -> events -> writer -> terminal response -> cache (+ store)
//
// A Server is an http.Handler. Sessions are tracked so that Shutdown can
// drain WebSocket connections, which http.Server.Shutdown does not wait for.
package runtime
