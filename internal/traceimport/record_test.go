package traceimport

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/sampler"
)

// TestRecord reads a hand-made traffic log, written as a proxy could write
// it (spaces, items without ids, input as a string): a stateless client
// that sends the conversation back each time, a suspended rollout with
// parallel calls (a function and a custom tool), a hosted call and a
// steering message, a turn continuing it by previous_response_id, a
// response that failed, and the events of one whose request is not there.
func TestRecord(t *testing.T) {
	f, err := os.Open("testdata/record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	traces, rep, err := Record(f, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(traces); strings.Join(got, " ") != "rec-1 rec-2-1 rec-2-2" {
		t.Fatalf("traces %v, want rec-1 rec-2-1 rec-2-2", got)
	}
	// The stateless session: its second request carries the first's call
	// back; what follows it (the output) is what it adds.
	tr := traces[0]
	if tr.Task != "Fix the failing test in calc." || !strings.Contains(tr.Source, "session 1 (resp_a1) turn 1") || len(tr.Steps) != 2 {
		t.Fatalf("stateless: %+v", tr)
	}
	s0, s1 := tr.Steps[0], tr.Steps[1]
	if len(s0.Calls) != 1 || s0.ModelMS != 400 || s0.ReasoningTokens != 25 {
		t.Errorf("stateless step 0: %+v", s0)
	}
	// Timed from the response's end (10:00:01.500), when the client had
	// the call, to the request that answered it.
	if c := s0.Calls[0]; c.Name != "read_file" || c.Arguments != `{"path":"calc.go"}` || !strings.HasPrefix(c.Output, "package calc") || c.DurationMS != 300 {
		t.Errorf("stateless call: %+v", c)
	}
	if s1.Text != "Add subtracts: it should return a + b." || s1.ModelMS != 500 || len(s1.Calls) != 0 {
		t.Errorf("stateless step 1: %+v", s1)
	}

	// The suspended rollout: two calls in a step, each timed from the
	// pause to the append that answered it; the step after the last.
	tr = traces[1]
	if tr.Task != "List the repo and search the docs." || len(tr.Steps) != 2 {
		t.Fatalf("suspended: %+v", tr)
	}
	s0, s1 = tr.Steps[0], tr.Steps[1]
	if len(s0.Calls) != 2 || s0.ModelMS != 700 || s0.ReasoningTokens != 10 {
		t.Errorf("suspended step 0: %+v", s0)
	}
	if c := s0.Calls[0]; c.Name != "list_dir" || c.Output != "calc.go\ncalc_test.go\n" || c.DurationMS != 300 {
		t.Errorf("suspended call 0 (output of parts): %+v", c)
	}
	if c := s0.Calls[1]; c.Type != sampler.CustomCall || c.Name != "apply_patch" || c.Arguments != "*** Begin Patch\n*** End Patch" || c.Output != "Done!" || c.DurationMS != 500 {
		t.Errorf("suspended call 1 (custom): %+v", c)
	}
	if s1.Text != "Two files; patched." || s1.ModelMS != 600 || s1.ReasoningTokens != 4 {
		t.Errorf("suspended step 1: %+v", s1)
	}
	if len(traces[0].History)+len(traces[1].History) != 0 {
		t.Errorf("first turns with a history: %v, %v", traces[0].History, traces[1].History)
	}
	// The turn after it: the session so far is its history (the steering
	// message included, where it came), and the user thought 3.1 s.
	tr = traces[2]
	if tr.Task != "Thanks!" || len(tr.Steps) != 1 || tr.Steps[0].Text != "You are welcome." || tr.ThinkMS != 3100 {
		t.Errorf("the turn after it: %+v", tr)
	}
	var history []string
	for _, it := range tr.History {
		history = append(history, string(it.ItemType()))
	}
	if got := strings.Join(history, " "); got != "message function_call custom_tool_call function_call_output message custom_tool_call_output message" {
		t.Errorf("its history: %s", got)
	}

	want := map[string]int{
		"item/web_search_call":                                 1,
		"message (user, mid-turn)":                             1,
		"event (of a response without its request in the log)": 1,
	}
	if !maps.Equal(rep.Skipped, want) {
		t.Errorf("skipped %v\nwant    %v", rep.Skipped, want)
	}
	if rep.Lines != 24 || rep.Sessions != 3 || rep.Turns != 4 || len(rep.Dropped) != 1 || rep.Dropped[0] != "session 3 turn 1: no model output" {
		t.Errorf("lines %d, sessions %d, turns %d, dropped %q", rep.Lines, rep.Sessions, rep.Turns, rep.Dropped)
	}
	for _, tr := range traces {
		if _, err := tr.Encode(); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
	}
}

