package ablate

// Summary is one mode at one speed over its trials. Durations are in
// microseconds; "median" and "p95" are over trials unless they say turns.
//
// A round trip is a turn that ends in a pause for client tools: every turn
// but the first (which sends the task) and the last (which ends with the
// answer, and in suspend mode with the whole output). Per-turn overhead is
// the turn's latency minus the timing model's time for its step.
type Summary struct {
	Mode   string  `json:"mode"`
	TPS    float64 `json:"tps"`
	Trials int     `json:"trials"`

	ElapsedMedianUS  float64 `json:"elapsed_median_us"`
	ElapsedP95US     float64 `json:"elapsed_p95_us"`
	ModelMedianUS    float64 `json:"model_median_us"`
	ToolsMedianUS    float64 `json:"tools_median_us"`
	OverheadMedianUS float64 `json:"overhead_median_us"` // elapsed - model - tools
	OverheadP95US    float64 `json:"overhead_p95_us"`
	// BeyondModelAndTools is elapsed / (model + tools) - 1 of the median
	// trial: the share the API adds to what the model and the tools take.
	BeyondModelAndTools float64 `json:"beyond_model_and_tools"`

	// Round trips. First and last are the median overhead of the first
	// three and the last three (median over trials). The line is a
	// Theil–Sen fit of overhead against the context each step read, over
	// every round trip of every trial: its slope, its values at the first
	// and the last round trip's context, and growth, the ratio of the two.
	// The ratios to the floor set the median (p99) overhead of the round
	// trips against the median (p99) of their floors, each measured after
	// the round trip's own idle (see measureFloor); the warm ratio against
	// the median of their warm floors. CI95 are 95% bootstrap intervals
	// over the round trips.
	RoundTrips         int        `json:"round_trips"`
	FirstOverheadUS    float64    `json:"first_round_trips_overhead_us"`
	LastOverheadUS     float64    `json:"last_round_trips_overhead_us"`
	FitFirstUS         float64    `json:"overhead_fit_first_us"`
	FitLastUS          float64    `json:"overhead_fit_last_us"`
	OverheadGrowth     float64    `json:"overhead_growth"` // fit last / fit first
	OverheadGrowthCI   [2]float64 `json:"overhead_growth_ci95"`
	SlopeUSPer1kTokens float64    `json:"overhead_slope_us_per_1k_tokens"`
	SlopeCI            [2]float64 `json:"overhead_slope_ci95"`
	RoundTripMedianUS  float64    `json:"round_trip_overhead_median_us"` // over round trips
	RoundTripP99US     float64    `json:"round_trip_overhead_p99_us"`
	FloorMedianUS      float64    `json:"floor_median_us"` // the echo floor of the same round trips
	FloorP99US         float64    `json:"floor_p99_us"`
	FloorRatioMedian   float64    `json:"floor_ratio_median"` // overhead p50 / floor p50
	FloorRatioMedianCI [2]float64 `json:"floor_ratio_median_ci95"`
	FloorRatioP99      float64    `json:"floor_ratio_p99"` // overhead p99 / floor p99
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

	// Against stateless at the same speed (0 when it did not run).
	ElapsedVsStateless  float64 `json:"elapsed_vs_stateless"`
	OverheadVsStateless float64 `json:"overhead_vs_stateless"`
}

// summarize groups trials by speed and mode, in the order they first ran
// at each speed.
func summarize(trials []Trial) []Summary {
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
		out = append(out, summarizeGroup(groups[k]))
	}
	for i := range out {
		for _, base := range out {
			if base.Mode == "stateless" && base.TPS == out[i].TPS {
				out[i].ElapsedVsStateless = ratio(out[i].ElapsedMedianUS, base.ElapsedMedianUS)
				out[i].OverheadVsStateless = ratio(out[i].OverheadMedianUS, base.OverheadMedianUS)
			}
		}
	}
	return out
}

func summarizeGroup(ts []Trial) Summary {
	s := Summary{Mode: ts[0].Mode, TPS: ts[0].TPS, Trials: len(ts)}
	var elapsed, model, tools, overhead, sent, received, cpu, first, last, firstCtx, lastCtx []float64
	var rt, floor, warm, render, late, ctx, exRender []float64
	for _, t := range ts {
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
	s.ElapsedMedianUS, s.ElapsedP95US = quantile(elapsed, 0.5), quantile(elapsed, 0.95)
	s.ModelMedianUS, s.ToolsMedianUS = quantile(model, 0.5), quantile(tools, 0.5)
	s.OverheadMedianUS, s.OverheadP95US = quantile(overhead, 0.5), quantile(overhead, 0.95)
	s.BeyondModelAndTools = ratio(s.ElapsedMedianUS, s.ModelMedianUS+s.ToolsMedianUS) - 1
	s.FirstOverheadUS, s.LastOverheadUS = quantile(first, 0.5), quantile(last, 0.5)

	x0, x1 := quantile(firstCtx, 0.5), quantile(lastCtx, 0.5)
	growth := func(a, b float64) float64 { return ratio(a+b*x1, a+b*x0) }
	a, b := fit(ctx, rt)
	s.SlopeUSPer1kTokens, s.FitFirstUS, s.FitLastUS, s.OverheadGrowth = b, a+b*x0, a+b*x1, growth(a, b)
	vsFloor := func(q float64, idx []int) float64 {
		return ratio(quantile(pick(rt, idx), q), quantile(pick(floor, idx), q))
	}
	var slopes, growths, medians, p99s []float64
	resample(len(rt), func(idx []int) {
		a, b := fit(pick(ctx, idx), pick(rt, idx))
		slopes, growths = append(slopes, b), append(growths, growth(a, b))
		medians, p99s = append(medians, vsFloor(0.5, idx)), append(p99s, vsFloor(0.99, idx))
	})
	s.SlopeCI, s.OverheadGrowthCI = ci95(slopes), ci95(growths)

	s.RoundTripMedianUS, s.RoundTripP99US = quantile(rt, 0.5), quantile(rt, 0.99)
	s.FloorMedianUS, s.FloorP99US = quantile(floor, 0.5), quantile(floor, 0.99)
	s.FloorRatioMedian = ratio(s.RoundTripMedianUS, s.FloorMedianUS)
	s.FloorRatioP99 = ratio(s.RoundTripP99US, s.FloorP99US)
	s.FloorRatioMedianCI, s.FloorRatioP99CI = ci95(medians), ci95(p99s)
	s.WarmFloorMedianUS = quantile(warm, 0.5)
	s.WarmFloorRatio = ratio(s.RoundTripMedianUS, s.WarmFloorMedianUS)
	s.RenderMedianUS = quantile(render, 0.5)
	s.PacerLateMedianUS = quantile(late, 0.5)
	s.FloorRatioExRender = ratio(quantile(exRender, 0.5), s.FloorMedianUS)
	s.BytesSentMedian, s.BytesReceivedMedian = quantile(sent, 0.5), quantile(received, 0.5)
	s.CPUPerTurnUS = quantile(cpu, 0.5)
	return s
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
