// Package runtime is tether's engine: the rollout (one response's sampling
// loop), the session (one WebSocket connection's lanes, queue, limits and
// connection-local cache), the transports (WebSocket and HTTP/SSE on
// /v1/responses, Chat Completions) and the response store.
//
// The data flow of one turn, whatever the transport:
//
//	frame -> protocol.Decode -> lane (FIFO) -> resolve model -> resolve parent
//	      (connection cache | store) -> validate and render new input only
//	      -> loop { Sampler.Sample -> events -> writer
//	                dispatch the step's calls (errgroup): hosted Tool.Call
//	                in-process | client bridge }
//	      -> terminal response -> cache (+ store)
//
// Both of OpenAI's designs are that one loop; only the client bridge differs.
// In cached-state turns it leaves client calls open: the response ends and its
// state stays in the connection cache for the next response.create with
// previous_response_id. In a suspended rollout (suspend: true) it parks the
// calls, announces them with response.done and resumes on response.append:
// the whole rollout is one response, which outlives its connection for the
// resume window. Over HTTP the state comes from the request or the store.
//
// A Server is an http.Handler. Sessions and suspended rollouts are tracked so
// that Shutdown can drain them, which http.Server.Shutdown does not do for
// hijacked connections.
package runtime
