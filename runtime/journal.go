package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// This file is a rollout's journal as it is written: what a durable
// rollout's server writes at each pause, before the pause goes out, and at
// each answer (journal_read.go reads it back).
//
// A journal is entries, appended, and a small head, rewritten with each
// write (Checkpoints.Write). Its first entry is a snapshot of the rollout
// at a pause (entrySnapshot: the pauseState whole, its context's items
// apart, each item's JSON length-prefixed, so that a wake reads each once,
// not the array whole first); each pause after it adds a
// step entry, what the pause adds to the state before it (pauseStep: the
// context's new items, the response's new output, the loop's small state);
// an answer entry holds what the client appended at a pause. So a pause
// writes what is new, never the context again. The journal begins anew
// with a snapshot when its tail outgrows its snapshot (compaction), when
// the tools offered changed, and when a write was lost (ErrJournalGap).
//
// Each base and step entry carries the frames since the client last
// appended, the pause's response.done last, for a resuming client that
// missed some; they are spliced in as the client got them, never encoded
// again. An entry is a format byte, a kind byte, then its parts,
// length-prefixed (uvarints) and compressed (sealEntry): S2 (Snappy's
// successor), several times as fast as DEFLATE's fastest level at some
// more bytes, for the pause's response.done waits on it; entries of the
// DEFLATE format, as an earlier build wrote them, still read.

// checkpointTimeout bounds one journal operation: a store that does not
// answer in time leaves the pause in memory only.
const checkpointTimeout = 2 * time.Second

// journalVersion is the version of the journal's written form: its
// head's and its entries' layout.
const journalVersion = 1

// The formats of an entry, its first byte: how its parts are compressed.
const (
	entryDeflate byte = 1 // read only
	entryS2      byte = 2
)

// The kinds of journal entry.
const (
	entryBase     byte = 1 // read only: an earlier build's snapshot, the pauseState whole, its frames, its prompt
	entryStep     byte = 2 // a pauseStep, its frames
	entryAnswer   byte = 3 // the items the client appended at the pause, every pending call answered
	entrySnapshot byte = 4 // the pauseState but its items, its items apart, its frames, its prompt
)

// pauseStep is what a pause adds to the state the journal held before it:
// the context from ItemsFrom on, the response's output from OutputFrom on
// (the items of the step before, which its answer may have changed, and
// everything since), the response's fields that change, and the loop's
// small state, whole.
type pauseStep struct {
	ItemsFrom  int              `json:"items_from"`
	Items      protocol.Items   `json:"items"`
	OutputFrom int              `json:"output_from"`
	Output     protocol.Items   `json:"output"`
	Response   responseProgress `json:"response"`
	Loop       pauseLoop        `json:"loop"`
}

// stepState is the pauseStep of ps from itemsFrom and outputFrom, as JSON
// laid out here rather than by the encoder, so that the items are spliced
// in as encoded, never checked again: the step's output items are in its
// context too, and each item is encoded once (itemEncodings): in enc, the
// encodings its answer's write made of the client's items. readJournal
// decodes it as a pauseStep.
func stepState(ps *pauseState, itemsFrom, outputFrom int, enc itemEncodings) ([]byte, error) {
	response, err := protocol.Marshal(progressOf(ps.Response))
	if err != nil {
		return nil, err
	}
	loop, err := protocol.Marshal(ps.pauseLoop)
	if err != nil {
		return nil, err
	}
	if enc == nil {
		enc = itemEncodings{}
	}
	b := append([]byte(`{"items_from":`), strconv.Itoa(itemsFrom)...)
	b = append(b, `,"items":`...)
	if b, err = enc.appendArray(b, ps.Items[itemsFrom:]); err != nil {
		return nil, err
	}
	b = append(append(b, `,"output_from":`...), strconv.Itoa(outputFrom)...)
	b = append(b, `,"output":`...)
	if b, err = enc.appendArray(b, ps.Response.Output[outputFrom:]); err != nil {
		return nil, err
	}
	b = append(append(b, `,"response":`...), response...)
	b = append(append(b, `,"loop":`...), loop...)
	return append(b, '}'), nil
}

// itemEncodings encodes items once each, by identity (every Item is a
// pointer, and the runtime changes no item a client appended once it is
// taken: its id is given before).
type itemEncodings map[protocol.Item][]byte

