package record

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// A log Create writes is a set of files (files.go): a line that would take
// the current file past Options.FileBytes rotates it first, and the oldest
// go past Options.Files and Options.Bytes.

// fitLocked makes room for a line of n bytes in Create's log (rotating
// the current file, removing the oldest), and says whether it is to be
// written: a line larger than the log's bound is left out.
func (w *Writer) fitLocked(at time.Time, id string, n int64) bool {
	if w.open == nil {
		return true // New's stream
	}
	if int64(len(w.header))+n <= w.opts.Bytes {
		if w.size > int64(len(w.header)) && w.size+n > w.opts.FileBytes {
			w.rotateLocked()
			if w.stopped {
				w.lost++
				return false
			}
		}
		for len(w.rotated) > 0 && w.rotBytes+w.size+n > w.opts.Bytes {
			w.removeOldestLocked()
		}
		if w.size+n <= w.opts.Bytes {
			return true
		}
	}
	w.lost++
	w.log.Warn("traffic log: a record larger than the log's bound is left out", "file", w.base,
		"response_id", id, "at", at, "bytes", n, "bound", w.opts.Bytes)
	return false
}

// rotateLocked renames the current file NAME.N.jsonl, leaving NAME.jsonl
// to be begun by the next write, and removes the oldest files past the
// bound on their number.
func (w *Writer) rotateLocked() {
	w.flushLocked() // what is buffered is this file's
	if w.stopped || w.out == nil {
		return // no file to rotate: the next write begins one
	}
	if err := w.closer.Close(); err != nil && w.err == nil {
		w.err = err
	}
	w.out, w.closer = nil, nil
	name := partName(w.base, w.part)
	if err := os.Rename(w.base, name); err != nil {
		// Writing on would take the log past its bounds; beginning a new
		// file would truncate this one.
		w.stopLocked(fmt.Errorf("record: rotating: %w", err))
		return
	}
	w.rotated = append(w.rotated, rotatedFile{name, w.size})
	w.rotBytes += w.size
	w.part++
	w.header = appendHeader(w.header[:0], w.started, w.part)
	w.written, w.size = int64(len(w.header)), int64(len(w.header))
	for len(w.rotated)+1 > w.opts.Files {
		w.removeOldestLocked()
	}
	w.log.Debug("traffic log: rotated", "file", name)
}

// removeOldestLocked removes the oldest rotated file.
func (w *Writer) removeOldestLocked() {
	old := w.rotated[0]
	w.rotated = w.rotated[1:]
	w.rotBytes -= old.size
	if err := os.Remove(old.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Out of the count all the same: what can't be removed is not
		// retried at every line.
		w.log.Warn("traffic log: an old file could not be removed", "file", old.name, "err", err)
	}
}

// openLocked opens Create's current file and writes its header. A file
// whose header could not be written is removed: every file of a log
// begins with one.
func (w *Writer) openLocked(flag int) error {
	f, err := w.open(w.base, flag)
	if err != nil {
		return err
	}
	if _, err := f.Write(w.header); err != nil {
		f.Close()
		os.Remove(w.base)
		return err
	}
	w.out, w.closer = f, f
	w.written = int64(len(w.header))
	return nil
}
