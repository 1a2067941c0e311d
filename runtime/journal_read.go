package runtime

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// This file is a journal read back (journal.go writes it): each entry
// opened and checked, the snapshot decoded, each step applied to the state
// before it, the head checking the count; what a takeover rebuilds the
// rollout from.

// openEntry is an entry's kind and its parts, uncompressed: at most
// maxEntryBody bytes of them.
func openEntry(e []byte) (kind byte, body []byte, err error) {
	if len(e) < 2 {
		return 0, nil, errJournal
	}
	switch e[0] {
	case entryS2:
		if n, err := s2.DecodedLen(e[2:]); err != nil || n > maxEntryBody {
			return 0, nil, errJournal
		}
		if body, err = s2.Decode(nil, e[2:]); err != nil {
			return 0, nil, errJournal
		}
		return e[1], body, nil
	case entryDeflate:
	default:
		return 0, nil, errJournal
	}
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(e[2:]), nil); err != nil {
		return 0, nil, errJournal
	}
	body, err = io.ReadAll(io.LimitReader(r, maxEntryBody+1))
	if err != nil || len(body) > maxEntryBody {
		return 0, nil, errJournal
	}
	return e[1], body, nil
}

// flateReaders read the entries of the DEFLATE format.
var flateReaders = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// loadedCheckpoint is a journal read back: the state at its last pause,
// that pause's frames (its response.done last), its answer if any, and
// where the journal stands for the server that goes on writing it.
type loadedCheckpoint struct {
	pause   *pauseState
	frames  []frame
	answer  protocol.Items
	parked  time.Time
	journal journal
}

// errJournal is a journal that does not read back.
var errJournal = errors.New("runtime: unreadable journal")

// readJournal rebuilds the last pause of a journal's entries, checking
// them against its head.
func readJournal(head []byte, entries [][]byte) (*loadedCheckpoint, error) {
	var h journalHead
	if err := json.Unmarshal(head, &h); err != nil || h.Version != journalVersion || h.Entries != len(entries) || len(entries) == 0 {
		return nil, errJournal
	}
	lc := &loadedCheckpoint{}
	j := &lc.journal
	for i, e := range entries {
		kind, body, err := openEntry(e)
		if err != nil {
			return nil, err
		}
		r := entryReader{b: body}
		switch {
		case kind == entryAnswer:
			if lc.pause == nil || lc.answer != nil {
				return nil, errJournal
			}
			items, perr := protocol.DecodeItems(r.bytes(), "answer")
			if perr != nil {
				return nil, perr
			}
			if perr = protocol.ValidateItems(items, "answer"); perr != nil { // as an append's are
				return nil, perr
			}
			if !r.done() {
				return nil, errJournal
			}
			lc.answer = items
			j.tail += len(e)
			continue
		case kind == entryStep && i == 0, kind != entryStep && kind != entrySnapshot && kind != entryBase,
			kind != entryStep && i != 0:
			return nil, errJournal
		}
		snapshot := kind != entryStep
		parked, state := r.uvarint(), r.bytes()
		var items protocol.Items // a snapshot's, apart
		if kind == entrySnapshot {
			items = r.items()
		}
		frames := r.frames()
		var packed *packedPrompt
		if snapshot && r.err == nil && len(r.b) > 0 {
			packed = r.prompt(kind == entrySnapshot)
		}
		if r.err != nil || !r.done() {
			return nil, errJournal
		}
		var ps *pauseState
		if snapshot {
			ps, err = decodePause(state, items)
			j.base = len(e)
			if err == nil && packed != nil && packed.from+len(packed.segments) <= ps.Rendered {
				ps.packed = packed // of another render version, or past what the state rendered: not kept
			}
		} else {
			ps, err = applyStep(lc.pause, state)
			j.tail += len(e)
		}
		if err != nil {
			return nil, err
		}
		if len(frames) == 0 && !ps.Tree { // a pause's end with its response.done, or the beta's last call; a tree keeps none
			return nil, errJournal
		}
		for k, f := range frames {
			if k > 0 && f.seq <= frames[k-1].seq || f.seq >= ps.Seq {
				return nil, errJournal
			}
		}
		lc.pause, lc.frames, lc.answer = ps, frames, nil
		lc.parked = time.UnixMilli(int64(parked))
	}
	if lc.pause.Seq != h.Seq || (lc.answer != nil) != h.Answered {
		return nil, errJournal
	}
	j.n, j.state, j.frames, j.parked = len(entries), lc.pause, lc.frames, lc.parked
	if verifyJournal {
		j.all = entries
	}
	return lc, nil
}

