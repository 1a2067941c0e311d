package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"time"
)

// A write that fails drops the lines that did not reach the file, tells a
// run of failures once, and mends a line it cut; what cannot be mended
// stops recording.

// flushLocked writes what is buffered. On a failure, the lines that did
// not reach the file are dropped (and the run of failures told once), and
// a line cut in the middle is mended: see repairLocked. It returns the
// write's error.
func (w *Writer) flushLocked() error {
	if len(w.buf) == 0 || w.stopped {
		return nil
	}
	if w.out == nil {
		// Create's, after a rotation or a failed open: the next file
		// begins. It was renamed away, so no other log's is truncated.
		if err := w.openLocked(os.O_WRONLY | os.O_CREATE | os.O_TRUNC | os.O_APPEND); err != nil {
			w.dropLocked(len(w.bufAt), err)
			return err
		}
	}
	n, err := w.out.Write(w.buf)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err == nil {
		w.written += int64(n)
		w.resetBufLocked()
		if w.failing != nil {
			w.log.Warn("traffic log: writing again", "file", w.base, "lost", w.runLost, "err", w.failing)
			w.failing, w.runLost = nil, 0
		}
		return nil
	}
	// Every line ends with its newline: those after the last one written
	// did not reach the file whole (the first of them perhaps in part).
	whole := bytes.LastIndexByte(w.buf[:n], '\n') + 1
	lost := bytes.Count(w.buf[whole:], []byte{'\n'})
	headerLost := w.open == nil && w.written+int64(whole) == 0 // New's header went first, and not whole
	if headerLost {
		lost--
	}
	w.written += int64(whole)
	w.dropLocked(lost, err)
	if cut := int64(n - whole); cut > 0 {
		w.repairLocked(cut)
	} else if headerLost {
		w.buf = append(w.buf, w.header...) // it goes first next time
		w.size += int64(len(w.header))
	}
	return err
}

// dropLocked drops what is buffered, the last lost records of it unwritten
// (a write failing with err), and tells a run of failures once, when it
// begins.
func (w *Writer) dropLocked(lost int, err error) {
	var since time.Time
	if lost > 0 {
		since = w.bufAt[len(w.bufAt)-lost]
	}
	w.lost += lost
	w.lines -= lost
	w.runLost += lost
	if w.err == nil {
		w.err = err
	}
	if w.failing == nil {
		w.failing = err
		w.log.Error("traffic log: a write failed: records are left out until one succeeds", "file", w.base,
			"err", err, "lost", lost, "since", since)
	}
	w.resetBufLocked()
	w.size = w.written
}

// repairLocked mends a file that ends cut bytes into a line a write did
// not finish, so that the next line does not join it: Create's file is cut
// back to its last whole line (it is written with O_APPEND, so the next
// write goes on from there), or, if it cannot be, rotated out as it is.
// New's stream cannot be mended: recording stops.
func (w *Writer) repairLocked(cut int64) {
	if w.open == nil {
		w.stopLocked(errors.New("record: the log ends inside a line a write did not finish"))
		return
	}
	t, ok := w.out.(interface{ Truncate(int64) error })
	if ok && t.Truncate(w.written) == nil {
		return
	}
	w.size = w.written + cut
	w.rotateLocked()
}

// stopLocked ends recording for good, telling why.
func (w *Writer) stopLocked(err error) {
	w.stopped = true
	if w.err == nil {
		w.err = err
	}
	w.lost += len(w.bufAt)
	w.lines -= len(w.bufAt)
	w.resetBufLocked()
	w.log.Error("traffic log: recording stops", "file", w.base, "err", err, "lost", w.lost)
}