// appendArray appends items to b as a JSON array.
func (e itemEncodings) appendArray(b []byte, items protocol.Items) ([]byte, error) {
	b = append(b, '[')
	for i, it := range items {
		enc, ok := e[it]
		if !ok {
			var err error
			if enc, err = protocol.Marshal(it); err != nil {
				return nil, err
			}
			e[it] = enc
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, enc...)
	}
	return append(b, ']'), nil
}

// responseProgress is what changes of a response as its rollout goes on,
// besides its output; the rest (its id, model, the request's echo) is the
// snapshot's.
type responseProgress struct {
	Status            protocol.ResponseStatus     `json:"status"`
	CompletedAt       *int64                      `json:"completed_at,omitempty"`
	IncompleteDetails *protocol.IncompleteDetails `json:"incomplete_details,omitempty"`
	Error             *protocol.ResponseError     `json:"error,omitempty"`
	Usage             *protocol.Usage             `json:"usage,omitempty"`
	RequiredAction    *protocol.RequiredAction    `json:"required_action,omitempty"`
	Timings           *protocol.Timings           `json:"timings,omitempty"`
}

func progressOf(r *protocol.Response) responseProgress {
	return responseProgress{Status: r.Status, CompletedAt: r.CompletedAt, IncompleteDetails: r.IncompleteDetails,
		Error: r.Error, Usage: r.Usage, RequiredAction: r.RequiredAction, Timings: r.Timings}
}

func (p responseProgress) applyTo(r *protocol.Response) {
	r.Status, r.CompletedAt, r.IncompleteDetails, r.Error = p.Status, p.CompletedAt, p.IncompleteDetails, p.Error
	r.Usage, r.RequiredAction, r.Timings = p.Usage, p.RequiredAction, p.Timings
}

// journalHead is a journal's head: the pause it stands at, what a reader
// learns without its entries, and their count, which checks them.
type journalHead struct {
	Version  int      `json:"version"`
	Entries  int      `json:"entries"`
	Seq      int      `json:"sequence_number"` // the one the rollout's next event takes
	StepAt   int      `json:"output_index"`    // the paused step's first output index
	Pending  []string `json:"pending,omitempty"`
	Answered bool     `json:"answered,omitempty"`
	Rendered int      `json:"rendered"`  // the model's position: the context's items it had rendered
	Parked   int64    `json:"parked_ms"` // when the pause was written (Unix ms): its timeout runs from then, wherever it is held
}

// journal is where a rollout's journal stands, as its owner last wrote it
// (or took it over).
type journal struct {
	n      int         // its entries
	state  *pauseState // the state its entries rebuild: the next step entry is what a pause adds to it
	frames []frame     // that pause's frames, for a journal begun anew at its answer
	parked time.Time
	base   int // bytes of its snapshot entry
	tail   int // bytes of the entries since

	// answered is the encodings of the items its last answer entry holds,
	// which the next step entry holds again, in the context: encoded at the
	// answer, beside the model's work, rather than while the pause waits.
	answered itemEncodings

	all [][]byte // its entries, kept only to check them (verifyJournal)
}

// verifyJournal has every journal write check that the journal, read back
// whole, rebuilds the state written; the runtime's tests set it.
var verifyJournal bool

// verify checks that the journal's entries, under head, rebuild ps, as a
// snapshot of ps does; it panics when they do not.
func (j *journal) verify(head []byte, ps *pauseState) {
	lc, err := readJournal(head, j.all)
	if err != nil {
		panic(fmt.Sprintf("runtime: the journal of %s does not read back: %v", ps.Response.ID, err))
	}
	snapshot, err := protocol.Marshal(ps)
	if err == nil {
		ps, err = decodePause(snapshot, nil)
	}
	if err != nil {
		panic(fmt.Sprintf("runtime: the state of %s does not read back: %v", ps.Response.ID, err))
	}
	want, _ := protocol.Marshal(ps)
	got, _ := protocol.Marshal(lc.pause)
	if !bytes.Equal(got, want) {
		panic(fmt.Sprintf("runtime: the journal of %s rebuilds\n%s\nnot\n%s", ps.Response.ID, got, want))
	}
}

