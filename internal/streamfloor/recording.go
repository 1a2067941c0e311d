// Package streamfloor is the streaming floor of a load run: a server that
// puts on the wire what tether puts there for an agent rollout, at the
// same cadence, and does nothing else. Its cost is what the machine itself
// charges for streaming those bytes to those clients (the kernel's writes,
// the loopback, the scheduler, the engine's timers), so that tether's cost
// under load can be read as a ratio to it, measured in the same run,
// rather than against an absolute budget that says nothing of the machine
// it runs on.
//
// The floor replays a Recording: the WebSocket frames a tether server sent
// for one rollout, step by step (a step is what the server sends between
// two client messages), captured on the wire (Tap) before the run. Each
// client message starts the next step: its frames before the first token
// go out at once, and each token's frame when the engine (the sampler's
// Engine, the served models' own, with the same Timing and engine step)
// releases that token; a delta due while the writer has not yet taken
// the one before joins it, as tether merges the deltas its client has not
// taken (the merged delta keeps the first's sequence number, and the
// numbers after it skip those the others had). A batch of frames due
// together goes out in one write, outside any outbox, from buffers that
// are reused, written as tether writes its connections': by a few
// flushers for all of them (package flushers), in writes that do not wait
// on a client, and a writer of the connection's own only for what a
// socket did not take, which holds its flush briefly for the next batch
// while the server is saturated by the policy tether's writers of their
// own follow (package flushhold). The floor allocates nothing per frame,
// tokenizes nothing, decodes no request and keeps no store. It keeps only the last message each client sent, as a
// server must hold what it was sent (a parked rollout's context).
//
// Package ablate records the rollout and runs the floor beside tether
// (tether ablate --load, --park); tether floor serves one.
package streamfloor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A Recording is one rollout as a tether server streamed it: its steps,
// in order, each ready to write.
type Recording struct {
	// Steps are the server's answers to the client's messages, in order:
	// step i answers message i (the create, then each append or turn). A
	// message the server answered with nothing (response.processed, which
	// a client sends once it has read a response's end) has a step with
	// no frames (Silent).
	Steps []Step `json:"steps"`
}

// A Step is what the server sent in answer to one client message: raw
// WebSocket frames (header and payload, unmasked, as a server writes
// them), cut at the tokens they carry.
type Step struct {
	// Head are the frames before the first token's, written as soon as
	// the message is read (response.created, response.in_progress, the
	// first item's start).
	Head []byte `json:"head"`
	// Frames are the rest, one entry per token delta: the delta's
	// event, then the frames up to the next delta (items ending and
	// starting, the pause or the end after the last).
	Frames []Frame `json:"frames"`
	// Due is, for each of Frames, the index among the step's streamed
	// tokens of the last token its delta carries: the frame goes out when
	// that token is due.
	Due []int `json:"due"`
	// Tokens is the step's streamed tokens (Due's last plus one).
	Tokens int `json:"tokens"`
	// Uncached are the prompt tokens the server read uncached, which
	// delay the step's first token (Timing.Prefill); Reasoning the tokens
	// it paced unsent before it.
	Uncached  int `json:"uncached"`
	Reasoning int `json:"reasoning"`
}

// A Frame is a delta event, cut around its text so that deltas due
// while the writer is behind can go out as one, as tether merges them
// (Pre, one text after the other, Post), and the whole frames after it.
type Frame struct {
	Pre  []byte `json:"pre"`  // the event's JSON up to its delta's text: {"type":…,"delta":"
	Text []byte `json:"text"` // the text, escaped as it was sent
	Post []byte `json:"post"` // the rest: ","logprobs":[]}
	Then []byte `json:"then"` // whole frames sent after it, before the next delta
}

// Silent reports whether the step writes nothing: its message had no
// answer.
func (s *Step) Silent() bool { return len(s.Head) == 0 && len(s.Frames) == 0 }

