package record

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A log's set of files, rather than lumberjack (gopkg.in/natefinch/
// lumberjack.v2), which rotates files by size too: it refuses a write
// larger than a file outright (a large request's line would be lost), it
// can put no header at the top of a new file (a rotated file would not be
// a log on its own), it bounds the number of files but not their bytes,
// it removes old files on a goroutine of its own that Close does not end,
// after the write that rotated has returned, and it names rotated files by
// the millisecond, so two rotations within one reuse a name.

// partName is the name of part n of the log whose current file is base:
// NAME.jsonl's parts are NAME.n.jsonl.
func partName(base string, n int) string {
	return strings.TrimSuffix(base, ".jsonl") + "." + strconv.Itoa(n) + ".jsonl"
}

// setOf is the current file of the log that name is a file of (name
// itself, or the NAME.jsonl of a NAME.N.jsonl), and the part name is (0
// for the current file).
func setOf(name string) (base string, part int) {
	stem, ok := strings.CutSuffix(name, ".jsonl")
	if !ok {
		return name, 0
	}
	i := strings.LastIndexByte(stem, '.')
	if i < 0 || strings.ContainsRune(stem[i:], filepath.Separator) {
		return name, 0
	}
	digits := stem[i+1:]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return name, 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return name, 0
	}
	return stem[:i] + ".jsonl", n
}

// Current is the name of the file being written of the log that name is a
// file of: NAME.jsonl for a part NAME.N.jsonl, else name itself. It names
// the log, whether or not the file is there.
func Current(name string) string {
	base, _ := setOf(name)
	return base
}

// Files lists the files of the log that name is one of, in the order they
// were written: the files rotated out of it (NAME.N.jsonl), oldest first,
// then the one being written (NAME.jsonl). name may be any of them; a
// file named otherwise (not .jsonl) is a log of one file. Files that are
// missing are left out (the writer may be rotating); none at all is an
// error.
func Files(name string) ([]string, error) {
	base, _ := setOf(name)
	if base == name && !strings.HasSuffix(name, ".jsonl") {
		if _, err := os.Stat(name); err != nil {
			return nil, err
		}
		return []string{name}, nil
	}
	dir := filepath.Dir(base)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type part struct {
		n    int
		name string
	}
	var parts []part
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if b, n := setOf(p); n > 0 && b == base && !e.IsDir() {
			parts = append(parts, part{n, p})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return a.n - b.n })
	var files []string
	for _, p := range parts {
		files = append(files, p.name)
	}
	if fi, err := os.Stat(base); err == nil && !fi.IsDir() {
		files = append(files, base)
	}
	if len(files) == 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return files, nil
}
