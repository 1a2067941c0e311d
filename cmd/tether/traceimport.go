package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/internal/traceimport"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// traceImport runs "tether trace import": Codex CLI rollout files become
// replay traces, written all or none.
func traceImport(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("trace import", `Usage: tether trace import [flags] FILE|DIR...

Imports agent sessions as replay traces: Codex CLI rollout files (the JSON
Lines each session writes under $CODEX_HOME/sessions) and traffic logs (as
tether serve --record writes them; docs/models.md); a directory is searched
for rollout-*.jsonl and tether-record-*.jsonl. A traffic log is read whole
from any of its files: the files rotated out of it (NAME.N.jsonl), oldest
first, then NAME.jsonl; each log once, however many of its files are
named. Each user turn that ends in a final answer becomes a trace: the
model's steps with their reasoning tokens, each tool call with its
arguments (a custom tool's input), output and duration from the session's
timestamps. What a replay cannot make (hosted web searches, local_shell
calls, images, compactions) is listed by type; turns that end without an
answer are listed with why. The traces are written to --out as NAME.jsonl
(serve --traces DIR serves them as replay:NAME; ablate --workload
trace:NAME --traces DIR replays them); nothing is written when any input
fails to import. A traffic log's file that ends inside a line (its server
stopped, or a write failed, mid-line) is imported up to its last whole
line, and the next file read on; stderr says where it was cut, and the
exit status is 0 all the same.`, "tether trace import --out traces ~/.codex/sessions/2026/12/03\ntether trace import --out traces /var/log/tether/tether-record-20261203T100000Z-1234.jsonl\ntether trace import --redact --name fix rollout-2026-12-03T10-00-00-019c….jsonl", -1)
	out := fs.String("out", ".", "directory the traces are written to")
	name := fs.String("name", "", "the trace's name, with one file (default: codex- and the session id's last 8 digits; record- and a traffic log's time and process); a session of several turns gives NAME-1, NAME-2, …, a log of several sessions NAME-K or NAME-K-N")
	redact := fs.Bool("redact", false, "replace every text (task, messages, arguments, outputs) with filler words of the same size and tool names with hashes, keeping timings and token counts: a session to share without its code")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.fail(stderr, "give a rollout file or traffic log, or a directory of them")
		return 2
	}
	files, err := rolloutFiles(fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace import:", err)
		return 1
	}
	ins, err := importInputs(files)
	if err != nil {
		fmt.Fprintln(stderr, "tether: trace import:", err)
		return 1
	}
	if *name != "" && len(ins) > 1 {
		fs.fail(stderr, "--name names one file's traces (or one traffic log's); %d given", len(ins))
		return 2
	}
	type imported struct {
		in     importInput
		traces []*sampler.Trace
		rep    *traceimport.Report
	}
	var all []imported
	seen := map[string]string{}
	for _, in := range ins {
		n := *name
		if n == "" {
			n = defaultName(in.name)
		}
		traces, rep, err := in.read(n)
		if err != nil {
			if in.log != nil { // the error names the file
				fmt.Fprintln(stderr, "tether: trace import:", err)
			} else {
				fmt.Fprintf(stderr, "tether: trace import: %s: %v\n", in.name, err)
			}
			return 1
		}
		for _, c := range rep.Cuts {
			fmt.Fprintf(stderr, "tether: trace import: %s ends inside line %d, which its writer did not finish: read up to line %d\n", c.File, c.Line, c.Line-1)
		}
		for _, t := range traces {
			if other, ok := seen[t.Name]; ok {
				fmt.Fprintf(stderr, "tether: trace import: %s and %s both make a trace named %q: import them apart, with --name\n", other, in.name, t.Name)
				return 1
			}
			seen[t.Name] = in.name
			if *redact {
				traceimport.Redact(t)
			}
		}
		all = append(all, imported{in, traces, rep})
	}
	// Everything imported: encode it all, then write it.
	encoded := map[string][]byte{}
	for _, im := range all {
		for _, t := range im.traces {
			b, err := t.Encode()
			if err != nil {
				fmt.Fprintf(stderr, "tether: trace import: %s: trace %s: %v\n", im.in.name, t.Name, err)
				return 1
			}
			encoded[t.Name] = b
		}
	}
	if err := writeTraces(*out, encoded); err != nil {
		fmt.Fprintln(stderr, "tether: trace import:", err)
		return 1
	}
	for _, im := range all {
		printImport(stdout, im.in, im.traces, im.rep, *out)
	}
	return 0
}

// rolloutFiles are the files args name: each file, and the rollout-*.jsonl
// and tether-record-*.jsonl files under each directory, in order.
func rolloutFiles(args []string) ([]string, error) {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasPrefix(d.Name(), "rollout-") || strings.HasPrefix(d.Name(), recordPrefix)) && strings.HasSuffix(d.Name(), ".jsonl") {
				found = append(found, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no rollout-*.jsonl or %s*.jsonl files", a, recordPrefix)
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, nil
}

// recordPrefix begins the name of every traffic log serve --record writes.
const recordPrefix = "tether-record-"

// defaultName is a file's default trace name. A traffic log's is record-
// and what follows the prefix of its name (its time and process); a
// rollout's is codex- and the last 8 digits of the session id that ends its
// name (a UUIDv7's random ones: its first are the time, shared by sessions
// started within a minute).
func defaultName(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), ".jsonl")
	if rest, ok := strings.CutPrefix(base, recordPrefix); ok {
		return "record-" + rest
	}
	if len(base) >= 36 {
		return "codex-" + base[len(base)-8:]
	}
	return "codex-" + base
}

