package ablate

import (
	"math"
	"slices"
)

// Summary is one mode at one speed over its trials. Durations are in
// microseconds. Every figure that a run can land differently on comes with
// its 95% interval (CI95), and a figure the sample cannot carry is not
// given: a tail quantile the round trips are too few for is left at 0 and
// their maximum given instead; a slope needs MinSlopeRoundTrips.
//
// A round trip is a turn that ends in a pause for client tools: every turn
// but the first (which sends the task) and the last (which ends with the
// answer, and in suspend mode with the whole output). Per-turn overhead is
// the turn's latency minus the timing model's time for its step.
type Summary struct {
	Mode   string  `json:"mode"`
	TPS    float64 `json:"tps"`
	Trials int     `json:"trials"`

	// The headline. A rollout's end to end is its model time and tool time
	// (computed, the same in every trial: medians), what the client does
	// between turns (the median trial's), and its turns' API overhead: the
	// turns per trial times their mean overhead, for a sum of turns is
	// what a rollout pays. The intervals resample the turns.
	TurnsPerTrial   float64    `json:"turns_per_trial"`
	EndToEndUS      float64    `json:"end_to_end_us"`
	EndToEndCI      [2]float64 `json:"end_to_end_ci95"`
	APIOverheadUS   float64    `json:"api_overhead_us"` // per rollout: turns × mean turn overhead, and between turns
	APIOverheadCI   [2]float64 `json:"api_overhead_ci95"`
	ModelToolsShare float64    `json:"model_and_tools_share"` // (model + tools) / end to end
	// Against stateless at the same speed (0 when it did not run), with
	// intervals that resample both modes' turns apart.
	EndToEndVsStateless      float64    `json:"end_to_end_vs_stateless"`
	EndToEndVsStatelessCI    [2]float64 `json:"end_to_end_vs_stateless_ci95"`
	APIOverheadVsStateless   float64    `json:"api_overhead_vs_stateless"`
	APIOverheadVsStatelessCI [2]float64 `json:"api_overhead_vs_stateless_ci95"`
	// The same intervals over rounds: resampling whole rounds (a trial's
	// turns), against stateless round by round. How far another run may
	// land, where the intervals above say how precisely this one measured
	// (stats.go). Zero with fewer than MinRounds rounds.
	EndToEndRoundsCI               [2]float64 `json:"end_to_end_rounds_ci95"`
	APIOverheadRoundsCI            [2]float64 `json:"api_overhead_rounds_ci95"`
	EndToEndVsStatelessRoundsCI    [2]float64 `json:"end_to_end_vs_stateless_rounds_ci95"`
	APIOverheadVsStatelessRoundsCI [2]float64 `json:"api_overhead_vs_stateless_rounds_ci95"`

	// Over trials, as measured: the median trial and the slowest, and the
	// median against stateless's (0 when it did not run): the measured
	// counterpart of EndToEndVsStateless, which a headline sets beside it
	// when the two disagree on which is faster.
	ElapsedMedianUS    float64 `json:"elapsed_median_us"`
	ElapsedVsStateless float64 `json:"elapsed_median_vs_stateless,omitempty"`
	ElapsedMaxUS       float64 `json:"elapsed_max_us"`
	ModelMedianUS      float64 `json:"model_median_us"`
	ToolsMedianUS      float64 `json:"tools_median_us"`
	OverheadMedianUS   float64 `json:"overhead_median_us"` // elapsed - model - tools
	// BeyondModelAndTools is elapsed / (model + tools) - 1 of the median
	// trial: the share the API adds to what the model and the tools take.
	BeyondModelAndTools float64 `json:"beyond_model_and_tools"`

	// Round trips. First and last are the median overhead of the first
	// three and the last three (median over trials). The line is a
	// Theil–Sen fit of overhead against the context each step read, over
	// every round trip of every trial: its slope (when carried), and its
	// values at the first and the last round trip's context. The ratios to
	// the floor set the median (p99) overhead of the round trips against
	// the median (p99) of their floors, each measured after the round
	// trip's own idle (see measureFloor); the warm ratio against the
	// median of their warm floors. CI95 are 95% intervals: of a median,
	// between order statistics; of a ratio or a slope, bootstrap
	// percentiles over the round trips.
	RoundTrips         int        `json:"round_trips"`
	FirstOverheadUS    float64    `json:"first_round_trips_overhead_us"`
	LastOverheadUS     float64    `json:"last_round_trips_overhead_us"`
	FitFirstUS         float64    `json:"overhead_fit_first_us"`
	FitLastUS          float64    `json:"overhead_fit_last_us"`
	SlopeCarried       bool       `json:"overhead_slope_carried"` // at least MinSlopeRoundTrips round trips over more than one context
	SlopeUSPer1kTokens float64    `json:"overhead_slope_us_per_1k_tokens"`
	SlopeCI            [2]float64 `json:"overhead_slope_ci95"`
	RoundTripMedianUS  float64    `json:"round_trip_overhead_median_us"` // over round trips
	RoundTripMedianCI  [2]float64 `json:"round_trip_overhead_median_ci95"`
	RoundTripP99US     float64    `json:"round_trip_overhead_p99_us"` // 0 unless the round trips carry a p99
	RoundTripMaxUS     float64    `json:"round_trip_overhead_max_us"`
	FloorMedianUS      float64    `json:"floor_median_us"` // the echo floor of the same round trips
	FloorP99US         float64    `json:"floor_p99_us"`
	FloorRatioMedian   float64    `json:"floor_ratio_median"` // overhead p50 / floor p50
	FloorRatioMedianCI [2]float64 `json:"floor_ratio_median_ci95"`
	FloorRatioP99      float64    `json:"floor_ratio_p99"` // overhead p99 / floor p99, 0 unless carried
	FloorRatioP99CI    [2]float64 `json:"floor_ratio_p99_ci95"`
	WarmFloorMedianUS  float64    `json:"warm_floor_median_us"`
	WarmFloorRatio     float64    `json:"warm_floor_ratio_median"` // overhead p50 / warm floor p50
	// RenderMedianUS is the server's tokenizing of a round trip's new items
	// (the tool outputs; a real server does it too), and
	// FloorRatioExRender the median overhead without it against the
	// median floor.
	RenderMedianUS      float64 `json:"render_median_us"`
	PacerLateMedianUS   float64 `json:"pacer_late_median_us"` // counted in model time, not overhead
	FloorRatioExRender  float64 `json:"floor_ratio_ex_render_median"`
	BytesSentMedian     float64 `json:"bytes_sent_median"`
	BytesReceivedMedian float64 `json:"bytes_received_median"`
	CPUPerTurnUS        float64 `json:"cpu_per_turn_us"` // process CPU (client and in-process server) per turn, median trial

	// Of a durable mode, what its trials wrote to their journals (medians
	// over trials, in-process): in all a rollout, appended a pause (its
	// write and its answer's), and the snapshots that began it apart.
	JournalBytesPerRollout  float64 `json:"journal_bytes_per_rollout,omitempty"`
	JournalBytesPerPause    float64 `json:"journal_bytes_per_pause,omitempty"`
	JournalWritesPerPause   float64 `json:"journal_writes_per_pause,omitempty"`
	SnapshotBytesPerRollout float64 `json:"snapshot_bytes_per_rollout,omitempty"`

	turns   []float64   // every turn's overhead, for the intervals against stateless
	rounds  [][]float64 // the turns' overheads, a trial's (a round's) together
	reps    []int       // each of rounds' round
	trips   []float64   // every round trip's overhead
	fixed   float64     // end to end less the turns' overhead: model and tools (shared), between turns
	between float64     // the client's time between turns, median trial
}

