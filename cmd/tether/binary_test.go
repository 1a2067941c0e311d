package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binary is tether built once per test run, with its VCS information when
// the source is a git checkout: the command lines are tested as a user
// types them.
var binary struct {
	once sync.Once
	path string
	err  error
}

// tetherBinary is the built tether's path; its directory is for PATH.
func tetherBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "tether-bin-")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "tether")
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = errors.New(string(out))
		}
	})
	if binary.err != nil {
		t.Fatalf("go build: %v", binary.err)
	}
	return binary.path
}

// tether runs the built binary with args and returns its exit code and
// output.
func tether(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return tetherIn(t, "", args...)
}

// tetherIn is tether run in the working directory dir ("": the test's).
func tetherIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// Built first: on a cold machine the race-enabled build alone takes
	// minutes, which a timeout started before it spent (TestServeTraces
	// failed so from a fresh clone). The run then gets what the test
	// binary's deadline leaves, less room to report.
	bin := tetherBinary(t)
	ctx, cancel := t.Context(), context.CancelFunc(func() {})
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("tether %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// TestVersion: tether --version and tether version print the module's
// version, its VCS revision when built from a checkout, and Go's.
func TestVersion(t *testing.T) {
	t.Parallel()
	rev := ""
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))[:12]
	}
	for _, arg := range []string{"--version", "version"} {
		code, out, _ := tether(t, arg)
		if code != 0 || !strings.HasPrefix(out, "tether ") || !strings.Contains(out, " go1.") {
			t.Errorf("%s: exit %d, %q", arg, code, out)
		}
		if rev != "" && !strings.Contains(out, "(rev "+rev) {
			t.Errorf("%s: %q lacks the revision %s", arg, out, rev)
		}
	}
}

// TestHelp: every command's -h and --help print its usage, with every flag
// and an example, on stdout, and exit 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd   []string
		flags []string // some of its flags
	}{
		{[]string{"serve"}, []string{"-addr", "-traces", "-log-format", "-log-level", "-mcp-allow", "-config"}},
		{[]string{"run"}, []string{"-url", "-mode", "-branches", "-mcp"}},
		{[]string{"ablate"}, []string{"-quick", "-modes", "-tps", "-out"}},
		{[]string{"trace", "list"}, []string{"-traces"}},
		{[]string{"trace", "show"}, []string{"-traces"}},
		{[]string{"trace", "record"}, []string{"-url", "-upstream-model", "-workdir", "-out"}},
	} {
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := tether(t, append(tc.cmd, h)...)
			name := strings.Join(tc.cmd, " ")
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: tether "+name) || !strings.Contains(out, "\nFlags:\n") || !strings.Contains(out, "\nExample:\n  tether ") {
				t.Errorf("%s %s: exit %d, stderr %q, stdout:\n%s", name, h, code, errOut, out)
				continue
			}
			for _, f := range tc.flags {
				if !strings.Contains(out, "\n  "+f+" ") && !strings.Contains(out, "\n  "+f+"\n") {
					t.Errorf("%s %s: no flag %s in:\n%s", name, h, f, out)
				}
			}
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"trace", "--help"}} {
		if code, out, _ := tether(t, args...); code != 0 || !strings.Contains(out, "Usage: tether") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

// TestBadCommandLines: a stray argument, an unknown flag and a bad value
// are errors that say what a good one looks like, exit 2.
func TestBadCommandLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra-arg"}, `unexpected argument "extra-arg": tether serve takes flags only`},
		{[]string{"serve", "--addr", "127.0.0.1:0", "extra"}, `unexpected argument "extra"`},
		{[]string{"ablate", "now"}, `unexpected argument "now"`},
		{[]string{"trace", "list", "all"}, `unexpected argument "all"`},
		{[]string{"trace", "show", "a", "b"}, `unexpected argument "b"`},
		{[]string{"trace", "show"}, "give one trace name"},
		{[]string{"serve", "--ttft", "5"}, `--ttft "5": want a duration with its unit, such as 150ms`},
		{[]string{"run", "--ttft", "5"}, `want a duration with its unit`},
		{[]string{"serve", "--max-inflight", "many"}, `--max-inflight "many": want a whole number`},
		{[]string{"run", "--tps", "fast"}, `--tps "fast": want a number`},
		{[]string{"serve", "--pprof=maybe"}, `--pprof "maybe": want true or false`},
		{[]string{"serve", "--adr", "x"}, "no such flag: -adr"},
		{[]string{"serve", "--log-format", "xml"}, `--log-format "xml": want text or json`},
		{[]string{"serve", "--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		code, _, errOut := tether(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
