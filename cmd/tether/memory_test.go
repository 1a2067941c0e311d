package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// fakeMemory is a memoryProbe of a machine with machine bytes (0: unknown)
// in a cgroup of cgroup bytes (0: no limit), with $GOMEMLIMIT env ("" for
// unset) which the Go runtime took as goLimit.
func fakeMemory(env string, goLimit int64, cgroup, machine uint64, cgroupErr error) memoryProbe {
	return memoryProbe{
		env:     func(string) (string, bool) { return env, env != "" },
		current: func() int64 { return goLimit },
		cgroup: func() (uint64, error) {
			if cgroupErr != nil {
				return 0, cgroupErr
			}
			if cgroup == 0 {
				return 0, memlimit.ErrNoLimit
			}
			return cgroup, nil
		},
		machine: func() (uint64, error) {
			if machine == 0 {
				return 0, memlimit.ErrNoLimit
			}
			return machine, nil
		},
	}
}

// TestChooseMemory: serve's memory limit is --memory-limit's, else
// $GOMEMLIMIT's, else the tighter of 9/10 of the cgroup's limit and 3/4
// of the machine's memory; off turns it off; the budget is --max-memory,
// else half the limit; each says where it came from.
func TestChooseMemory(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		name      string
		flag      string
		maxMemory int64
		probe     memoryProbe
		want      memoryChoice
	}{
		{name: "flag", flag: "2GiB", probe: fakeMemory("4GiB", 4*gib, 8*gib, 16*gib, nil),
			want: memoryChoice{limit: 2 * gib, limitFrom: "--memory-limit", setLimit: true, budget: gib, budgetFrom: "half the memory limit"}},
		{name: "flag off", flag: "off", probe: fakeMemory("4GiB", 4*gib, 8*gib, 16*gib, nil),
			want: memoryChoice{limitFrom: "--memory-limit off", setLimit: true, budgetFrom: "no memory limit"}},
		{name: "flag off, budget given", flag: "off", maxMemory: 256 << 20, probe: fakeMemory("", math.MaxInt64, 0, 16*gib, nil),
			want: memoryChoice{limitFrom: "--memory-limit off", setLimit: true, budget: 256 << 20, budgetFrom: "--max-memory"}},
		{name: "GOMEMLIMIT", probe: fakeMemory("3GiB", 3*gib, 8*gib, 16*gib, nil),
			want: memoryChoice{limit: 3 * gib, limitFrom: "GOMEMLIMIT=3GiB", budget: 3 * gib / 2, budgetFrom: "half the memory limit"}},
		{name: "GOMEMLIMIT off", probe: fakeMemory("off", math.MaxInt64, 8*gib, 16*gib, nil),
			want: memoryChoice{limitFrom: "GOMEMLIMIT=off", budgetFrom: "no memory limit"}},
		{name: "cgroup", probe: fakeMemory("", math.MaxInt64, 4*gib, 24*gib, nil),
			want: memoryChoice{limit: 4 * gib / 10 * 9, limitFrom: "9/10 of the cgroup's 4GiB", setLimit: true, budget: 4 * gib / 10 * 9 / 2, budgetFrom: "half the memory limit"}},
		{name: "no cgroup limit", probe: fakeMemory("", math.MaxInt64, 0, 24*gib, nil),
			want: memoryChoice{limit: 18 * gib, limitFrom: "3/4 of the machine's 24GiB", setLimit: true, budget: 9 * gib, budgetFrom: "half the memory limit"}},
		{name: "cgroup past the machine", probe: fakeMemory("", math.MaxInt64, 1<<40, 16*gib, nil),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit"}},
		{name: "cgroup v1's no-limit value", probe: fakeMemory("", math.MaxInt64, math.MaxInt64/4096*4096, 16*gib, nil),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit"}},
		{name: "cgroup unread", probe: fakeMemory("", math.MaxInt64, 0, 16*gib, errors.New("permission denied")),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB (the cgroup's limit unread: permission denied)", setLimit: true,
				budget: 6 * gib, budgetFrom: "half the memory limit"}},
		{name: "no cgroup", probe: fakeMemory("", math.MaxInt64, 0, 16*gib, memlimit.ErrNoCgroup),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit"}},
		{name: "nothing known", probe: fakeMemory("", math.MaxInt64, 0, 0, nil),
			want: memoryChoice{limitFrom: "no cgroup limit, and the machine's memory unknown", setLimit: true, budgetFrom: "no memory limit"}},
		{name: "budget given", maxMemory: gib, probe: fakeMemory("", math.MaxInt64, 4*gib, 24*gib, nil),
			want: memoryChoice{limit: 4 * gib / 10 * 9, limitFrom: "9/10 of the cgroup's 4GiB", setLimit: true, budget: gib, budgetFrom: "--max-memory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := chooseMemory(tc.flag, tc.maxMemory, tc.probe)
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// TestMemoryLimitFlag: --memory-limit takes a size as GOMEMLIMIT spells it
// (and the SI units), or off; anything else, 0 included, is refused with
// an example.
func TestMemoryLimitFlag(t *testing.T) {
	t.Parallel()
	probe := fakeMemory("", math.MaxInt64, 0, 0, nil)
	for in, want := range map[string]int64{"2GiB": 2 << 30, "1500MiB": 1500 << 20, "4096": 4096, "64KiB": 64 << 10, "1TiB": 1 << 40, "10B": 10, "2GB": 2e9} {
		if got, err := chooseMemory(in, 0, probe); err != nil || got.limit != want {
			t.Errorf("--memory-limit %s: %d, %v; want %d", in, got.limit, err, want)
		}
	}
	for _, in := range []string{"2Gb", "-1MiB", "0", "none", "lots", "99999999999TiB"} {
		if _, err := chooseMemory(in, 0, probe); err == nil || !strings.Contains(err.Error(), "2GiB") || !strings.Contains(err.Error(), "off") {
			t.Errorf("--memory-limit %s: %v, want an error with an example and off", in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "none", 512: "512B", 64 << 10: "64KiB", 1536 << 20: "1.5GiB", 4 << 30: "4GiB",
		25276182528 / 4 * 3: "17.7GiB", 3 << 40: "3TiB", 1<<20 + 1: "1.0MiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestServeMemoryLines: serve runs with the budget it chose, and logs at
// start the memory limit and budget and where each came from, and the
// memory stores' bounds (a quarter of the budget each; all of it for the
// one tenant there is without keys).
func TestServeMemoryLines(t *testing.T) {
	// Not parallel: the process's memory limit is the whole test binary's,
	// set for this test alone and put back.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	var stderr strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--memory-limit", "1GiB"}, pw, &stderr)
		pw.Close()
	}()
	if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening on ") {
		cancel()
		t.Fatalf("serve printed %q, %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("serve --memory-limit 1GiB set the limit to %d", got)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		`msg="memory limit and budget" limit=1GiB limit_from=--memory-limit budget=512MiB budget_from="half the memory limit"`,
		`msg="memory stores" store_bytes=128MiB tenant_store_bytes=128MiB`,
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("serve's log has no %q:\n%s", want, stderr.String())
		}
	}
}
