package record_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tether-run/tether/runtime/record"
)

// disk is the free space of a file system, set by the test: a write
// larger writes what fits and fails with ENOSPC, as on a full disk.
type disk struct{ free int64 }

func (d *disk) write(w io.Writer, name string, p []byte) (int, error) {
	n, err := w.Write(p[:min(int64(len(p)), d.free)])
	d.free -= int64(n)
	if err == nil && n < len(p) {
		err = &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return n, err
}

// diskFile is a file on the disk that cannot be cut back (Truncate).
type diskFile struct {
	f *os.File
	d *disk
}

func (f *diskFile) Write(p []byte) (int, error) { return f.d.write(f.f, f.f.Name(), p) }
func (f *diskFile) Close() error                { return f.f.Close() }

// truncFile is a diskFile that can.
type truncFile struct{ *diskFile }

func (f truncFile) Truncate(n int64) error { return f.f.Truncate(n) }

// TestWriteFailsMidLine: a disk that fills inside a line, with records
// rotated out before it. A file is never left to end inside a line that a
// later one joins: it is cut back to its last whole line, or, where it
// cannot be, rotated out as it is. The failure is logged once, with what
// it lost, however many records are dropped while the disk stays full;
// writing goes on when it has room, and says so with all the run lost; a
// second run of failures is logged again. The set, read back, holds every
// record written whole, in order: all those before the cut, all those
// after the disk had room; and where a file was left cut, the reader says
// where.
func TestWriteFailsMidLine(t *testing.T) {
	t.Parallel()
	for _, truncates := range []bool{true, false} {
		name := map[bool]string{true: "cut back", false: "left cut"}[truncates]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d := &disk{free: math.MaxInt64}
			var logs bytes.Buffer
			o := record.Options{FileBytes: 2000, Files: 100, Bytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			w, err := record.CreateWith(dir, &o, func(name string, flag int) (io.WriteCloser, error) {
				f, err := os.OpenFile(name, flag, 0o644)
				if err != nil {
					return nil, err
				}
				if truncates {
					return truncFile{&diskFile{f, d}}, nil
				}
				return &diskFile{f, d}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Lines of about 330 bytes: five to a file.
			write := func(from, to int) error {
				for k := from; k <= to; k++ {
					appendRecord(w, k, 200)
				}
				return w.Flush()
			}
			if err := write(0, 11); err != nil {
				t.Fatal(err)
			}
			// 150 bytes left: room for a file's header, if one begins,
			// and for part of record 12, not all.
			d.free = 150
			if err := write(12, 14); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("a write to a full disk: %v", err)
			}
			if err := write(15, 17); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("a write to a full disk: %v", err)
			}
			if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "a write failed") ||
				!strings.Contains(logs.String(), "lost=3") || !strings.Contains(logs.String(), "no space left on device") {
				t.Fatalf("%d error lines for one run of failures, want 1 with what the write lost (3 records):\n%s", n, logs.String())
			}
			d.free = math.MaxInt64
			if err := write(18, 29); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), `level=WARN msg="traffic log: writing again"`) || !strings.Contains(logs.String(), "lost=6") {
				t.Errorf("no line for writing again, with the 6 records lost:\n%s", logs.String())
			}
			// A second run: logged again.
			d.free = 0
			if err := write(30, 31); err == nil {
				t.Fatal("a write to a full disk: no error")
			}
			if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
				t.Errorf("%d error lines for two runs of failures, want 2:\n%s", n, logs.String())
			}
			if err := w.Close(); err == nil || !strings.Contains(err.Error(), "8 records lost") || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("Close: %v", err)
			}
			if w.Lost() != 8 || w.Lines() != 24 {
				t.Errorf("lost %d, lines %d: want 8 and 24", w.Lost(), w.Lines())
			}

			// Where a file could not be cut back, it was rotated out as it
			// is: its last line incomplete, and the reader says which.
			var cutFile string
			if !truncates {
				files, err := record.Files(w.Name())
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					if b, _ := os.ReadFile(f); len(b) > 0 && b[len(b)-1] != '\n' {
						cutFile = f
					}
				}
			}
			checkFiles(t, dir, o, cutFile)
			ks, _, cuts := readLog(t, w.Name())
			if want := slices.Concat(span(0, 11), span(18, 29)); !slices.Equal(ks, want) {
				t.Errorf("the log holds records %v\nwant %v", ks, want)
			}
			switch {
			case truncates && len(cuts) != 0:
				t.Errorf("cuts %v in files cut back", cuts)
			case !truncates && (len(cuts) != 1 || cuts[0].File != cutFile || cutFile == w.Name()):
				t.Errorf("cuts %v, want one, in %s (rotated out)", cuts, cutFile)
			case !truncates:
				b, _ := os.ReadFile(cutFile)
				if whole := strings.Count(string(b), "\n"); cuts[0].Line != whole+1 {
					t.Errorf("cut in line %d of %s, which has %d whole", cuts[0].Line, filepath.Base(cutFile), whole)
				}
			}
		})
	}
}

// TestStreamCutMidLine: a stream (New's) that fails inside a line cannot
// be mended, and a next line would join the cut one: recording stops
// there, and the stream reads back as what was written whole, its cut
// noted.
func TestStreamCutMidLine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	d := &disk{free: math.MaxInt64}
	w := record.New(writerFunc(func(p []byte) (int, error) { return d.write(&out, "stream", p) }))
	for k := range 5 {
		appendRecord(w, k, 200)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	d.free = 100
	for k := 5; k < 8; k++ {
		appendRecord(w, k, 200)
	}
	w.Flush()
	cut := out.Len()
	d.free = math.MaxInt64
	for k := 8; k < 10; k++ {
		appendRecord(w, k, 200)
	}
	if err := w.Close(); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "5 records lost") {
		t.Errorf("Close: %v", err)
	}
	if out.Len() != cut {
		t.Errorf("%d bytes written after the cut", out.Len()-cut)
	}
	rd, err := record.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := rd.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 || len(rd.Cuts()) != 1 || rd.Cuts()[0].String() != "line 7" {
		t.Errorf("read %d records, cuts %v: want 5, and a cut in line 7", n, rd.Cuts())
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
