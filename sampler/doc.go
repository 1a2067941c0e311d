// Package sampler holds tether's model backends and the rendering they share:
// items to chat-template text to o200k_base tokens (a real BPE tokenizer,
// embedded, offline), and Prompt, a persistent list of rendered items that a
// connection extends turn by turn instead of re-rendering the history.
//
// It is not the sampling loop (package runtime), and it declares no Sampler
// interface: runtime declares the one it consumes, and the backends here
// satisfy it.
//
// # Template
//
// The rendering is ChatML-like. The markers <|im_start|> and <|im_end|> are
// not special tokens of o200k_base, so they are encoded as plain text. The
// system block, from Renderer.Header, is
//
//	<|im_start|>system\n{instructions}\n# Tools\n{tool}\n{tool}...<|im_end|>\n
//
// where each tool is one line, "{name}: {description}; parameters: {JSON}",
// with the parameters schema compacted and line breaks in the name and
// description folded to spaces. Hosted tools (web_search) show their type as
// the name, "hosted tool" as the description and their definition as sent as
// the parameters. Without tools the "# Tools" section is left out, without
// instructions the "{instructions}\n" line is; with neither Header is empty.
//
// Each item, from Renderer.Item, is one block:
//
//	message               <|im_start|>{role}\n{text}<|im_end|>\n
//	function_call         <|im_start|>assistant to={name}\n{arguments}<|im_end|>\n
//	function_call_output  <|im_start|>tool call_id={call_id}\n{output text}<|im_end|>\n
//	reasoning             <|im_start|>assistant analysis\n{summaries, one per line}<|im_end|>\n
//	compaction            <|im_start|>system\n[compacted context: {N} bytes]<|im_end|>\n
//	item_reference        <|im_start|>system\n[ref {id}]<|im_end|>\n
//	program               <|im_start|>assistant to=programmatic_tool_calling\n{code}<|im_end|>\n
//	program_output        <|im_start|>tool call_id={call_id}\n{result}<|im_end|>\n
//	configuration_update  <|im_start|>system\n# Configuration update\nreasoning: {JSON}\ntext: {JSON}<|im_end|>\n
//
// The text of a message or output is its parts' text concatenated. Images
// and videos cost a fixed placeholder ("[image]", "[video]"), files
// "[file {filename}]"; encrypted and opaque bytes (a program's fingerprint
// too) are never rendered, only the length of a compaction's. A
// configuration update shows the settings it sends, reasoning, text or
// both, compacted. Invalid UTF-8 is rendered as U+FFFD.
//
// Every item is tokenized on its own, and appending one item's tokens to a
// cached Prompt costs tokenizing that item only. The result is exactly the
// full render, Renderer.Render, which tokenizes the system block and all the
// items as one text in one pass: every block ends with "<|im_end|>\n", and
// o200k_base's split expression takes "|>" and the line break after it as one
// piece (punctuation followed by line breaks), which cannot extend into the
// "<" that opens the next block. So a block boundary is always a piece
// boundary, BPE never merges across it, and whatever an item's text holds
// (trailing whitespace runs, line breaks, marker look-alikes such as a literal
// "<|im_end|>") needs no escaping. A property test over random item sequences
// and a fuzz target (FuzzRenderAppend) check the equality.
//
// # The scripted model
//
// Scripted (model name "tether-scripted") is a deterministic policy that gives
// any request a plausible answer, so the runtime can be measured without a
// real model. The same request always streams the same deltas. Its policy, in
// order:
//
//  1. Directives. A user message scripts function calls with lines
//     "call: NAME {json args}"; "call: a {...} | b {...}" is one step of
//     parallel calls. The arguments are sent exactly as written, or as "{}"
//     when they are missing or not a JSON object. The script is the newest
//     user message that has directive lines, so later steering messages
//     without directives do not reset it. The next step's index is the number
//     of runs of consecutive function_call items after that message (any
//     other item ends a run); while steps remain, the next one is sampled.
//  2. Tool calls. Otherwise, when the newest item is a user message and a
//     function tool may be called, the model calls it once, with arguments
//     derived from its parameters schema: the required properties (all of
//     them when none is required); strings from const, enum or default, then
//     format, then the property's name ("location" gives "Boston, MA", "path"
//     "README.md", "query" a few words of the user's text); integers and
//     numbers 1, or the bound nearest to it; booleans true; arrays one element; nested
//     objects and local $refs recursively. A schema it cannot read gives "{}".
//     The tool is the one tool_choice forces, else the first function tool
//     (among allowed_tools, when given).
//  3. Text. Otherwise the model answers with one message: when the newest
//     items are function_call_outputs, "NAME returned: OUTPUT" for each,
//     joined by "; " (any client tool's output alike; a program_output, the
//     result of a program a hosted tool ran, as "program returned:
//     RESULT"); else `You said: "TEXT"` quoting the newest user text
//     (directive lines removed); else a greeting. Quotes have their
//     whitespace collapsed and are cut to 200 characters. With text.format
//     json_schema (Request.Format) the answer is JSON made from the schema
//     as arguments are (rule 2), its free-text fields from that text; with
//     json_object, {"answer": TEXT}.
//
// tool_choice "none" turns off calls, scripted ones included. A forced
// function is called only after a user message, as in rule 2, so a forced
// tool_choice cannot make the loop call tools forever.
//
// Call ids are "call_" and 18 decimal digits hashed from the response id
// (Request.Response) and the call's place in the response: the agent's
// path, the number of items in the context, the step, the call's index in
// the step and its name. They are unique across responses, as a real
// server's are, even for a client whose context does not grow (a memory
// window of its last messages, the same length every turn), and within a
// response, whose context grows between steps; the same request gives the
// same ids, so a step run again after a takeover lines up with its first
// run. A request that names no response gets ids hashed from its place
// alone, unique within a conversation whose context grows. Replay draws
// its call ids in a response the same way (see Replay). Every id is the
// same six tokens (o200k_base splits digit runs three at a time), so the
// prompts of one rollout run in two designs, whose ids differ, have the
// same length.
//
// Output is streamed one o200k_base token per TextDelta or ArgsDelta (see
// Renderer.Tokens). MaxOutputTokens > 0 stops the sample after that many
// tokens: the open part gets its PartEnd, the rest of the step is dropped and
// the Result is Incomplete.
//
// # Timing
//
// A backend that simulates inference paces its output with one timing
// model, Timing, the same for every transport and design: a sample emits its
// first token TTFT + uncached/PrefillRate after it starts, and output token i
// (from 0) i/TPS after that, on an absolute schedule, so n tokens take
// TTFT + uncached/PrefillRate + (n-1)/TPS whatever the consumer does.
// The zero Timing streams as fast as the consumer takes deltas, without
// timers, on the goroutine that called Sample.
//
// The local backends' paced samples are stepped by an Engine, as an
// inference engine's continuous batching steps every running sequence at
// once: one timer heap per core for all of them, each wake-up handing every
// due sample its due tokens (its emit runs on the engine's goroutine), so
// that the goroutine that called Sample wakes once, when the sample ends,
// not per token. Backends of one server share one Engine (SetEngine); its
// Stats say what its batches held. Floored, pacing a remote model, waits
// with a Pacer on the goroutine that reads the upstream.
//
// An Engine given an EngineModel (SetModel) paces them by a simulated
// inference engine instead (package enginemodel, the simulator's own): a
// KV cache of finite size that every sample shares, admission while it
// has room, a token a step whose time grows with the batch, and a policy
// for a rollout's cache while its tools run. A comparison under it
// measures the engine effect too, and says so (Result.Engine).
//
// The uncached tokens are those of the prompt (the system block of
// Instructions and Tools, then the items) after the longest prefix the
// backend's PrefixCache holds, as an inference engine reuses the KV blocks
// of the prompts it has read. The cache matches prompts by content (hashes of
// the tokens before each item boundary), so a request costs the same prefill
// whether its Prompt was extended from the previous turn's, re-rendered from
// the whole history (stateless HTTP) or left nil: a comparison of transports
// and designs measures API overhead only. Each Result reports PromptTokens
// and CachedPromptTokens.
//
// The model's own output re-enters the next prompt as items the runtime
// renders; they count as uncached, in every design alike.
//
// # Backends
//
//   - Scripted ("tether-scripted"): the deterministic policy above.
//   - Replay ("replay:NAME"): replays a recorded rollout one step per turn,
//     whatever the transport. The trace format (JSON Lines: a header line,
//     then one assistant step a line with its text, tool calls, recorded
//     outputs and durations) is documented on Trace; LoadTraces returns the
//     embedded traces, recorded on the fixture repository in traces/repo.
//   - Upstream: any OpenAI-compatible server, over Chat Completions or
//     Responses, streaming. It runs at the upstream's speed; wrapped in
//     Floored, the timing model is a floor under it.
package sampler
