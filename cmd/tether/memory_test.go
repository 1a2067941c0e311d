package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"regexp"
	"runtime/debug"
	"strconv"
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
			want: memoryChoice{limit: 2 * gib, limitFrom: "--memory-limit", setLimit: true, budget: gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "flag off", flag: "off", probe: fakeMemory("4GiB", 4*gib, 8*gib, 16*gib, nil),
			want: memoryChoice{limitFrom: "--memory-limit off", setLimit: true, budgetFrom: "no memory limit"}},
		{name: "flag off, budget given", flag: "off", maxMemory: 256 << 20, probe: fakeMemory("", math.MaxInt64, 0, 16*gib, nil),
			want: memoryChoice{limitFrom: "--memory-limit off", setLimit: true, budget: 256 << 20, budgetFrom: "--max-memory"}},
		{name: "GOMEMLIMIT", probe: fakeMemory("3GiB", 3*gib, 8*gib, 16*gib, nil),
			want: memoryChoice{limit: 3 * gib, limitFrom: "GOMEMLIMIT=3GiB", budget: 3 * gib / 2, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "GOMEMLIMIT off", probe: fakeMemory("off", math.MaxInt64, 8*gib, 16*gib, nil),
			want: memoryChoice{limitFrom: "GOMEMLIMIT=off", budgetFrom: "no memory limit"}},
		{name: "cgroup", probe: fakeMemory("", math.MaxInt64, 4*gib, 24*gib, nil),
			want: memoryChoice{limit: 4 * gib / 10 * 9, limitFrom: "9/10 of the cgroup's 4GiB", setLimit: true, budget: 4 * gib / 10 * 9 / 2, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "no cgroup limit", probe: fakeMemory("", math.MaxInt64, 0, 24*gib, nil),
			want: memoryChoice{limit: 18 * gib, limitFrom: "3/4 of the machine's 24GiB", setLimit: true, budget: 9 * gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "cgroup past the machine", probe: fakeMemory("", math.MaxInt64, 1<<40, 16*gib, nil),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "cgroup v1's no-limit value", probe: fakeMemory("", math.MaxInt64, math.MaxInt64/4096*4096, 16*gib, nil),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "cgroup unread", probe: fakeMemory("", math.MaxInt64, 0, 16*gib, errors.New("permission denied")),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB (the cgroup's limit unread: permission denied)", setLimit: true,
				budget: 6 * gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
		{name: "no cgroup", probe: fakeMemory("", math.MaxInt64, 0, 16*gib, memlimit.ErrNoCgroup),
			want: memoryChoice{limit: 12 * gib, limitFrom: "3/4 of the machine's 16GiB", setLimit: true, budget: 6 * gib, budgetFrom: "half the memory limit", budgetOfLimit: true}},
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
	goLimit := debug.SetMemoryLimit(-1)
	if goLimit > 1<<30 || goLimit < 1<<29 {
		t.Errorf("serve --memory-limit 1GiB set the Go runtime's limit to %d", goLimit)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	m := regexp.MustCompile(`msg="memory limit and budget" limit=1GiB limit_from=--memory-limit budget=(\S+) budget_from="half of what the memory limit leaves beside the server's own (\S+) and its binary's (\S+)"\n.*msg="memory stores" store_bytes=(\S+) tenant_store_bytes=(\S+)`).
		FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("serve's log has no memory lines as expected:\n%s", stderr.String())
	}
	var size [5]int64
	for i, s := range m[1:] { // formatSize's: a number to one decimal, and a binary unit
		num := strings.TrimRight(s, "KMGTiB")
		f, err := strconv.ParseFloat(num, 64)
		unit := map[string]float64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[s[len(num):]]
		if err != nil || unit == 0 {
			t.Fatalf("%q is not a size as formatSize writes it", s)
		}
		size[i] = int64(f * unit)
	}
	budget, own, outside, store, tenant := size[0], size[1], size[2], size[3], size[4]
	// The sizes are logged to one decimal of their unit.
	near := func(got, want int64) bool { return got >= want-want/50 && got <= want+want/50 }
	if !near(goLimit, 1<<30-outside) || !near(budget, (goLimit-own)/2) || !near(store, budget/4) || tenant != store {
		t.Errorf("a Go limit of %d and a budget of %d beside %d of its own and %d outside under 1 GiB, stores of %d and %d: want the limit less what is outside, half of what that leaves, and a quarter of that each",
			goLimit, budget, own, outside, store, tenant)
	}
}

// TestMemorySettle: the Go runtime's limit is what the memory limit
// leaves beside the process's other resident pages, and a budget taken
// from the limit half of what that leaves beside the server's own memory
// (1/16 of the limit at least); a budget given stays as given.
func TestMemorySettle(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		choice                memoryChoice
		own, outside          int64
		wantGoLimit, wantBudg int64
	}{
		{memoryChoice{limit: 192 * mib, budget: 96 * mib, budgetOfLimit: true}, 32 * mib, 34 * mib, 158 * mib, 63 * mib},
		{memoryChoice{limit: 64 * mib, budget: 32 * mib, budgetOfLimit: true}, 40 * mib, 34 * mib, 32 * mib, 4 * mib},
		{memoryChoice{limit: 192 * mib, budget: 100 * mib}, 32 * mib, 34 * mib, 158 * mib, 100 * mib},
		{memoryChoice{}, 32 * mib, 34 * mib, 0, 0},
	} {
		c := tc.choice
		if goLimit := c.settle(tc.own, tc.outside); goLimit != tc.wantGoLimit || c.budget != tc.wantBudg {
			t.Errorf("%+v beside %d MiB and %d MiB: a Go limit of %d MiB and a budget of %d, want %d and %d",
				tc.choice, tc.own/mib, tc.outside/mib, goLimit/mib, c.budget/mib, tc.wantGoLimit/mib, tc.wantBudg/mib)
		}
	}
}
