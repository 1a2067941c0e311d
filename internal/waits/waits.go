// Package waits reads a Go execution trace (runtime/trace, or a server's
// /debug/pprof/trace) and reports how long goroutines, once runnable, waited
// for a P to run them, by what made them runnable. A server's round trip
// under load is mostly such waits: the reader of the client's message, the
// goroutine a step passes to, the writer of its frames. Above all it tells
// a reader found by a P's own network poll (it ran out of goroutines, and
// polled) from one found by the runtime's monitor thread (sysmon), which
// polls when no P has for 10 ms and puts what it finds on the global run
// queue, where a P busy with goroutines of its own looks once in 61
// schedules (docs/measuring.md, "Where a step's time goes under load").
package waits

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// The kinds of wait, by what made the goroutine runnable.
const (
	ReadByP       = "network read, found by a P's poll"
	ReadByMonitor = "network read, found by the monitor (sysmon)"
	ReadOther     = "network read, woken otherwise"
	Started       = "started"
	ByGoroutine   = "woken by a goroutine"
	ByRuntime     = "woken by the runtime (timers, other polls)"
	Preempted     = "preempted or yielded"
)

// kinds is the order a Report lists them in.
var kinds = []string{ReadByP, ReadByMonitor, ReadOther, Started, ByGoroutine, ByRuntime, Preempted}

// Stat is the waits of one kind.
type Stat struct {
	Kind           string
	N              int
	Mean, P50, P90 time.Duration
	Max            time.Duration
}

// Report is a trace's waits.
type Report struct {
	Span  time.Duration // from the trace's first event to its last
	Kinds []Stat        // every kind with at least one wait, in the order of the constants
	// Idle is the share of the Ps' time they were idle, and IdleEvery
	// how often on average a P went idle: a P polls the network as it
	// runs out of goroutines.
	Idle      float64
	IdleEvery time.Duration
}

// Kind returns the Stat of kind k (zero when the trace has none).
func (r *Report) Kind(k string) Stat {
	for _, s := range r.Kinds {
		if s.Kind == k {
			return s
		}
	}
	return Stat{Kind: k}
}

// Read reads a trace and reports its waits. A wait is counted when the
// goroutine runs; one still runnable at the trace's end is not.
func Read(r io.Reader) (*Report, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("waits: %w", err)
	}
	type pending struct {
		at   trace.Time
		kind string
	}
	inRead := map[trace.GoID]bool{} // its last block was a network read
	runnable := map[trace.GoID]pending{}
	waits := map[string][]time.Duration{}
	idleSince := map[trace.ProcID]trace.Time{}
	procs := map[trace.ProcID]bool{}
	var idle time.Duration
	var idles int
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("waits: %w", err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			p := st.Resource.Proc()
			procs[p] = true
			from, to := st.Proc()
			switch {
			case from == trace.ProcRunning && to == trace.ProcIdle:
				idleSince[p] = ev.Time()
				idles++
			case from == trace.ProcIdle && to == trace.ProcRunning:
				if t, ok := idleSince[p]; ok {
					idle += time.Duration(ev.Time() - t)
					delete(idleSince, p)
				}
			}
		case trace.ResourceGoroutine:
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if from == trace.GoRunning && to == trace.GoWaiting {
				inRead[g] = networkRead(st.Reason, st.Stack)
			}
			switch {
			case to == trace.GoRunnable:
				runnable[g] = pending{at: ev.Time(), kind: kindOf(ev, from, inRead[g])}
			case from == trace.GoRunnable && to == trace.GoRunning:
				if p, ok := runnable[g]; ok {
					waits[p.kind] = append(waits[p.kind], time.Duration(ev.Time()-p.at))
					delete(runnable, g)
				}
			case to == trace.GoNotExist:
				delete(inRead, g)
			}
		}
	}
	rep := &Report{Span: time.Duration(last - first)}
	for _, t := range idleSince { // idle at the end: counted to it
		idle += time.Duration(last - t)
	}
	if total := rep.Span * time.Duration(len(procs)); total > 0 {
		rep.Idle = float64(idle) / float64(total)
		rep.IdleEvery = total / time.Duration(max(idles, 1))
	}
	for _, k := range kinds {
		if w := waits[k]; len(w) > 0 {
			rep.Kinds = append(rep.Kinds, stat(k, w))
		}
	}
	return rep, nil
}

// networkRead reports whether a goroutine that blocked for reason at
// stack waits for a network connection to be readable (or a listener to
// accept): the runtime's reason is "network" for writes too, told apart by
// the poller's call that blocked, the stack's first frame.
func networkRead(reason string, stack trace.Stack) bool {
	if reason != "network" {
		return false
	}
	for f := range stack.Frames() {
		return !strings.Contains(f.Func, ").Write") && !strings.Contains(f.Func, ").RawWrite")
	}
	return true
}

// kindOf is the kind of wait that ev, making a goroutine runnable from
// state from, begins; read is whether it blocked in a network read.
func kindOf(ev trace.Event, from trace.GoState, read bool) string {
	switch {
	case from == trace.GoNotExist:
		return Started
	case from == trace.GoRunning:
		return Preempted
	case read && ev.Proc() == trace.NoProc:
		return ReadByMonitor
	case read && ev.Goroutine() == trace.NoGoroutine:
		return ReadByP
	case read:
		return ReadOther
	case ev.Goroutine() != trace.NoGoroutine:
		return ByGoroutine
	}
	return ByRuntime
}

func stat(kind string, w []time.Duration) Stat {
	slices.SortFunc(w, cmp.Compare)
	var sum time.Duration
	for _, d := range w {
		sum += d
	}
	n := len(w)
	return Stat{Kind: kind, N: n, Mean: sum / time.Duration(n), P50: w[n/2], P90: w[n*9/10], Max: w[n-1]}
}
