package record_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime/record"
)

// at is the time of record k.
func at(k int) time.Time {
	return time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Millisecond)
}

// appendRecord records record k, of response resp_K: an append of a
// message of size bytes.
func appendRecord(w *record.Writer, k, size int) {
	w.Appended(at(k), fmt.Sprintf("resp_%04d", k), protocol.Items{protocol.UserMessage(strings.Repeat("x", size))})
}

// readLog reads the log whose current file is name as record.Files lists
// it: the number of each record, in order, the first file's header and
// the cuts.
func readLog(t *testing.T, name string) (ks []int, h record.Header, cuts []record.Cut) {
	t.Helper()
	files, err := record.Files(name)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := record.OpenFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for {
		l, err := rd.Next()
		if err == io.EOF {
			return ks, rd.Header, rd.Cuts()
		}
		if err != nil {
			t.Fatal(err)
		}
		var k int
		if _, err := fmt.Sscanf(l.ResponseID, "resp_%d", &k); err != nil {
			t.Fatalf("%s: response %q", l.Where(), l.ResponseID)
		}
		ks = append(ks, k)
	}
}

// span is the numbers from to to, both in.
func span(from, to int) []int {
	var s []int
	for k := from; k <= to; k++ {
		s = append(s, k)
	}
	return s
}

// checkFiles checks the files in dir against the bounds in o: no more of
// them than Files, no more bytes than Bytes, each no larger than
// FileBytes unless it holds one record; each begins with a header of its
// part, the parts one after the other, and is whole lines (but the file
// cut may end inside one).
func checkFiles(t *testing.T, dir string, o record.Options, cut string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the log's directory holds %d files (%v)", len(entries), err)
	}
	files, err := record.Files(filepath.Join(dir, entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(entries) || len(files) > o.Files {
		t.Fatalf("%d files in the log's set, %d in its directory: want the same, at most %d", len(files), len(entries), o.Files)
	}
	var total int64
	part := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
		lines := strings.SplitAfter(string(b), "\n")
		if f != cut && lines[len(lines)-1] != "" {
			t.Errorf("%s ends inside a line: %.40q", f, lines[len(lines)-1])
		}
		if records := len(lines) - 2; int64(len(b)) > o.FileBytes && records > 1 {
			t.Errorf("%s: %d bytes in %d records: past FileBytes %d", f, len(b), records, o.FileBytes)
		}
		h, err := record.NewReader(strings.NewReader(lines[0]))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if part != 0 && h.Header.Part != part+1 {
			t.Errorf("%s: part %d after part %d", f, h.Header.Part, part)
		}
		part = h.Header.Part
	}
	if total > o.Bytes {
		t.Errorf("the log holds %d bytes: past Bytes %d", total, o.Bytes)
	}
}

// TestRotation: a log rotates a file before the line that would take it
// past its size, so that every file is whole lines, however large a line;
// keeps at most its count of files and its bytes, by removing the oldest
// (a line too large for the whole log is left out, and said so); and
// reads back, file after file, as the records it still holds, in order.
// Checked after every record.
func TestRotation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  record.Options
		sizes func(k int) int // record k's message size
		n     int             // records written
		want  []int           // the records the log holds at the end
		lost  int
	}{
		// Lines of about 300 bytes: three to a file of 1,000.
		{"size", record.Options{FileBytes: 1000, Files: 100, Bytes: 100_000}, func(int) int { return 150 }, 40, span(0, 39), 0},
		{"files", record.Options{FileBytes: 1000, Files: 3, Bytes: 100_000}, func(int) int { return 150 }, 40, span(33, 39), 0},
		{"bytes", record.Options{FileBytes: 1000, Files: 100, Bytes: 2500}, func(int) int { return 150 }, 40, span(33, 39), 0},
		// Records 5 and 9 are three times the file size: files of their own.
		{"large line", record.Options{FileBytes: 1000, Files: 100, Bytes: 100_000}, func(k int) int { return map[bool]int{true: 3000, false: 150}[k == 5 || k == 9] }, 12, span(0, 11), 0},
		// Record 5 is larger than the whole log: left out, and its
		// neighbours take the room.
		{"larger than the log", record.Options{FileBytes: 1000, Files: 100, Bytes: 3000}, func(k int) int { return map[bool]int{true: 4000, false: 150}[k == 5] }, 12, slices.Concat(span(3, 4), span(6, 11)), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var logs bytes.Buffer
			o := tc.opts
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			w, err := record.Create(dir, &o)
			if err != nil {
				t.Fatal(err)
			}
			for k := range tc.n {
				appendRecord(w, k, tc.sizes(k))
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				checkFiles(t, dir, o, "")
			}
			if err := w.Close(); (err != nil) != (tc.lost > 0) {
				t.Errorf("Close: %v", err)
			}
			ks, h, cuts := readLog(t, w.Name())
			if !slices.Equal(ks, tc.want) || len(cuts) != 0 {
				t.Errorf("the log holds records %v (cuts %v)\nwant %v", ks, cuts, tc.want)
			}
			if tc.want[0] == 0 && h.Part != 1 {
				t.Errorf("the first file is part %d, with the first record", h.Part)
			}
			if w.Lost() != tc.lost || strings.Count(logs.String(), "larger than the log's bound") != tc.lost {
				t.Errorf("%d lost; logged:\n%s", w.Lost(), logs.String())
			}
		})
	}
}

// TestFiles: the files of a log are its parts, by number, then the file
// being written, found from the name of any of them; other files beside
// them are not.
func TestFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"log.jsonl", "log.2.jsonl", "log.10.jsonl", "log.1.jsonl",
		"log.jsonl.bak", "log.x.jsonl", "log.0.jsonl", "log.-1.jsonl", "other.3.jsonl", "logs.2.jsonl", "only.4.jsonl", "plain.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set := func(names ...string) []string {
		for i, n := range names {
			names[i] = filepath.Join(dir, n)
		}
		return names
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"log.jsonl", set("log.1.jsonl", "log.2.jsonl", "log.10.jsonl", "log.jsonl")},
		{"log.10.jsonl", set("log.1.jsonl", "log.2.jsonl", "log.10.jsonl", "log.jsonl")},
		{"only.4.jsonl", set("only.4.jsonl")}, // its current file is gone: being rotated, or the log stopped
		{"log.x.jsonl", set("log.x.jsonl")},
		{"plain.txt", set("plain.txt")},
	} {
		got, err := record.Files(filepath.Join(dir, tc.name))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Files(%s) = %v, %v\nwant %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := record.Files(filepath.Join(dir, "none.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Files of no file: %v", err)
	}
}
