package ablate

import (
	"fmt"
	"math"
	"strconv"
)

// Conclusion is one sentence on what s shows against stateless at its
// speed, and how sure: the change in API overhead and end to end with
// their 95% intervals (the API overhead's over rounds too: how far
// another run may land), "no clear difference" when an interval holds no
// change, and the share of the time the model and the tools take. It is
// "" for stateless itself, and for a mode without stateless to set it
// against.
//
// Its end to end is computed (the designs' shared model and tool time plus
// each one's API overhead), and says so: where the trials' measured
// medians put the two designs the other way round (a simulated model's
// timers firing late in one design's trials), the measured figure stands
// beside it.
func Conclusion(s Summary) string {
	if s.Mode == "stateless" || s.APIOverheadVsStateless == 0 || s.EndToEndVsStateless == 0 {
		return ""
	}
	r, ci, rci := s.APIOverheadVsStateless, s.APIOverheadVsStatelessCI, s.APIOverheadVsStatelessRoundsCI
	var api string
	switch {
	case ci[1] < 1:
		api = fmt.Sprintf("%s× less API overhead than stateless [%s–%s%s]", num(1/r), num(1/ci[1]), num(1/ci[0]), overRounds(1/rci[1], 1/rci[0], rci))
	case ci[0] > 1:
		api = fmt.Sprintf("%s× more API overhead than stateless [%s–%s%s]", num(r), num(ci[0]), num(ci[1]), overRounds(rci[0], rci[1], rci))
	default:
		api = fmt.Sprintf("no clear difference in API overhead from stateless (%s× [%s–%s%s])", num(r), num(ci[0]), num(ci[1]), overRounds(rci[0], rci[1], rci))
	}
	e, eci := s.EndToEndVsStateless, s.EndToEndVsStatelessCI
	pct := func(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) }
	var e2e string
	switch {
	case eci[1] < 1:
		e2e = fmt.Sprintf("end to end (computed) %s%% faster [%s–%s]", pct(1-e), pct(1-eci[1]), pct(1-eci[0]))
	case eci[0] > 1:
		e2e = fmt.Sprintf("end to end (computed) %s%% slower [%s–%s]", pct(e-1), pct(eci[0]-1), pct(eci[1]-1))
	default:
		e2e = fmt.Sprintf("end to end (computed) no clear difference (%s%% [%s to %s])", signed(pct(e-1)), signed(pct(eci[0]-1)), signed(pct(eci[1]-1)))
	}
	if m := s.ElapsedVsStateless; m > 0 && (m-1)*(e-1) < 0 {
		way := "faster"
		if m > 1 {
			way = "slower"
		}
		e2e += fmt.Sprintf(", though as measured its median trial was %s%% %s", pct(math.Abs(m-1)), way)
	}
	return fmt.Sprintf("%s: %s; %s; model and tools are %s%% of the time.", s.Mode, api, e2e, strconv.FormatFloat(100*s.ModelToolsShare, 'f', 1, 64))
}

// overRounds is "; over rounds lo–hi", the interval that resamples
// rounds beside the one that resamples turns, or "" when the run has none
// (fewer than 2 rounds).
func overRounds(lo, hi float64, ci [2]float64) string {
	if ci == [2]float64{} {
		return ""
	}
	return fmt.Sprintf("; over rounds %s–%s", num(lo), num(hi))
}

// JournalLine is one sentence on what a durable mode's rollouts wrote to
// their journals; "" for a mode that keeps none.
func JournalLine(s Summary) string {
	if s.JournalBytesPerRollout == 0 {
		return ""
	}
	kb := func(b float64) string { return strconv.FormatFloat(b/1000, 'f', 1, 64) + " KB" }
	return fmt.Sprintf("%s: its journal took %s a rollout: %s appended a pause (in %s writes, the pause's and its answer's), and %s of snapshots (its first pause's, and any compaction's).",
		s.Mode, kb(s.JournalBytesPerRollout), kb(s.JournalBytesPerPause), strconv.FormatFloat(s.JournalWritesPerPause, 'f', 1, 64), kb(s.SnapshotBytesPerRollout))
}

// signed is a formatted number with its sign: "+0.1", "-0.3".
func signed(s string) string {
	if len(s) > 0 && s[0] != '-' {
		return "+" + s
	}
	return s
}

// num is a ratio with two significant decimals below 10, one above.
func num(x float64) string {
	if x >= 10 {
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}
