package runtime

import (
	"bytes"
	"context"
	"slices"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/internal/budget"
	"github.com/tether-run/tether/runtime/internal/lockrank"
	"github.com/tether-run/tether/runtime/internal/outbox"
)

// bgLog is a background response's events as they went out, and the
// response as it stands, for the clients that follow it: the stream of its
// create, a stream resumed (GET …?stream=true&starting_after=N), a poll, a
// cancel. It is the rollout's sink, and a producer never waits on its
// readers: put appends and wakes them. A response created without stream
// keeps no events, only what a poll reads.
//
// What it keeps is counted in the server's memory budget, room or not (it
// is held already), and given back when it is dropped (retention, or the
// budget's need: backgrounds.sweep).
type bgLog struct {
	mem    *budget.Budget
	events bool // created with stream: true: its events are kept for a resume

	mu     lockrank.Mutex[lockrank.BackgroundLog]
	frames [][]byte // the SSE frames, by sequence number; guarded by mu
	// resp is the response as its last response event carried it, JSON;
	// done, the output items completed since, by output index. Guarded by
	// mu.
	resp    []byte
	done    []doneItem
	final   bool // its terminal event is in, or its run has ended; guarded by mu
	let     bool // left to another server (release, end): it takes no event more; guarded by mu
	version int  // counts the changes to resp and done; guarded by mu
	// seeded are the frames a takeover found logged in the store: the run
	// again, of a model that says the same, is to make them the same
	// (diverged, when it does not), and its log goes on after them.
	seeded   int
	diverged bool
	dropped  bool          // let go of: retention passed; guarded by mu
	changed  chan struct{} // closed, and made anew, by each put; guarded by mu
	bytes    int64         // counted in mem; guarded by mu
}

// doneItem is an output item a response.output_item.done carried.
type doneItem struct {
	index int
	item  []byte
}

func newBGLog(mem *budget.Budget, events bool) *bgLog {
	return &bgLog{mem: mem, events: events, changed: make(chan struct{})}
}

// put keeps ev, under the rollout's lock.
func (l *bgLog) put(ev protocol.Event, _ *outbox.Delivery) error {
	var frame, resp, item []byte
	var err error
	if l.events {
		if frame, err = appendSSE(nil, ev); err != nil {
			return err
		}
	}
	index := -1
	switch e := ev.(type) {
	case *protocol.ResponseEvent:
		if resp, err = protocol.Marshal(e.Response); err != nil {
			return err
		}
	case *protocol.OutputItemEvent:
		if e.Type == protocol.EventOutputItemDone && e.Agent == nil {
			if item, err = protocol.Marshal(e.Item); err != nil {
				return err
			}
			index = e.OutputIndex
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped || l.let {
		return nil
	}
	if seq := protocol.Header(ev).SequenceNumber; seq < l.seeded {
		if frame != nil && !bytes.Equal(frame, l.frames[seq]) {
			l.diverged = true
		}
		return nil
	}
	grown := int64(len(frame) + len(resp) - len(l.resp) + len(item))
	if resp != nil || item != nil {
		l.version++
	}
	switch {
	case resp != nil:
		for _, d := range l.done { // the response carries them now
			grown -= int64(len(d.item))
		}
		l.resp, l.done = resp, nil
	case item != nil:
		l.done = append(l.done, doneItem{index, item})
	}
	if frame != nil {
		l.frames = append(l.frames, frame)
	}
	if protocol.Terminal(ev) {
		l.final = true
	}
	l.bytes += grown
	l.mem.Add(grown)
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// seed starts a log taken over from a store with the frames and the
// response logged there (BackgroundStore): the run again makes the same
// frames first, which are checked, not kept again.
func (l *bgLog) seed(frames [][]byte, resp []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames, l.seeded, l.resp = frames, len(frames), resp
	for _, f := range frames {
		l.bytes += int64(len(f))
	}
	l.bytes += int64(len(resp))
	l.mem.Add(l.bytes)
}

// hasDiverged reports whether the run again of a seeded log made other
// frames than the ones seeded.
func (l *bgLog) hasDiverged() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.diverged
}

// unsent is what a log's mirror (background_shared.go) may not have
// written to the store yet: the frames from at, the version of the
// response as it stands, and whether the run has ended with them (let: and
// left the response to another server).
func (l *bgLog) unsent(at int) (frames [][]byte, version int, final, let bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.frames[min(at, len(l.frames)):], l.version, l.final, l.let
}

// wait returns a channel closed at the log's next change.
func (l *bgLog) wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// behind is false: the log takes every frame as it comes, a delta never
// merged for it.
func (l *bgLog) behind(*outbox.Delivery) bool { return false }

// since is the frames after sequence number after, waiting while there are
// none and the response runs on; ended reports that its terminal event is
// among them, or came before. A ctx that ends returns what is there.
func (l *bgLog) since(ctx context.Context, after int) (frames [][]byte, ended bool) {
	for {
		l.mu.Lock()
		frames, ended = l.frames[min(after+1, len(l.frames)):], l.final || l.dropped
		changed := l.changed
		l.mu.Unlock()
		if len(frames) > 0 || ended {
			return frames, ended
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// last is the sequence number of the last event kept, -1 before any.
func (l *bgLog) last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.frames) - 1
}

// response is the response as it stands: as its last response event
// carried it, with the output items completed since in their places.
func (l *bgLog) response() (*protocol.Response, error) {
	l.mu.Lock()
	resp, done := l.resp, slices.Clone(l.done)
	l.mu.Unlock()
	var r protocol.Response
	if err := protocol.Unmarshal(resp, &r); err != nil {
		return nil, err
	}
	for _, d := range done {
		it, perr := protocol.DecodeItem(d.item, "output")
		if perr != nil {
			return nil, perr
		}
		for len(r.Output) <= d.index {
			r.Output = append(r.Output, nil)
		}
		r.Output[d.index] = it
	}
	r.Output = slices.DeleteFunc(r.Output, func(it protocol.Item) bool { return it == nil })
	return &r, nil
}

// release has the log take no event more: its response is left to
// another server.
func (l *bgLog) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.let = l.let || !l.final
}

// end marks the log ended once its run has: a run that ended without a
// terminal event leaves its readers nothing more to wait for. released
// says it ended so because another server runs the response now (fenced,
// handed over): its mirror writes no end.
func (l *bgLog) end(released bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.let = l.let || released && !l.final
	if !l.final {
		l.final = true
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// responseJSON is response, encoded: as its last response event carried
// it when no item has completed since.
func (l *bgLog) responseJSON() ([]byte, error) {
	l.mu.Lock()
	resp, plain := l.resp, len(l.done) == 0
	l.mu.Unlock()
	if plain {
		return resp, nil
	}
	r, err := l.response()
	if err != nil {
		return nil, err
	}
	return protocol.Marshal(r)
}

// drop lets go of what the log keeps: its response is no longer there to
// poll or resume. Its readers find it ended.
func (l *bgLog) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped {
		return
	}
	l.dropped = true
	l.mem.Refund(l.bytes)
	l.frames, l.resp, l.done, l.bytes = nil, nil, nil, 0
	close(l.changed)
	l.changed = make(chan struct{})
}
