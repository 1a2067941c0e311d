package runtime

import (
	"encoding/json"
	"time"

	"github.com/tether-run/tether/protocol"
)

// This file is a checkpoint's written form: a suspended rollout's state at a
// pause and the frames since its client last appended, written before the
// pause goes out, and read back by the server that takes it over.

// checkpointTimeout bounds one checkpoint operation: a store that does not
// answer in time leaves the pause in memory only.
const checkpointTimeout = 2 * time.Second

// checkpointVersion is the version of checkpointData's written form.
const checkpointVersion = 1

// checkpointData is what a Checkpoint's Data holds: the state at the pause,
// and the frames since the client last appended, the pause's response.done
// last, for a resuming client that missed some.
type checkpointData struct {
	Version int               `json:"version"`
	Pause   json.RawMessage   `json:"pause"` // a pauseState, as decodePause reads it
	Frames  []checkpointFrame `json:"frames"`
	// Answer is what the client appended at the pause, once it answered
	// every pending call: the loop went on from there.
	Answer json.RawMessage `json:"answer,omitempty"`
	// Parked is when the pause was written (Unix milliseconds): its
	// Suspension.Timeout runs from then on whichever server holds it.
	Parked int64 `json:"parked_ms,omitempty"`
}

type checkpointFrame struct {
	Seq   int             `json:"seq"`
	Event json.RawMessage `json:"event"`
}

// newCheckpoint is the checkpoint of the pause ps, whose frames are those
// since the last append: its pause encoded once, for the checkpoint of its
// answer too.
func newCheckpoint(ps *pauseState, frames []frame, parked time.Time) (*checkpointData, error) {
	pause, err := protocol.Marshal(ps)
	if err != nil {
		return nil, err
	}
	d := &checkpointData{Version: checkpointVersion, Pause: pause, Frames: make([]checkpointFrame, len(frames)), Parked: parked.UnixMilli()}
	for i, f := range frames {
		d.Frames[i] = checkpointFrame{Seq: f.seq, Event: f.b}
	}
	return d, nil
}

// encode writes the checkpoint out, with the pause's answer when there is
// one.
func (d checkpointData) encode(answer protocol.Items) ([]byte, error) {
	if answer != nil {
		var err error
		if d.Answer, err = protocol.Marshal(answer); err != nil {
			return nil, err
		}
	}
	return json.Marshal(d)
}

// loadedCheckpoint is a checkpoint read back: the pause, its frames, the
// last of them its response.done, and its answer if any.
type loadedCheckpoint struct {
	data   *checkpointData // as written, without the answer
	pause  *pauseState
	frames []frame
	answer protocol.Items
}

// decodeCheckpoint reads back what checkpointData.encode wrote.
func decodeCheckpoint(b []byte) (*loadedCheckpoint, error) {
	var d checkpointData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	if d.Version != checkpointVersion || len(d.Frames) == 0 {
		return nil, errPauseUnreadable(d.Version)
	}
	ps, err := decodePause(d.Pause)
	if err != nil {
		return nil, err
	}
	lc := &loadedCheckpoint{pause: ps, frames: make([]frame, len(d.Frames))}
	for i, f := range d.Frames {
		if i > 0 && f.Seq <= lc.frames[i-1].seq || f.Seq >= ps.Seq {
			return nil, errPauseUnreadable(d.Version)
		}
		lc.frames[i] = frame{seq: f.Seq, b: f.Event}
	}
	if len(d.Answer) > 0 {
		var perr *protocol.Error
		if lc.answer, perr = protocol.DecodeItems(d.Answer, "answer"); perr != nil {
			return nil, perr
		}
		if perr = protocol.ValidateItems(lc.answer, "answer"); perr != nil { // as an append's are
			return nil, perr
		}
	}
	d.Answer = nil
	lc.data = &d
	return lc, nil
}
