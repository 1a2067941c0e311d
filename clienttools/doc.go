// Package clienttools is the client side of tether: it runs a whole agent
// rollout against a Responses server in any of its designs with one
// call, executing the model's function calls with client tools, and times
// every turn from the client's side.
//
// Client.Run takes a Rollout (the mode, the first request, the client tools
// as Funcs, an optional event callback) and returns a Result: the final
// response, every output item in order, every tool call with its output and
// duration, the usage, and per-turn timings (send to first event, first to
// last event, time waiting on tools, bytes each way). The modes:
//
//   - ModeSuspend: one response.create with suspend over WebSocket; each
//     response.done pause is answered with one response.append.
//   - ModeInject: the same design in the dialect of OpenAI's multi-agent
//     beta: one response.create with multi_agent, which stays in_progress;
//     each wait (told by tether's response.waiting, which the kit asks
//     for) is answered with one response.inject.
//   - ModeTurns: WebSocket response.create per turn, previous_response_id,
//     store false (the server's connection cache holds the state).
//   - ModeChained: streaming HTTP POST per turn, store true,
//     previous_response_id (the server's store holds the state).
//   - ModeBackground: ModeChained with background true; each turn's stream
//     is cut after response.in_progress and resumed with GET
//     /v1/responses/{id}?stream=true&starting_after=N, its sequence numbers
//     checked for a gap or a repeat.
//   - ModeStateless: streaming HTTP POST per turn with the whole history.
//
// A step's calls run concurrently (Client.MaxParallel at once); a tool's
// error or panic becomes its output, which the model reads. With
// Client.Eager a call starts as soon as its function_call item is done,
// overlapping the rest of the step.
//
// Tools are the local tools of a coding agent, as the replay traces use
// them: list_dir, read_file, grep, apply_patch and shell, run for real
// inside one directory (a repository checkout), with the same names,
// arguments and output formats as sampler.Trace records. Tools.Funcs makes
// them client tools; Tools.Run executes one call. Paths in arguments are
// relative to Tools.Dir: absolute paths and paths that escape it through
// ".." are rejected. shell runs its command with sh in Dir under a timeout;
// it is not a sandbox: the command can reach whatever the process can.
//
// Errors say what was being done, as net/http's client errors do ("dial
// ws://HOST/v1/responses: ...", "POST URL: 400 Bad Request: ...", "response
// failed: CODE: message"), without the package's name: a program shows
// them to its users as they are. Only the errors of a misuse of the API
// (a nil Rollout.Request) start with "clienttools:". A server's refusal
// wraps its *protocol.Error; a failed or cancelled response is a
// *ResponseError.
package clienttools
