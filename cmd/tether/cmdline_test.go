package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestParseSize: a byte size is a whole number, or one with an IEC unit
// (powers of 1024) or an SI one (powers of 1000); anything else is refused.
func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1048576", 1 << 20}, {"512B", 512}, {"32MiB", 32 << 20}, {"1KiB", 1024}, {"2GiB", 2 << 30}, {"1TiB", 1 << 40},
		{"1500KB", 1_500_000}, {"32MB", 32_000_000}, {"2GB", 2_000_000_000}, {"1TB", 1e12}, {"-1MiB", -1 << 20},
	} {
		if got, err := parseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MiB", "32 MiB", "32mib", "32M", "32Mi", "1.5GiB", "32XB", "0x20", "9999999TiB", "9223372036854775808"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("%q: %d, want an error", bad, got)
		}
	}
}

// TestServeByteSizeFlags: serve's byte-size flags take a unit on the real
// command line (--max-frame 1KiB is 1024 bytes: a larger body is refused
// with that limit), and a bad size is an exit 2 that says what a good one
// looks like.
func TestServeByteSizeFlags(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--store-bytes", "--tenant-store-bytes", "--conn-bytes", "--cache-bytes", "--max-frame", "--store-record-bytes", "--mcp-max-output"} {
		var stderr strings.Builder
		code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", flag, "32 MiB"}, io.Discard, &stderr)
		if want := flag + ` "32 MiB": want bytes, a whole number or one with a unit, such as 32MiB`; code != 2 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%s \"32 MiB\": exit %d, stderr %q; want 2 and %q", flag, code, stderr.String(), want)
		}
	}

	base, stop := serveInProcess(t, "--store-bytes", "32MiB", "--conn-bytes", "1MB", "--max-frame", "1KiB")
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Post(base+"/v1/responses", "application/json",
		strings.NewReader(`{"model":"tether-scripted","input":"`+strings.Repeat("x", 1100)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "1024-byte limit") {
		t.Errorf("a 1.1 KB body with --max-frame 1KiB: %d %s; want 413 naming the 1024-byte limit", resp.StatusCode, body)
	}
	client.CloseIdleConnections()
	stop()
}

// TestUnknownFlagNearest: a flag no command has is refused, naming the
// command's flag within two edits of it, when there is one.
func TestUnknownFlagNearest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ablate", "--quik"}, "no such flag: -quik; did you mean --quick?"},
		{[]string{"run", "--agent", "2"}, "no such flag: -agent; did you mean --agents?"},
		{[]string{"serve", "--zzzzzzz"}, "no such flag: -zzzzzzz\n"},
	} {
		var out, errOut strings.Builder
		if code := run(t.Context(), tc.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d: %s", tc.args, code, errOut.String())
		}
	}
}