// pauseWrite is the write of a pause: the journal begun anew with a
// snapshot, or a step entry appended.
func (j *journal) pauseWrite(ps *pauseState, frames []frame, parked time.Time) (reset bool, entry []byte, err error) {
	if j.compactNext(ps) {
		entry, err = snapshotEntry(ps, frames, parked)
		return true, entry, err
	}
	entry, err = stepEntry(j.state, ps, frames, parked, j.answered)
	return false, entry, err
}

// compactNext reports whether the next pause's write begins the journal
// anew: it has none, its tail has outgrown its snapshot (a journal stays
// within twice the rollout's state, and a pause's write is its new items
// on average), or the tools offered changed (a snapshot's alone), or the
// state is a tree at rest where it was a pause, or the other way round
// (their items are not the same list).
func (j *journal) compactNext(ps *pauseState) bool {
	return j.n == 0 || j.tail >= max(j.base, minCompaction) || !offersSame(j.state, ps) || j.state.Tree != ps.Tree
}

// minCompaction is the tail below which a journal is not compacted,
// whatever its snapshot's size.
const minCompaction = 256 << 10

// offersSame reports whether two states offer the same tools: the same
// values, shared since the first step listed them.
func offersSame(a, b *pauseState) bool {
	if len(a.Tools) != len(b.Tools) || len(a.MCPTools) != len(b.MCPTools) {
		return false
	}
	if len(a.Tools) > 0 && &a.Tools[0] != &b.Tools[0] {
		return false
	}
	for label, ts := range a.MCPTools {
		if bt, ok := b.MCPTools[label]; !ok || len(bt) != len(ts) || len(ts) > 0 && &bt[0] != &ts[0] {
			return false
		}
	}
	return true
}

// wrote records a write that landed, at the pause of state: the pause's,
// or its answer's.
func (j *journal) wrote(reset bool, entries [][]byte, state *pauseState, frames []frame, parked time.Time) {
	size := 0
	for _, e := range entries {
		size += len(e)
	}
	if reset {
		j.n, j.base, j.tail = 0, len(entries[0]), size-len(entries[0])
	} else {
		j.tail += size
	}
	j.n += len(entries)
	if verifyJournal {
		if reset {
			j.all = nil
		}
		j.all = append(slices.Clip(j.all), entries...)
	}
	j.state, j.frames, j.parked, j.answered = state, frames, parked, nil
}

// head is the journal's head once entries more are written at the pause
// of state, answered or not.
func (j *journal) head(entries int, state *pauseState, answered bool, parked time.Time) []byte {
	h := journalHead{Version: journalVersion, Entries: entries, Seq: state.Seq, StepAt: state.StepAt, Answered: answered,
		Rendered: state.Rendered, Parked: parked.UnixMilli()}
	if !answered {
		for _, c := range state.Calls {
			if c.Client {
				h.Pending = append(h.Pending, c.CallID)
			}
		}
	}
	b, _ := json.Marshal(h) // plain values: it cannot fail
	return b
}

// snapshotEntry is a snapshot entry: the state whole, its items apart,
// its frames, and its prompt when it has one (taken in this process), each
// item's tokens with their count and the hash through them, so that a
// wake neither tokenizes the context again nor hashes its tokens.
func snapshotEntry(ps *pauseState, frames []frame, parked time.Time) ([]byte, error) {
	rest := *ps
	rest.Items = nil
	state, err := protocol.Marshal(&rest)
	if err != nil {
		return nil, err
	}
	items := binary.AppendUvarint(nil, uint64(len(ps.Items)))
	var b []byte // each item's, in one buffer
	for _, it := range ps.Items {
		if b, err = protocol.AppendMarshal(b[:0], it); err != nil {
			return nil, err
		}
		items = binary.AppendUvarint(items, uint64(len(b)))
		items = append(items, b...)
	}
	var prompt []byte
	if ps.prompt != nil && ps.prompt.HasTokens() { // a bare one's are rendered again at a wake
		prompt = binary.AppendUvarint(prompt, sampler.RenderVersion)
		prompt = binary.AppendUvarint(prompt, uint64(ps.promptFrom))
		segs := ps.prompt.Segments()
		prompt = binary.AppendUvarint(prompt, uint64(len(segs)))
		for _, seg := range segs {
			prompt = binary.AppendUvarint(prompt, uint64(len(seg.Packed)))
			prompt = append(prompt, seg.Packed...)
			prompt = binary.AppendUvarint(prompt, uint64(seg.Tokens))
			prompt = binary.LittleEndian.AppendUint64(prompt, seg.Sum)
		}
	}
	return appendEntry(entrySnapshot, state, items, frames, prompt, parked), nil
}

