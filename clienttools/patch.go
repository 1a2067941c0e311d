package clienttools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// fileOp is one file section of a patch.
type fileOp struct {
	kind  byte // 'M' update, 'A' add, 'D' delete
	path  string
	lines []string // Add: the file's lines
	hunks []hunk   // Update
}

// hunk is one @@ section: its lines with their ' ', '-' or '+' prefix.
type hunk []string

// parsePatch parses a patch in the Codex format.
func parsePatch(text string) ([]fileOp, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "*** Begin Patch" {
		return nil, errors.New("apply_patch: the patch must start with *** Begin Patch")
	}
	var ops []fileOp
	ended := false
	for _, l := range lines[1:] {
		if ended {
			if strings.TrimSpace(l) != "" {
				return nil, errors.New("apply_patch: text after *** End Patch")
			}
			continue
		}
		switch {
		case strings.TrimSpace(l) == "*** End Patch":
			ended = true
		case strings.HasPrefix(l, "*** Update File: "):
			ops = append(ops, fileOp{kind: 'M', path: strings.TrimSpace(strings.TrimPrefix(l, "*** Update File: "))})
		case strings.HasPrefix(l, "*** Add File: "):
			ops = append(ops, fileOp{kind: 'A', path: strings.TrimSpace(strings.TrimPrefix(l, "*** Add File: "))})
		case strings.HasPrefix(l, "*** Delete File: "):
			ops = append(ops, fileOp{kind: 'D', path: strings.TrimSpace(strings.TrimPrefix(l, "*** Delete File: "))})
		case strings.HasPrefix(l, "*** Move to: "):
			return nil, errors.New("apply_patch: *** Move to is not supported")
		case strings.TrimSpace(l) == "*** End of File":
		case len(ops) == 0:
			return nil, fmt.Errorf("apply_patch: %q before any file section", l)
		default:
			op := &ops[len(ops)-1]
			switch op.kind {
			case 'A':
				if !strings.HasPrefix(l, "+") {
					return nil, fmt.Errorf("apply_patch: add %s: line %q does not start with +", op.path, l)
				}
				op.lines = append(op.lines, l[1:])
			case 'D':
				return nil, fmt.Errorf("apply_patch: delete %s: unexpected line %q", op.path, l)
			case 'M':
				if strings.HasPrefix(l, "@@") {
					op.hunks = append(op.hunks, nil)
					continue
				}
				if l == "" {
					l = " "
				}
				if l[0] != ' ' && l[0] != '-' && l[0] != '+' {
					return nil, fmt.Errorf("apply_patch: update %s: line %q does not start with ' ', - or +", op.path, l)
				}
				if len(op.hunks) == 0 {
					op.hunks = append(op.hunks, nil)
				}
				op.hunks[len(op.hunks)-1] = append(op.hunks[len(op.hunks)-1], l)
			}
		}
	}
	if !ended {
		return nil, errors.New("apply_patch: the patch must end with *** End Patch")
	}
	if len(ops) == 0 {
		return nil, errors.New("apply_patch: the patch changes no file")
	}
	return ops, nil
}

// find is the index of needle in hay at or after from, or -1.
func find(hay, needle []string, from int, eq func(a, b string) bool) int {
	for i := from; i+len(needle) <= len(hay); i++ {
		ok := true
		for j := range needle {
			if !eq(hay[i+j], needle[j]) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// applyPatch applies a Codex patch in Dir. Every file is checked before any
// is written. The output lists the files (M, A, D) and, for each hunk, the
// changed region with 3 lines either side, numbered, as it reads after the
// patch.
func (t *Tools) applyPatch(text string) (string, error) {
	ops, err := parsePatch(text)
	if err != nil {
		return "", err
	}
	type write struct {
		full string
		data *string // nil: delete
	}
	var writes []write
	var out, regions strings.Builder
	out.WriteString("Success. Updated the following files:\n")
	for _, op := range ops {
		full, err := t.resolve(op.path)
		if err != nil {
			return "", fmt.Errorf("apply_patch: %w", err)
		}
		fmt.Fprintf(&out, "%c %s\n", op.kind, op.path)
		switch op.kind {
		case 'D':
			if _, err := os.Stat(full); err != nil {
				return "", fmt.Errorf("apply_patch: %w", err)
			}
			writes = append(writes, write{full: full})
		case 'A':
			s := strings.Join(op.lines, "\n") + "\n"
			writes = append(writes, write{full: full, data: &s})
		case 'M':
			data, err := os.ReadFile(full)
			if err != nil {
				return "", fmt.Errorf("apply_patch: %w", err)
			}
			lines := strings.Split(string(data), "\n")
			cursor := 0
			for k, h := range op.hunks {
				var old, new []string
				lead, trail := -1, 0
				for i, l := range h {
					if l[0] != ' ' {
						if lead < 0 {
							lead = i
						}
						trail = len(h) - 1 - i
					}
					if l[0] != '+' {
						old = append(old, l[1:])
					}
					if l[0] != '-' {
						new = append(new, l[1:])
					}
				}
				if lead < 0 {
					continue // context only: nothing to change
				}
				at := find(lines, old, cursor, func(a, b string) bool { return a == b })
				if at < 0 {
					at = find(lines, old, cursor, func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") })
				}
				if at < 0 && cursor > 0 {
					at = find(lines, old, 0, func(a, b string) bool { return a == b })
				}
				if at < 0 {
					return "", fmt.Errorf("apply_patch: %s: hunk %d does not match the file", op.path, k+1)
				}
				lines = append(lines[:at:at], append(append([]string(nil), new...), lines[at+len(old):]...)...)
				cursor = at + len(new)
				first := at + lead + 1
				last := at + len(new) - trail
				lo, hi := max(1, first-3), min(len(lines), last+3)
				fmt.Fprintf(&regions, "\n%s, lines %d-%d after the patch:\n", op.path, lo, hi)
				for n := lo; n <= hi; n++ {
					fmt.Fprintf(&regions, "%4d\t%s\n", n, lines[n-1])
				}
			}
			s := strings.Join(lines, "\n")
			writes = append(writes, write{full: full, data: &s})
		}
	}
	for _, w := range writes {
		if w.data == nil {
			err = os.Remove(w.full)
		} else {
			if err = os.MkdirAll(filepath.Dir(w.full), 0o755); err == nil {
				err = os.WriteFile(w.full, []byte(*w.data), 0o644)
			}
		}
		if err != nil {
			return "", fmt.Errorf("apply_patch: %w", err)
		}
	}
	return out.String() + regions.String(), nil
}
