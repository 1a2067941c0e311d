package sampler

import (
	"hash/fnv"
	"strconv"
)

// placeID is the id a local model gives the call at index of its sample
// of req, named name, at step of its script or trace (-1: a scripted call
// outside a script): "call_" and 18 digits hashed from req.Response and
// the call's place in the response, the agent's path, the length of its
// context, the step, the index and the name. The response id makes the ids
// of two responses differ, however alike their contexts: a client that
// keeps its context the same length (a memory window of its last
// messages) asks every turn for the same place, and two conversations
// that replay the same trace walk the same steps. Within a response the
// context an agent's model reads grows between its steps (a compaction
// stands for what it seals: the model reads that), and a followup_task's
// run of the agent starts past its earlier run's context, so no two of
// them share a place. The same request gives the same id: a step run again
// (a takeover of a durable rollout) names its calls as its first run did.
// A request that names no response (a backend used on its own) gets ids
// from its place alone, unique within a conversation whose context grows.
func placeID(req *Request, step, index int, name string) string {
	b := make([]byte, 0, len(req.Response)+len(req.Agent)+len(name)+32)
	b = append(append(b, req.Response...), '/')
	b = append(append(b, req.Agent...), '/')
	b = strconv.AppendInt(b, int64(len(req.Items)), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, '/')
	b = append(b, name...)
	return hashedCallID(b)
}

// hashedCallID is "call_" and 18 decimal digits of b's FNV-1a hash.
// Digits, not hex: o200k_base reads a run of digits three at a time, one
// token each, so every id costs a prompt the same tokens. Two designs that
// run one rollout draw different ids (their responses differ) and still
// read prompts of the same length, and their usage compares.
func hashedCallID(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	out := make([]byte, 0, len("call_")+idDigits)
	out = append(out, "call_"...)
	d := strconv.AppendUint(nil, h.Sum64()%1e18, 10)
	for range idDigits - len(d) {
		out = append(out, '0')
	}
	return string(append(out, d...))
}

// idDigits is how many digits a local model's call id has.
const idDigits = 18
