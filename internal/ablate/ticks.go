package ablate

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// The charts' axis markers (plot.Ticker).

// niceTicks marks an axis at 1, 2 or 5 times a power of ten, four to
// eight of them, labelled with as many decimals as the step needs.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	raw := (hi - lo) / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * pow; step >= raw {
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi*(1+1e-9); k++ {
		v := k * step
		if math.Abs(v) < step*1e-9 {
			v = 0 // not -0
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ticks
}

// logTicks marks a logarithmic axis at every decade and at 2 and 5 times
// it, each labelled, and at the other whole multiples unlabelled: a range
// narrower than a decade still reads (plot.LogTicks labels the powers of
// ten alone).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return niceTicks{}.Ticks(lo, hi)
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		pow := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * pow
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', max(0, -int(e)), 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// pointTicks marks an axis at its points' values, each labelled: a load
// axis at the loads run.
type pointTicks []float64

func (pt pointTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, v := range pt {
		if v >= lo && v <= hi {
			ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return ticks
}