// endToEnd is the end to end of s with turn overheads o: what a resample
// of its turns would give.
func (s *Summary) endToEnd(o []float64) float64 { return s.fixed + s.TurnsPerTrial*mean(o) }

// apiOverhead is the API overhead of s with turn overheads o.
func (s *Summary) apiOverhead(o []float64) float64 {
	return s.between + s.TurnsPerTrial*mean(o)
}

// MinSlopeRoundTrips is the fewest round trips a slope of overhead against
// context is given for: fewer scatter it past reading (a --quick run's 9
// gave a negative slope).
const MinSlopeRoundTrips = 20

// summarize groups trials by speed and mode, in the order they first ran
// at each speed.
func summarize(trials []Trial) []Summary { return summarizeSharing(trials, sharedWork(trials)) }

// sharedWork is the median model and tool time of trials' rollouts at each
// speed. Model and tool time are the same work in every design at a speed
// (the model's is computed, the tools' are the workload's, measured on the
// client); the designs share their median, so that what sets them apart
// end to end is their API overhead, not the tools' timer jitter. Compare
// shares it across two runs of the same work.
func sharedWork(trials []Trial) map[float64]float64 {
	shared := map[float64]float64{}
	for tps := range groupsBySpeed(trials) {
		var mt []float64
		for _, t := range trials {
			if t.TPS == tps {
				mt = append(mt, t.ModelUS+t.ToolsUS)
			}
		}
		shared[tps] = quantile(mt, 0.5)
	}
	return shared
}

