package ablate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tether-run/tether/sampler"
)

// RunInterleaved runs several configurations of one comparison at once, as
// duet benchmarking runs A and B side by side: each config (at its one
// speed) gets an in-process server of its own, all started before the
// first trial, and the trials go round by round across all of them, the
// configs' order and each one's modes rotating from round to round. What
// moves the machine during the run then moves every config alike, which
// runs one after another cannot promise (a busy machine moves a design's
// API overhead by a fifth between runs). The configs must share their
// workload, modes and rounds, and target no URL; a Results per config
// comes back, in order.
func RunInterleaved(ctx context.Context, cfgs []Config) ([]*Results, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("ablate: no configs to interleave")
	}
	base := cfgs[0]
	for _, c := range cfgs {
		switch {
		case c.URL != "":
			return nil, errors.New("ablate: configs are interleaved against servers of their own, not --url")
		case len(c.Speeds) != 1:
			return nil, errors.New("ablate: an interleaved config runs at one speed")
		case c.Reps != base.Reps || !slices.Equal(c.Modes, base.Modes) || c.Workload.Name != base.Workload.Name:
			return nil, errors.New("ablate: interleaved configs share their workload, modes and rounds")
		}
	}
	if len(base.Modes) == 0 || base.Reps < 1 || base.Workload.Tools == nil {
		return nil, errors.New("ablate: a config needs modes, speeds, reps and a workload")
	}
	floor, closeFloor, err := openFloor(ctx, base.Modes)
	if err != nil {
		return nil, err
	}
	defer closeFloor()

	started := time.Now().UTC()
	run := strconv.FormatInt(started.UnixNano(), 36)
	out := make([]*Results, len(cfgs))
	targets := make([]*target, len(cfgs))
	timings := make([]sampler.Timing, len(cfgs))
	defer func() {
		for _, tg := range targets {
			if tg != nil {
				tg.stop()
			}
		}
	}()
	for i, c := range cfgs {
		out[i] = &Results{Schema: SchemaVersion, Started: started, Machine: machine(), Config: configOf(c)}
		out[i].Machine.InProcess = true
		timings[i] = sampler.Timing{TPS: c.Speeds[0], TTFT: c.TTFT, PrefillRate: c.PrefillRate}
		if targets[i], err = startTarget(c, timings[i]); err != nil {
			return nil, err
		}
		if err := warmUp(ctx, c, targets[i], timings[i], run); err != nil {
			return nil, err
		}
	}
	total, done := len(cfgs)*base.Reps*len(base.Modes), 0
	for rep := range base.Reps {
		for k := range cfgs {
			i := (k + rep) % len(cfgs)
			c := cfgs[i]
			for m := range c.Modes {
				mode := c.Modes[(m+rep+i)%len(c.Modes)]
				if base.Progress != nil {
					base.Progress(done, total, fmt.Sprintf("%s of config %d at %v tok/s, round %d", mode, i+1, c.Speeds[0], rep+1))
				}
				key := fmt.Sprintf("ablate-%s-%d", run, done)
				t, err := trial(ctx, c, targets[i], timings[i], mode, key)
				if err != nil {
					return nil, fmt.Errorf("ablate: %s of config %d, round %d: %w", mode, i+1, rep+1, err)
				}
				t.TPS, t.Rep = c.Speeds[0], rep
				if err := measureFloor(ctx, floor, mode, t); err != nil {
					return nil, err
				}
				out[i].Trials = append(out[i].Trials, *t)
				done++
			}
		}
	}
	if base.Progress != nil {
		base.Progress(done, total, "done")
	}
	for _, r := range out {
		r.Summary = inModeOrder(summarize(r.Trials), r.Config.Modes)
	}
	return out, nil
}