// applyStep is the state a step entry leaves, prev the state before it.
func applyStep(prev *pauseState, b []byte) (*pauseState, error) {
	var step pauseStep
	if err := protocol.Unmarshal(b, &step); err != nil {
		return nil, err
	}
	if step.ItemsFrom < 0 || step.ItemsFrom > len(prev.Items) || step.OutputFrom < 0 || step.OutputFrom > len(prev.Response.Output) {
		return nil, errJournal
	}
	ps := *prev
	ps.Items = append(prev.Items[:step.ItemsFrom:step.ItemsFrom], step.Items...)
	resp := *prev.Response
	resp.Output = append(prev.Response.Output[:step.OutputFrom:step.OutputFrom], step.Output...)
	step.Response.applyTo(&resp)
	ps.Response, ps.pauseLoop = &resp, step.Loop
	if !ps.valid() {
		return nil, errJournal
	}
	return &ps, nil
}

// entryReader reads an entry's parts; the first error sticks.
type entryReader struct {
	b   []byte
	err error
}

func (r *entryReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errJournal
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *entryReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errJournal
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// items reads a snapshot's items: their count, then each one's JSON.
func (r *entryReader) items() protocol.Items {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) { // each item takes a byte at least
		r.err = errJournal
		return nil
	}
	items := make(protocol.Items, 0, n)
	for range n {
		b := r.bytes()
		if r.err != nil {
			return nil
		}
		it, perr := protocol.DecodeItem(b, "items")
		if perr != nil {
			r.err = errJournal
			return nil
		}
		items = append(items, it)
	}
	return items
}

func (r *entryReader) frames() []frame {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) { // each frame takes two bytes at least
		r.err = errJournal
		return nil
	}
	frames := make([]frame, 0, n)
	for range n {
		seq := r.uvarint()
		b := r.bytes()
		if r.err != nil || seq > 1<<31 {
			r.err = errJournal
			return nil
		}
		frames = append(frames, frame{seq: int(seq), b: b})
	}
	return frames
}

// prompt reads a snapshot's prompt, its segments counted unless an
// earlier build's snapshot holds it: nil when another RenderVersion made
// it.
func (r *entryReader) prompt(counted bool) *packedPrompt {
	version, from, n := r.uvarint(), r.uvarint(), r.uvarint()
	if r.err != nil || from > 1<<31 || n > uint64(len(r.b)) { // each segment takes a byte at least
		r.err = errJournal
		return nil
	}
	p := &packedPrompt{from: int(from), segments: make([]sampler.Segment, 0, n), counted: counted}
	for range n {
		seg := sampler.Segment{Packed: r.bytes()}
		if counted {
			tokens := r.uvarint()
			seg.Sum = r.uint64()
			if tokens > uint64(len(seg.Packed)) { // a token takes a byte at least
				r.err = errJournal
			}
			seg.Tokens = int(tokens)
		}
		p.segments = append(p.segments, seg)
	}
	if r.err != nil || version != sampler.RenderVersion {
		return nil
	}
	return p
}

func (r *entryReader) uint64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errJournal
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *entryReader) done() bool { return r.err == nil && len(r.b) == 0 }