// summarizeSharing is summarize, with shared as each speed's model and
// tool time.
func summarizeSharing(trials []Trial, shared map[float64]float64) []Summary {
	type key struct {
		tps  float64
		mode string
	}
	var order []key
	groups := map[key][]Trial{}
	for _, t := range trials {
		k := key{t.TPS, t.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	var out []Summary
	for _, k := range order {
		out = append(out, summarizeGroup(groups[k], shared[k.tps]))
	}
	for i := range out {
		for _, base := range out {
			if base.Mode == "stateless" && base.TPS == out[i].TPS {
				out[i].vsStateless(base)
			}
		}
	}
	return out
}

// vsStateless sets s's figures against base, stateless at its speed.
func (s *Summary) vsStateless(base Summary) {
	s.EndToEndVsStateless = ratio(s.EndToEndUS, base.EndToEndUS)
	s.ElapsedVsStateless = ratio(s.ElapsedMedianUS, base.ElapsedMedianUS)
	s.APIOverheadVsStateless = ratio(s.APIOverheadUS, base.APIOverheadUS)
	if s.Mode == base.Mode { // itself: exactly 1
		s.EndToEndVsStatelessCI, s.APIOverheadVsStatelessCI = [2]float64{1, 1}, [2]float64{1, 1}
		return
	}
	if len(s.turns) == 0 || len(base.turns) == 0 {
		return
	}
	s.EndToEndVsStatelessCI = ratioCI(s.turns, base.turns, s.endToEnd, base.endToEnd)
	s.APIOverheadVsStatelessCI = ratioCI(s.turns, base.turns, s.apiOverhead, base.apiOverhead)
	if len(s.rounds) >= MinRounds && len(base.rounds) >= MinRounds {
		paired := slices.Equal(s.reps, base.reps) // each of its rounds ran beside stateless's
		n := min(len(s.rounds), len(base.rounds))
		s.EndToEndVsStatelessRoundsCI = ci95Rounds(roundsRatioBoot(s.rounds, base.rounds, s.endToEnd, base.endToEnd, paired, roundsResamples), n)
		s.APIOverheadVsStatelessRoundsCI = ci95Rounds(roundsRatioBoot(s.rounds, base.rounds, s.apiOverhead, base.apiOverhead, paired, roundsResamples), n)
	}
}

// summarizeGroup summarizes one design at one speed; modelTools is the
// model and tool time its end to end counts (shared by the designs at the
// speed).
func summarizeGroup(ts []Trial, modelTools float64) Summary {
	s := Summary{Mode: ts[0].Mode, TPS: ts[0].TPS, Trials: len(ts)}
	var elapsed, model, tools, overhead, sent, received, cpu, first, last, firstCtx, lastCtx []float64
	var rt, floor, warm, render, late, ctx, exRender, between, nturns []float64
	for _, t := range ts {
		if t.Agents > 0 {
			// A tree's turns overlap, and so do their model and tool
			// times: the rollout's overhead is over its critical path
			// (Trial.Agents), and counts as one turn's.
			s.turns = append(s.turns, t.OverheadUS)
			s.rounds, s.reps = append(s.rounds, []float64{t.OverheadUS}), append(s.reps, t.Rep)
			between, nturns = append(between, 0), append(nturns, 1)
			elapsed, model, tools, overhead = append(elapsed, t.ElapsedUS), append(model, t.ModelUS), append(tools, t.ToolsUS), append(overhead, t.OverheadUS)
			sent, received = append(sent, float64(t.BytesSent)), append(received, float64(t.BytesReceived))
			continue
		}
		var sum float64
		round := make([]float64, 0, len(t.Turns))
		for _, tn := range t.Turns {
			round = append(round, tn.OverheadUS)
			sum += tn.OverheadUS
		}
		s.turns = append(s.turns, round...)
		s.rounds, s.reps = append(s.rounds, round), append(s.reps, t.Rep)
		between = append(between, t.OverheadUS-sum)
		nturns = append(nturns, float64(len(t.Turns)))
		elapsed = append(elapsed, t.ElapsedUS)
		model = append(model, t.ModelUS)
		tools = append(tools, t.ToolsUS)
		overhead = append(overhead, t.OverheadUS)
		sent = append(sent, float64(t.BytesSent))
		received = append(received, float64(t.BytesReceived))
		if len(t.Turns) > 0 {
			cpu = append(cpu, t.CPUUS/float64(len(t.Turns)))
		}
		trips := roundTrips(t.Turns)
		if len(trips) == 0 {
			continue
		}
		n := min(3, len(trips))
		first = append(first, medianOverhead(trips[:n]))
		last = append(last, medianOverhead(trips[len(trips)-n:]))
		firstCtx = append(firstCtx, float64(trips[0].ContextTokens)/1000)
		lastCtx = append(lastCtx, float64(trips[len(trips)-1].ContextTokens)/1000)
		for _, tn := range trips {
			rt = append(rt, tn.OverheadUS)
			floor = append(floor, tn.FloorUS)
			warm = append(warm, tn.WarmFloorUS)
			render = append(render, tn.RenderUS)
			late = append(late, tn.PacerLateUS)
			ctx = append(ctx, float64(tn.ContextTokens)/1000)
			exRender = append(exRender, tn.OverheadUS-tn.RenderUS)
		}
		s.RoundTrips += len(trips)
	}
	s.ElapsedMedianUS, s.ModelMedianUS, s.ToolsMedianUS = quantile(elapsed, 0.5), quantile(model, 0.5), quantile(tools, 0.5)
	s.ElapsedMaxUS = quantile(elapsed, 1)
	s.OverheadMedianUS = quantile(overhead, 0.5)
	s.BeyondModelAndTools = ratio(s.ElapsedMedianUS, s.ModelMedianUS+s.ToolsMedianUS) - 1
	s.FirstOverheadUS, s.LastOverheadUS = quantile(first, 0.5), quantile(last, 0.5)

	s.TurnsPerTrial = quantile(nturns, 0.5)
	s.between = quantile(between, 0.5)
	s.fixed = modelTools + s.between
	s.APIOverheadUS, s.APIOverheadCI = s.apiOverhead(s.turns), bootstrapCI(s.turns, s.apiOverhead)
	s.EndToEndUS, s.EndToEndCI = s.endToEnd(s.turns), bootstrapCI(s.turns, s.endToEnd)
	if len(s.rounds) >= MinRounds {
		s.APIOverheadRoundsCI, s.EndToEndRoundsCI = roundsCI(s.rounds, s.apiOverhead), roundsCI(s.rounds, s.endToEnd)
	}
	s.ModelToolsShare = ratio(modelTools, s.EndToEndUS)

	x0, x1 := quantile(firstCtx, 0.5), quantile(lastCtx, 0.5)
	a, b := fit(ctx, rt)
	s.FitFirstUS, s.FitLastUS = a+b*x0, a+b*x1
	if len(rt) >= MinSlopeRoundTrips && x1 > x0 {
		s.SlopeCarried, s.SlopeUSPer1kTokens, s.SlopeCI = true, b, slopeCI(ctx, rt)
	}
	s.trips = rt
	s.RoundTripMedianUS = quantile(rt, 0.5)
	s.RoundTripMedianCI, _ = medianCI(rt)
	s.RoundTripMaxUS = quantile(rt, 1)
	s.FloorMedianUS = quantile(floor, 0.5)
	s.FloorRatioMedian = ratio(s.RoundTripMedianUS, s.FloorMedianUS)
	vsFloor := func(q float64, idx []int) float64 {
		return ratio(quantile(pick(rt, idx), q), quantile(pick(floor, idx), q))
	}
	var medians, p99s []float64
	p99, _, carried := tailQuantile(rt, 0.99)
	resample(len(rt), func(idx []int) {
		medians = append(medians, vsFloor(0.5, idx))
		if carried {
			p99s = append(p99s, vsFloor(0.99, idx))
		}
	})
	s.FloorRatioMedianCI = ci95(medians)
	if carried {
		s.RoundTripP99US, s.FloorP99US = p99, quantile(floor, 0.99)
		s.FloorRatioP99, s.FloorRatioP99CI = ratio(s.RoundTripP99US, s.FloorP99US), ci95(p99s)
	}
	s.WarmFloorMedianUS = quantile(warm, 0.5)
	s.WarmFloorRatio = ratio(s.RoundTripMedianUS, s.WarmFloorMedianUS)
	s.RenderMedianUS = quantile(render, 0.5)
	s.PacerLateMedianUS = quantile(late, 0.5)
	s.FloorRatioExRender = ratio(quantile(exRender, 0.5), s.FloorMedianUS)
	s.BytesSentMedian, s.BytesReceivedMedian = quantile(sent, 0.5), quantile(received, 0.5)
	s.CPUPerTurnUS = quantile(cpu, 0.5)
	s.summarizeJournal(ts)
	return s
}

// summarizeJournal sets what the trials of a durable mode wrote to their
// journals.
func (s *Summary) summarizeJournal(ts []Trial) {
	var total, perPause, writes, snapshots []float64
	for _, t := range ts {
		if t.Journal == nil || t.Paths["pauses"] == 0 {
			continue
		}
		pauses := float64(t.Paths["pauses"])
		total = append(total, float64(t.Journal.Bytes+t.Journal.SnapshotBytes))
		perPause = append(perPause, float64(t.Journal.Bytes)/pauses)
		writes = append(writes, float64(t.Journal.Writes)/pauses)
		snapshots = append(snapshots, float64(t.Journal.SnapshotBytes))
	}
	if len(total) == 0 {
		return
	}
	s.JournalBytesPerRollout, s.JournalBytesPerPause = quantile(total, 0.5), quantile(perPause, 0.5)
	s.JournalWritesPerPause, s.SnapshotBytesPerRollout = quantile(writes, 0.5), quantile(snapshots, 0.5)
}

// roundTrips are the turns between the first and the last.
func roundTrips(turns []Turn) []Turn {
	if len(turns) < 3 {
		return nil
	}
	return turns[1 : len(turns)-1]
}

// medianOverhead is the median overhead of turns: one turn that the
// machine slowed does not move it.
func medianOverhead(turns []Turn) float64 {
	var xs []float64
	for _, t := range turns {
		xs = append(xs, t.OverheadUS)
	}
	return quantile(xs, 0.5)
}

// Imprecise lists the headline figures of sums (one speed's) whose 95%
// interval reaches farther than ±p of the figure: each mode's end to end
// and API overhead, and their ratios to stateless. The µs per 1k tokens
// slope and the × floor ratio are not held to it: their spread is the
// machine's, which more rounds do not narrow as fast. overRounds holds the
// intervals over rounds to it instead of those over turns; before
// MinRounds rounds there are none, and every figure is imprecise.
func Imprecise(sums []Summary, p float64, overRounds bool) []string {
	var out []string
	check := func(mode, figure string, v float64, ci [2]float64) {
		if w := p * math.Abs(v); v != 0 && (ci[1]-v > w || v-ci[0] > w) {
			out = append(out, mode+" "+figure)
		}
	}
	for _, s := range sums {
		e2e, api, e2eVs, apiVs := s.EndToEndCI, s.APIOverheadCI, s.EndToEndVsStatelessCI, s.APIOverheadVsStatelessCI
		if overRounds {
			e2e, api, e2eVs, apiVs = s.EndToEndRoundsCI, s.APIOverheadRoundsCI, s.EndToEndVsStatelessRoundsCI, s.APIOverheadVsStatelessRoundsCI
		}
		check(s.Mode, "end to end (computed)", s.EndToEndUS, e2e)
		check(s.Mode, "API overhead", s.APIOverheadUS, api)
		if s.Mode != "stateless" {
			check(s.Mode, "end to end (computed) vs stateless", s.EndToEndVsStateless, e2eVs)
			check(s.Mode, "API overhead vs stateless", s.APIOverheadVsStateless, apiVs)
		}
	}
	return out
}

// trialsAt is the trials at speed tps.
func trialsAt(trials []Trial, tps float64) []Trial {
	var out []Trial
	for _, t := range trials {
		if t.TPS == tps {
			out = append(out, t)
		}
	}
	return out
}

// groupsBySpeed is the speeds trials ran at.
func groupsBySpeed(trials []Trial) map[float64]bool {
	speeds := map[float64]bool{}
	for _, t := range trials {
		speeds[t.TPS] = true
	}
	return speeds
}

// inModeOrder sorts sums into the order of modes (a run's config), speed
// by speed as they ran, whatever order the trials first ran the modes in
// (an interleaved run rotates them).
func inModeOrder(sums []Summary, modes []string) []Summary {
	slices.SortStableFunc(sums, func(a, b Summary) int {
		if a.TPS != b.TPS {
			return 0
		}
		return slices.Index(modes, a.Mode) - slices.Index(modes, b.Mode)
	})
	return sums
}