// Bytes is how many bytes the step writes, each delta its own frame.
func (s *Step) Bytes() int {
	n := len(s.Head)
	for _, f := range s.Frames {
		size := len(f.Pre) + len(f.Text) + len(f.Post)
		n += len(appendHeader(nil, size)) + size + len(f.Then)
	}
	return n
}

// Validate checks the recording's shape: steps to replay, and each step's
// frames due in order.
func (r *Recording) Validate() error {
	if !slices.ContainsFunc(r.Steps, func(s Step) bool { return !s.Silent() }) {
		return errors.New("streamfloor: the recording has no steps")
	}
	for i, s := range r.Steps {
		if len(s.Due) != len(s.Frames) {
			return fmt.Errorf("streamfloor: step %d: %d frames, %d due indexes", i, len(s.Frames), len(s.Due))
		}
		last := -1
		for _, d := range s.Due {
			if d <= last {
				return fmt.Errorf("streamfloor: step %d: frames due out of order (%v)", i, s.Due)
			}
			last = d
		}
		if s.Tokens != last+1 || s.Uncached < 0 || s.Reasoning < 0 {
			return fmt.Errorf("streamfloor: step %d: %d tokens, frames due to %d, %d uncached, %d reasoning", i, s.Tokens, last, s.Uncached, s.Reasoning)
		}
	}
	return nil
}

// Counter counts a delta's tokens, as the load clients do (o200k_base);
// at least one a delta.
type Counter func(text string) int

// Parse cuts a client connection's tape into a recording: in is every
// byte the client read, the server's HTTP upgrade response first; marks
// are the offsets in it at which the client began a message (Tape's: the
// first is the create), and the server's close, if any, ends it. The text
// frames are the server's events: a delta event (type ending in ".delta",
// with a "delta") is a token frame of count's tokens; response.done and a
// response's end carry the usage from which the step's uncached and
// reasoning tokens are read.
func Parse(in []byte, marks []int, count Counter) (*Recording, error) {
	end := bytes.Index(in, []byte("\r\n\r\n"))
	if end < 0 || !bytes.HasPrefix(in, []byte("HTTP/1.1 101")) {
		return nil, errors.New("streamfloor: the tape does not begin with a WebSocket upgrade")
	}
	body := end + 4
	rec := &Recording{}
	var prev usage
	prevID := ""
	for i, m := range marks {
		stop := len(in)
		if i+1 < len(marks) {
			stop = marks[i+1]
		}
		if m < body || stop < m || stop > len(in) {
			return nil, fmt.Errorf("streamfloor: message %d sent at byte %d, inside the upgrade, before the one before or past the tape", i, m)
		}
		step, u, id, closed, err := parseStep(in[m:stop], count)
		if err != nil {
			return nil, fmt.Errorf("streamfloor: step %d: %w", i, err)
		}
		if step.Silent() {
			rec.Steps = append(rec.Steps, Step{}) // a message with no answer
		} else {
			if id != "" && id == prevID { // a suspended rollout's next step: its usage adds up
				step.Uncached, step.Reasoning = (u.in-u.cached)-(prev.in-prev.cached), u.reasoning-prev.reasoning
			} else {
				step.Uncached, step.Reasoning = u.in-u.cached, u.reasoning
			}
			step.Uncached, step.Reasoning = max(step.Uncached, 0), max(step.Reasoning, 0)
			prev, prevID = u, id
			rec.Steps = append(rec.Steps, *step)
		}
		if closed {
			break // nothing follows the server's close
		}
	}
	return rec, rec.Validate()
}

// usage is a response's token counts as its events carry them.
type usage struct{ in, cached, reasoning int }

// event is what Parse reads of a server event.
type event struct {
	Type     string  `json:"type"`
	Delta    *string `json:"delta"`
	Response *struct {
		ID    string `json:"id"`
		Usage *struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	} `json:"response"`
}

