// Package ablate is the harness behind `tether ablate`: it runs one agent
// workload through every design of the Responses API (stateless HTTP,
// chained HTTP, in the background or not, WebSocket cached-state turns,
// one suspended response) with the client kit, against a tether it starts
// in-process on loopback or one at a URL, and measures where the time
// goes.
//
// Trials are made fair before they are measured: modes are interleaved
// round by round so that the machine's drift hits all alike, every trial
// starts with an empty prefix cache and its own prompt_cache_key (no trial
// reads another's prompts), and each mode is warmed up first. Model time is
// not measured but computed from the timing model and each step's usage
// (uncached prompt and output tokens), exactly as the server paces it; a
// turn's overhead is its latency on the client minus that. Each turn's
// overhead is set against the physical floor: an echo of the same bytes and
// frames over the same loopback with nothing behind it, measured in the
// same run after as long an idle as the turn's request followed (an idle
// machine answers slower), and the warm floor, the fastest of a few echoes
// back to back.
//
// Against a server at a URL, whose model ablate cannot set, the first
// mode's warm-up checks that the server paces its model at the timing the
// run computes model time with: the server's own timing of each step (its
// timings' first_token and sample) against the computed one. A clear
// mismatch of the output rate, the TTFT or the prefill rate ends the run
// with what the steps fit and what to pass.
//
// After each trial the in-process server's counters must show that the
// mode took its own path (Trial.Paths): a full history every stateless
// turn, a store load every chained or background one, a cache hit every WebSocket turn,
// one suspended response with a pause per round trip.
//
// Every figure of a Summary that a run can land differently on has its 95%
// interval (stats.go: bootstrap over the turns, order statistics for
// medians), and a figure the sample cannot carry is not given. Compare sets
// two runs side by side (benchstat's way: intervals, Holm-adjusted
// p-values); RunInterleaved runs several configurations at once, round by
// round, each against its own server, and Sweep runs one per value of a
// cost knob that way, setting each design's end-to-end gain against the
// published figures (References).
//
// Results holds every trial and turn and a Summary per mode and speed;
// WriteFiles writes results.json (whose JSON Schema is Schema), turns.csv,
// the Charts as SVG (drawn with gonum/plot) and report.html, one
// self-contained page with all of them. A mode is a Design: a mode of the
// client kit and, on a WebSocket, the frames' encoding ("suspend+msgpack").
//
// Two other runs measure the server under many rollouts at once, against a
// tether serve started as a child process so that its CPU and memory are
// its own: RunLoad (N clients running the workload again and again; each
// streamed token's delivery lag against its stream's schedule, CPU of
// server and clients apart, RSS and goroutines over time) and RunPark (K
// suspended rollouts parked on their own connections; what each holds).
package ablate