// TestRecordBadInput: a line of garbage, a log of another
// version, a file of another format, a line of no kind or of two: each an
// error naming the line.
func TestRecordBadInput(t *testing.T) {
	good, err := os.ReadFile("testdata/record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	for _, tc := range []struct{ name, log, want string }{
		{"garbage", strings.Join(lines[:3], "") + "<html>oops</html>\n" + strings.Join(lines[3:], ""), "line 4: not JSON"},
		{"version", `{"tether_record": 2, "started": "2027-01-01T00:00:00Z"}` + "\n" + strings.Join(lines[1:], ""), "line 1: a traffic log of version 2: this tether reads version 1"},
		{"codex", `{"timestamp":"2026-02-23T12:40:23.000Z","type":"session_meta","payload":{"id":"x"}}` + "\n", "line 1: not a tether traffic log"},
		{"empty", "\n\n", "empty: no tether_record header"},
		{"no kind", lines[0] + `{"at": "2026-12-03T10:00:01Z", "response_id": "resp_x"}` + "\n", "line 2: holds 0 of request, event and append: want one"},
		{"two kinds", lines[0] + `{"at": "2026-12-03T10:00:01Z", "response_id": "resp_x", "event": {}, "append": []}` + "\n", "line 2: holds 2 of"},
		{"no id", lines[0] + `{"at": "2026-12-03T10:00:01Z", "append": []}` + "\n", "line 2: no response_id"},
		{"bad request", lines[0] + `{"at": "2026-12-03T10:00:01Z", "response_id": "resp_x", "request": {"input": 7}}` + "\n", "line 2: request: "},
		{"twice", strings.Join(lines[:3], "") + lines[1], "line 4: a second request for resp_a1"},
	} {
		_, _, err := Record(strings.NewReader(tc.log), "rec")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRecordSet: the hand-made log rotated into three files, each with its
// header, reads as the one file: the same traces, from sessions that span
// the files. A file that ends inside a line, which its writer did not
// finish, is read up to its last whole line, the cut is reported, and the
// next file is read on: here the first file ends inside a line the writer
// lost (a copy of one the log holds later), and the last inside the log's
// last line, whose event, of a response without its request, is the
// one thing missing from the report.
func TestRecordSet(t *testing.T) {
	good, err := os.ReadFile("testdata/record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	header := func(part string) string {
		return `{"tether_record": 1, "started": "2026-12-03T10:00:00Z", "part": ` + part + "}\n"
	}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"rec.2.jsonl": header("2") + strings.Join(lines[1:9], "") + lines[23][:60],
		"rec.3.jsonl": header("3") + strings.Join(lines[9:18], ""),
		"rec.jsonl":   header("4") + strings.Join(lines[18:23], "") + lines[23][:100],
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := record.Files(filepath.Join(dir, "rec.3.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := record.OpenFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	traces, rep, err := RecordLog(rd, "rec")
	if err != nil {
		t.Fatal(err)
	}
	whole, wholeRep, err := Record(strings.NewReader(string(good)), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != len(whole) {
		t.Fatalf("%d traces from the set, %d from the file", len(traces), len(whole))
	}
	for i := range traces {
		got, _ := traces[i].Encode()
		want, _ := whole[i].Encode()
		if string(got) != string(want) {
			t.Errorf("trace %d from the set:\n%s\nfrom the file:\n%s", i, got, want)
		}
	}
	want := []record.Cut{{File: files[0], Line: 10}, {File: files[2], Line: 7}}
	if !slices.Equal(rep.Cuts, want) {
		t.Errorf("cuts %v, want %v", rep.Cuts, want)
	}
	delete(wholeRep.Skipped, "event (of a response without its request in the log)")
	if !maps.Equal(rep.Skipped, wholeRep.Skipped) || rep.Lines != 25 || rep.FirstPart != 2 || rep.Turns != wholeRep.Turns {
		t.Errorf("report %+v\nwant as the file's, %d lines, first part 2 (the file's: %+v)", rep, 25, wholeRep)
	}
}

// TestRecordCut: a log that ends inside a line imports what came before
// it (here a turn without its end: no trace), and says where it ends.
func TestRecordCut(t *testing.T) {
	good, err := os.ReadFile("testdata/record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	traces, rep, err := Record(strings.NewReader(strings.Join(lines[:5], "")+lines[5][:40]), "rec")
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 0 || len(rep.Cuts) != 1 || rep.Cuts[0].String() != "line 6" || rep.Lines != 5 || rep.Turns != 1 {
		t.Errorf("%d traces, report %+v: want none, 5 lines, 1 turn, cut in line 6", len(traces), rep)
	}
}