// importInput is what one import reads: a Codex rollout file, or a
// traffic log's files.
type importInput struct {
	name string   // the rollout file, or the traffic log's current file (record.Current)
	log  []string // the traffic log's files, in order (record.Files); nil for a rollout
}

// importInputs sorts files into inputs: each traffic log once, with all
// its files, however many of them files names; each rollout file.
func importInputs(files []string) ([]importInput, error) {
	var ins []importInput
	seen := map[string]bool{}
	for _, f := range files {
		isLog, err := trafficLog(f)
		if err != nil {
			return nil, err
		}
		if !isLog {
			ins = append(ins, importInput{name: f})
			continue
		}
		cur := record.Current(f)
		if seen[cur] {
			continue
		}
		seen[cur] = true
		set, err := record.Files(f)
		if err != nil {
			return nil, err
		}
		ins = append(ins, importInput{name: cur, log: set})
	}
	return ins, nil
}

// trafficLog says whether file is a traffic log: its first line is a
// tether_record header (a rollout's is session_meta).
func trafficLog(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head, _ := bufio.NewReaderSize(f, 4<<10).Peek(4 << 10)
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	return bytes.Contains(head, []byte(`"tether_record"`)), nil
}

// read imports the input, its traces named by name.
func (in importInput) read(name string) ([]*sampler.Trace, *traceimport.Report, error) {
	if in.log != nil {
		rd, err := record.OpenFiles(in.log...)
		if err != nil {
			return nil, nil, err
		}
		defer rd.Close()
		return traceimport.RecordLog(rd, name)
	}
	f, err := os.Open(in.name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return traceimport.Codex(bufio.NewReaderSize(f, 64<<10), name)
}

// writeTraces writes each trace as dir/NAME.jsonl: all to temporary files
// first, then renamed into place, so that a failure to write leaves none
// half written (a rename failing midway, which a full or read-only
// directory would have failed earlier, leaves the renamed ones whole).
func writeTraces(dir string, traces map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := map[string]string{}
	defer func() {
		for _, t := range tmp {
			os.Remove(t)
		}
	}()
	for name, b := range traces {
		f, err := os.CreateTemp(dir, "."+name+"-*.jsonl")
		if err != nil {
			return err
		}
		tmp[name] = f.Name()
		if err = f.Chmod(0o644); err == nil { // as os.WriteFile would make it, not CreateTemp's 0600
			_, err = f.Write(b)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	for name, t := range tmp {
		if err := os.Rename(t, filepath.Join(dir, name+".jsonl")); err != nil {
			return err
		}
		delete(tmp, name)
	}
	return nil
}

// printImport says what an input gave.
func printImport(w io.Writer, in importInput, traces []*sampler.Trace, rep *traceimport.Report, out string) {
	sessions := ""
	if rep.Sessions != 1 {
		sessions = fmt.Sprintf("%d sessions, ", rep.Sessions)
	}
	files := ""
	if len(in.log) > 1 {
		files = fmt.Sprintf(" (%d files)", len(in.log))
	}
	fmt.Fprintf(w, "%s%s: %d lines, %s%d user turns: %d traces\n", in.name, files, rep.Lines, sessions, rep.Turns, len(traces))
	if rep.FirstPart > 1 {
		fmt.Fprintf(w, "  its first %d files were rotated out and removed: what began in them is left out\n", rep.FirstPart-1)
	}
	for _, t := range traces {
		var tools, model time.Duration
		byName := map[string]int{}
		var order []string
		for _, s := range t.Steps {
			model += time.Duration(s.ModelMS) * time.Millisecond
			for _, c := range s.Calls {
				tools += time.Duration(c.DurationMS) * time.Millisecond
				if byName[c.Name] == 0 {
					order = append(order, c.Name)
				}
				byName[c.Name]++
			}
		}
		var calls []string
		for _, n := range order {
			calls = append(calls, fmt.Sprintf("%s %d", n, byName[n]))
		}
		byTool := ""
		if len(calls) > 0 {
			byTool = " (" + strings.Join(calls, ", ") + ")"
		}
		fmt.Fprintf(w, "  %s: %d steps, %d calls%s; recorded model time %s, tool time %s\n    %s\n", t.Name, len(t.Steps), t.Calls(),
			byTool, model.Round(time.Millisecond), tools.Round(time.Millisecond), filepath.Join(out, t.Name+".jsonl"))
	}
	if len(rep.Skipped) > 0 {
		var kinds []string
		for k, n := range rep.Skipped {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(kinds)
		fmt.Fprintf(w, "  not replayable, left out: %s\n", strings.Join(kinds, ", "))
	}
	for _, d := range rep.Dropped {
		fmt.Fprintf(w, "  no trace for %s\n", d)
	}
}
