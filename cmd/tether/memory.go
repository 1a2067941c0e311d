package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// serve's memory limit, when --memory-limit is not given and $GOMEMLIMIT
// is not set, is a share of what bounds the process's memory, the tighter
// of two:
//
//   - 9/10 of its cgroup's limit (a container's): the kernel kills the
//     process at that limit, and counts in it what Go's soft limit does
//     not (the page cache of files the process wrote, the kernel's socket
//     buffers), so the collector must work harder short of it;
//   - 3/4 of the machine's memory: with no container bounding it, tether
//     shares the machine with the system and whatever else runs there (a
//     model server, a load generator), which the last quarter leaves room
//     for.
//
// A cgroup without a limit, or with one past the machine's memory, bounds
// nothing, and the machine's share applies.
const (
	cgroupShareNum, cgroupShareDen   = 9, 10
	machineShareNum, machineShareDen = 3, 4
)

// memoryProbe reads what bounds the process's memory; tests give their own.
type memoryProbe struct {
	env     func(string) (string, bool) // os.LookupEnv
	current func() int64                // the Go runtime's limit, as $GOMEMLIMIT set it
	cgroup  func() (uint64, error)      // the cgroup's limit, memlimit.ErrNoLimit for none
	machine func() (uint64, error)      // the machine's memory
}

// systemMemory is this process's memoryProbe: its environment, the Go
// runtime, its cgroup (v2's memory.max, up its hierarchy, else v1's
// memory.limit_in_bytes, found by /proc/self/mountinfo and
// /proc/self/cgroup) and the machine (sysinfo).
func systemMemory() memoryProbe {
	return memoryProbe{env: os.LookupEnv, current: func() int64 { return debug.SetMemoryLimit(-1) },
		cgroup: memlimit.FromCgroup, machine: memlimit.FromSystem}
}

// memoryChoice is the memory limit and budget serve runs with, and where
// each came from, as its start log says.
type memoryChoice struct {
	limit      int64 // bytes; 0: none
	limitFrom  string
	setLimit   bool  // serve sets limit (none: math.MaxInt64); else $GOMEMLIMIT has
	budget     int64 // bytes, Limits.MaxMemory; 0: none
	budgetFrom string
	// budgetOfLimit: the budget is the limit's share, not given
	// (budgetBeside settles it).
	budgetOfLimit bool
}

// settle fits the limit and the budget to the server as it stands once
// its tokenizer and models are loaded: own bytes held by the Go runtime
// (what its limit counts), outside bytes resident beside them (the
// binary's pages: its code, the tokenizer's embedded tables; about 34 MiB,
// which no Go limit counts).
//
// The memory limit bounds the process's resident memory: the Go runtime's
// limit (goLimit) is what it leaves beside the outside bytes. A budget
// taken from the limit is half of what the Go limit leaves beside the
// server's own state, the other half for the garbage the collector has yet
// to take (1/16 of the limit at least). Half the whole limit let a small
// one be passed: in TestHostileMemory, 192 MiB with a 96 MiB budget
// peaked at 225-226 MiB of RSS.
func (c *memoryChoice) settle(own, outside int64) (goLimit int64) {
	if c.limit <= 0 {
		return 0
	}
	goLimit = max(c.limit-outside, c.limit/2)
	if c.budgetOfLimit {
		c.budget = max((goLimit-own)/2, c.limit/16)
		c.budgetFrom = fmt.Sprintf("half of what the memory limit leaves beside the server's own %s and its binary's %s", formatSize(own), formatSize(outside))
	}
	return goLimit
}

// ownMemory is what the Go runtime holds now, as its memory limit counts
// it (every class of memory it has mapped, less what it has given back),
// and what else is resident in the process (its VmRSS less that; 0 where
// there is no /proc).
func ownMemory() (own, outside int64) {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	own = int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return own, 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return own, max(kb<<10-own, 0)
			}
		}
	}
	return own, 0
}

// chooseMemory decides serve's memory limit: --memory-limit (flag; "" when
// not given, "off" for none), else $GOMEMLIMIT (which the Go runtime has
// applied), else a share of the cgroup's limit or of the machine's memory
// (see cgroupShareNum). Then its budget: --max-memory (maxMemory; 0 when
// not given), else half the limit (settled by budgetBeside once the
// server's own state is loaded).
func chooseMemory(flag string, maxMemory int64, p memoryProbe) (memoryChoice, error) {
	c := memoryChoice{setLimit: true}
	switch {
	case flag == "off":
		c.limitFrom = "--memory-limit off"
	case flag != "":
		n, err := parseSize(flag)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%q is not a size: give bytes with a unit, such as 2GiB or 1500MiB, or off for no limit", flag)
		}
		c.limit, c.limitFrom = n, "--memory-limit"
	default:
		if v, ok := p.env("GOMEMLIMIT"); ok && v != "" {
			c.setLimit, c.limitFrom = false, "GOMEMLIMIT="+v
			if n := p.current(); n < math.MaxInt64 {
				c.limit = n
			}
			break
		}
		c.limit, c.limitFrom = detectLimit(p)
	}
	switch {
	case maxMemory > 0:
		c.budget, c.budgetFrom = maxMemory, "--max-memory"
	case c.limit > 0:
		c.budget, c.budgetFrom = c.limit/2, "half the memory limit"
		c.budgetOfLimit = true
	default:
		c.budgetFrom = "no memory limit"
	}
	return c, nil
}

// detectLimit is the tighter of the cgroup's share and the machine's, and
// says which it is, and why none when neither is known.
func detectLimit(p memoryProbe) (limit int64, from string) {
	cg, err := p.cgroup()
	var note string // why the cgroup's limit was not read, when that is news
	if err == nil && cg > 0 {
		limit = share(cg, cgroupShareNum, cgroupShareDen)
		from = fmt.Sprintf("%d/%d of the cgroup's %s", cgroupShareNum, cgroupShareDen, formatSize(int64(min(cg, math.MaxInt64))))
	} else if err != nil && !errors.Is(err, memlimit.ErrNoLimit) && !errors.Is(err, memlimit.ErrNoCgroup) &&
		!errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		note = fmt.Sprintf(" (the cgroup's limit unread: %v)", err)
	}
	if m, err := p.machine(); err == nil && m > 0 {
		if l := share(m, machineShareNum, machineShareDen); limit == 0 || l < limit {
			limit = l
			from = fmt.Sprintf("%d/%d of the machine's %s", machineShareNum, machineShareDen, formatSize(int64(min(m, math.MaxInt64))))
		}
	}
	if limit == 0 {
		return 0, "no cgroup limit, and the machine's memory unknown" + note
	}
	return limit, from + note
}

// share is num/den of n bytes, at most math.MaxInt64.
func share(n uint64, num, den int64) int64 {
	return int64(min(n, math.MaxInt64)) / den * num
}

// formatSize writes n bytes for a person, as parseSize reads them: a whole
// number of the largest binary unit that divides it, else one decimal of
// the largest that fits (17.6GiB); "none" for 0.
func formatSize(n int64) string {
	if n <= 0 {
		return "none"
	}
	for _, u := range sizeUnits[:4] { // TiB to KiB
		if n < u.factor {
			continue
		}
		if n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
		return strconv.FormatFloat(float64(n)/float64(u.factor), 'f', 1, 64) + u.suffix
	}
	return strconv.FormatInt(n, 10) + "B"
}