// packedPrompt is a snapshot's prompt as its journal kept it: the items
// from from on, each one's tokens packed, with their count and the
// prompt's hash through them (sampler.Segment), or, in an earlier build's
// snapshot (entryBase), the packed tokens alone (counted is false).
type packedPrompt struct {
	from     int
	segments []sampler.Segment
	counted  bool
}

// stepEntry is the entry of the pause ps, which follows prev in the
// journal. What the answer to prev's pause may have changed is written
// again: its calls' items (finishCall completes or replaces them), and the
// items after them; answered has the encodings of its answer's items.
func stepEntry(prev, ps *pauseState, frames []frame, parked time.Time, answered itemEncodings) ([]byte, error) {
	itemsFrom, outputFrom := len(prev.Items), prev.StepAt
	for _, c := range prev.Calls {
		itemsFrom = min(itemsFrom, c.Pos)
		outputFrom = min(outputFrom, c.Index)
	}
	if itemsFrom > len(ps.Items) || outputFrom > len(ps.Response.Output) {
		return nil, errors.New("runtime: the context shrank since the journal's last pause")
	}
	state, err := stepState(ps, itemsFrom, outputFrom, answered)
	if err != nil {
		return nil, err
	}
	return appendEntry(entryStep, state, nil, frames, nil, parked), nil
}

// answerEntry is the entry of a pause's answer, the items its client
// appended, and their encodings, for the next step entry.
func answerEntry(items protocol.Items) ([]byte, itemEncodings, error) {
	enc := itemEncodings{}
	b, err := enc.appendArray(nil, items)
	if err != nil {
		return nil, nil, err
	}
	body := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(b)), uint64(len(b)))
	return sealEntry(entryAnswer, append(body, b...)), enc, nil
}

// appendEntry lays out a snapshot or step entry: its kind, when its pause
// was written, its state, a snapshot's items (laid out by snapshotEntry),
// its frames (sequence number, bytes) as they are, then a snapshot's
// prompt, if any.
func appendEntry(kind byte, state, items []byte, frames []frame, prompt []byte, parked time.Time) []byte {
	size := 3*binary.MaxVarintLen64 + len(state) + len(items) + len(prompt)
	for _, f := range frames {
		size += 2*binary.MaxVarintLen64 + len(f.b)
	}
	e := make([]byte, 0, size)
	e = binary.AppendUvarint(e, uint64(max(parked.UnixMilli(), 0)))
	e = binary.AppendUvarint(e, uint64(len(state)))
	e = append(e, state...)
	e = append(e, items...)
	e = appendFrames(e, frames)
	return sealEntry(kind, append(e, prompt...))
}

// appendFrames lays out frames as entryReader.frames reads them: their
// count, then each one's sequence number and bytes.
func appendFrames(e []byte, frames []frame) []byte {
	e = binary.AppendUvarint(e, uint64(len(frames)))
	for _, f := range frames {
		e = binary.AppendUvarint(e, uint64(f.seq))
		e = binary.AppendUvarint(e, uint64(len(f.b)))
		e = append(e, f.b...)
	}
	return e
}

// sealEntry is an entry of kind whose parts are body: its version and kind,
// then body compressed (s2). A step's frames are
// mostly deltas that repeat each other's shape, and the context's items
// are text: both shrink several times over.
func sealEntry(kind byte, body []byte) []byte {
	out := make([]byte, 2, 2+s2.MaxEncodedLen(len(body)))
	out[0], out[1] = entryS2, kind
	enc := s2.Encode(out[2:cap(out)], body) // in out's array, which holds the most it can take
	return out[:2+len(enc)]
}

// maxEntryBody bounds what one journal entry holds, uncompressed: a
// context far past any model's, and a step's frames, which a suspended
// rollout keeps at most maxDetachedBytes of.
const maxEntryBody = 256 << 20
