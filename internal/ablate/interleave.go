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
// first trial (or, with a URL each, a server of its own that the caller
// started; or one started afresh each round: RunBuilds), and the trials go
// round by round across all of them, the configs' order and each one's
// modes rotating from round to round. What moves the machine during the
// run then moves every config alike, which runs one after another cannot
// promise (a busy machine moves a design's API overhead by a fifth between
// runs). The configs must share
// their workload, modes and rounds; a Results per config comes back, in
// order, each naming the run (Results.Interleaved), so that compare sets
// their rounds against each other round by round.
func RunInterleaved(ctx context.Context, cfgs []Config) ([]*Results, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("ablate: no configs to interleave")
	}
	base := cfgs[0]
	urls := map[string]bool{}
	for _, c := range cfgs {
		switch {
		case c.URL != "" && urls[c.URL]:
			return nil, errors.New("ablate: interleaved configs each need a server of their own")
		case len(c.Speeds) != 1:
			return nil, errors.New("ablate: an interleaved config runs at one speed")
		case c.Reps != base.Reps || !slices.Equal(c.Modes, base.Modes) || c.Workload.Name != base.Workload.Name:
			return nil, errors.New("ablate: interleaved configs share their workload, modes and rounds")
		}
		if c.URL != "" {
			urls[c.URL] = true
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
	// start gives config i its target, warmed up: a server started afresh
	// when the config has serve, the one before it stopped.
	start := func(i int) error {
		c := &cfgs[i]
		var stop func()
		if c.serve != nil {
			if targets[i] != nil {
				targets[i].stop()
				targets[i] = nil
			}
			var err error
			if c.URL, stop, err = c.serve(ctx); err != nil {
				return err
			}
		}
		tg, err := startTarget(*c, timings[i])
		if err != nil {
			if stop != nil {
				stop()
			}
			return err
		}
		if stop != nil {
			tg.stop = stop
		}
		targets[i] = tg
		return warmUp(ctx, *c, tg, timings[i], run)
	}
	for i, c := range cfgs {
		out[i] = &Results{Schema: SchemaVersion, Started: started, Machine: machine(), Config: configOf(c), Interleaved: run}
		out[i].Machine.InProcess = c.URL == "" && c.serve == nil
		timings[i] = sampler.Timing{TPS: c.Speeds[0], TTFT: c.TTFT, PrefillRate: c.PrefillRate}
		if err := start(i); err != nil {
			return nil, err
		}
	}
	total, done := len(cfgs)*base.Reps*len(base.Modes), 0
	for rep := range base.Reps {
		for i := range cfgs {
			if rep > 0 && cfgs[i].serve != nil {
				if err := start(i); err != nil {
					return nil, fmt.Errorf("ablate: config %d, round %d: %w", i+1, rep+1, err)
				}
			}
		}
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

// RunBuilds runs the comparison against several servers at once, one per
// command (each a tether serve of another build, started here as a child
// on loopback, so that every build's server runs alike: in a process of its
// own, beside this one), interleaved round by round (RunInterleaved). Each
// command must print "listening on URL" first, as tether serve does; cfg
// must target no URL and run at one speed, which each server must serve.
//
// Each round runs against servers started afresh: the intervals over
// rounds assume rounds that are independent, and whatever a server
// process carries for its life (where its heap lies, its hash seeds) is
// then one round's.
func RunBuilds(ctx context.Context, cfg Config, servers [][]string, env []string) ([]*Results, error) {
	if cfg.URL != "" || len(cfg.Speeds) != 1 || len(servers) < 2 {
		return nil, errors.New("ablate: builds are compared at one speed, on servers of their own, two at least")
	}
	cfgs := make([]Config, len(servers))
	for i, cmd := range servers {
		cfgs[i] = cfg
		cfgs[i].serve = func(ctx context.Context) (string, func(), error) {
			srv, err := startServer(ctx, LoadConfig{Server: cmd, ServerEnv: env})
			if err != nil {
				return "", nil, fmt.Errorf("ablate: build %d: %w", i+1, err)
			}
			return srv.base, srv.stop, nil
		}
	}
	return RunInterleaved(ctx, cfgs)
}