// parseStep reads one step's frames: the step, the last usage its events
// carried, its response's id, and whether the server's close ended it.
func parseStep(b []byte, count Counter) (step *Step, u usage, id string, closed bool, err error) {
	step = &Step{}
	cur := -1 // the frame being filled: -1, the head
	for len(b) > 0 {
		n, payload, op, err := readFrame(b)
		if err != nil {
			return nil, u, "", false, err
		}
		frame := b[:n]
		b = b[n:]
		if op == 0x8 { // the server's close: the step, and the tape, end
			closed = true
			break
		}
		if op == 0x1 { // a text frame: an event
			var ev event
			if err := json.Unmarshal(payload, &ev); err != nil {
				return nil, u, "", false, fmt.Errorf("a text frame that is not an event: %w", err)
			}
			if strings.HasSuffix(ev.Type, ".delta") && ev.Delta != nil {
				f, err := cutDelta(payload, *ev.Delta)
				if err != nil {
					return nil, u, "", false, err
				}
				step.Tokens += max(count(*ev.Delta), 1)
				step.Frames = append(step.Frames, f)
				step.Due = append(step.Due, step.Tokens-1)
				cur++
				continue
			}
			if r := ev.Response; r != nil && r.Usage != nil {
				u = usage{in: r.Usage.InputTokens, cached: r.Usage.InputTokensDetails.CachedTokens, reasoning: r.Usage.OutputTokensDetails.ReasoningTokens}
			}
			if r := ev.Response; r != nil && r.ID != "" {
				id = r.ID
			}
		}
		if cur < 0 {
			step.Head = append(step.Head, frame...)
		} else {
			step.Frames[cur].Then = append(step.Frames[cur].Then, frame...)
		}
	}
	return step, u, id, closed, nil
}

// deltaKey begins a delta event's text: tether writes it after the
// event's type, sequence number and item, before its logprobs.
var deltaKey = []byte(`"delta":"`)

// cutDelta cuts a delta event's JSON around its text, whose unescaped
// value is delta.
func cutDelta(payload []byte, delta string) (Frame, error) {
	i := bytes.Index(payload, deltaKey)
	if i < 0 {
		return Frame{}, errors.New("a delta event with no \"delta\":\" in it")
	}
	start := i + len(deltaKey)
	end := start
	for end < len(payload) && payload[end] != '"' {
		if payload[end] == '\\' {
			end++
		}
		end++
	}
	var text string
	if end >= len(payload) || json.Unmarshal(payload[start-1:end+1], &text) != nil || text != delta {
		return Frame{}, errors.New("a delta event whose first \"delta\" member is not its delta")
	}
	return Frame{Pre: payload[:start], Text: payload[start:end], Post: payload[end:]}, nil
}

// appendHeader appends the header of a final, unmasked text frame of n
// bytes (RFC 6455, section 5.2).
func appendHeader(b []byte, n int) []byte {
	switch {
	case n < 126:
		return append(b, 0x81, byte(n))
	case n <= 0xffff:
		return append(b, 0x81, 126, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0x81, 127), uint64(n))
	}
}

// readFrame reads the WebSocket frame at the start of b (RFC 6455, section
// 5.2), as a server sends it: whole, unmasked. It returns the frame's
// length, its payload and its opcode.
func readFrame(b []byte) (n int, payload []byte, op byte, err error) {
	if len(b) < 2 {
		return 0, nil, 0, errors.New("a frame cut short")
	}
	if b[0]&0x80 == 0 {
		return 0, nil, 0, errors.New("a fragmented message: the floor replays whole frames")
	}
	if b[1]&0x80 != 0 {
		return 0, nil, 0, errors.New("a masked frame from the server")
	}
	op, size, hdr := b[0]&0x0f, uint64(b[1]&0x7f), 2
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, nil, 0, errors.New("a frame cut short")
		}
		size, hdr = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0, nil, 0, errors.New("a frame cut short")
		}
		size, hdr = binary.BigEndian.Uint64(b[2:]), 10
	}
	if size > uint64(len(b)-hdr) {
		return 0, nil, 0, errors.New("a frame cut short")
	}
	return hdr + int(size), b[hdr : hdr+int(size)], op, nil
}
