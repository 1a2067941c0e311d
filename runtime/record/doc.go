// Package record keeps a tether server's traffic log: every response's
// request, its events and the appends that resumed it, one JSON object a
// line, as `tether serve --record DIR` writes it and `tether trace import`
// reads it back into replay traces. It is an optional layer: a
// runtime.Recorder (Writer) and the reader of what it wrote (Reader).
//
// # Format (version 1)
//
// A traffic log is JSON Lines (UTF-8, one object a line). Its first line is
// the header:
//
//	{"tether_record": 1, "started": "2026-12-03T10:00:00.123456789Z", "part": 1}
//
// tether_record is the format's version; started is when the log began;
// part, in the files Create writes, is the file's place in the log (see
// Files below), from 1. Every following line is one of three, each with
// the time it was taken ("at", RFC 3339 with nanoseconds, UTC) and the id
// of the response it belongs to:
//
//	{"at": "…", "response_id": "resp_…", "request": {…}, "path": {"transport": "ws", "design": "suspend", "state": "none"}}
//	{"at": "…", "response_id": "resp_…", "event": {…}}
//	{"at": "…", "response_id": "resp_…", "append": [{…}, …]}
//
// A request line is the body of the response.create or POST /v1/responses
// that began the response (its input always an array of items), with at
// the time it arrived; path, which a proxy may leave out, is how tether
// served it (runtime.ServePath). An event line is one server event as the
// client gets it in JSON (whatever the connection's encoding), sequence
// number included, with at the time it was queued; the events of a
// response that was not streamed (HTTP without stream) are there too. An
// append line is the input of a response.append that resumed a suspended
// rollout (tool outputs, steering messages), with at the time the server
// took it. A response's lines are in the order they happened; lines of
// different responses interleave. Every item is as the Responses API
// writes it, so that a proxy in front of any Responses API server can
// write the same log from what it forwards.
//
// # Files
//
// Create writes a log as a set of files in one directory, bounded by
// Options: the file being written, NAME.jsonl, and the files rotated out
// of it, NAME.N.jsonl, N being each one's part. A file is rotated before a
// line that would take it past Options.FileBytes, so that every file is
// whole lines and a log of its own (it begins with a header); when the set
// would pass Options.Files files or Options.Bytes bytes, its oldest file is
// removed. Files lists a set in order, and OpenFiles reads it as one log.
//
// A file can end inside a line all the same: its writer was stopped, or a
// write failed and the file could not be cut back to its last whole line.
// A Reader takes such a file up to its last whole line, notes where it was
// cut (Cuts), and goes on with the next file.
//
// What a log holds is what the clients sent and got: prompts, code, tool
// outputs. `tether trace import --redact` makes traces of it without
// them.
package record
