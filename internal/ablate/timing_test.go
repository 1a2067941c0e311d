package ablate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/sampler"
)

// TestMatchTiming: the timing probe's steps as a server at one timing times
// them, set against another (or the same) timing. A clear mismatch of the
// output rate, the TTFT or the prefill rate is refused with what the steps
// fit and what to pass; the noise of a machine (a stalled step, late first
// tokens, an unpaced model's own work) is not.
func TestMatchTiming(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tps := func(r float64) sampler.Timing { return sampler.Timing{TPS: r} }
	// steps are the probe's steps at server timing srv, each then changed by
	// its noise function, if any.
	steps := func(srv sampler.Timing, noise ...func(i int, s *stepTiming)) []stepTiming {
		var out []stepTiming
		for i, sh := range []struct{ uncached, output int }{{295, 34}, {216, 34}, {96, 21}} {
			s := stepTiming{uncached: sh.uncached, output: sh.output, first: srv.FirstToken(sh.uncached), sample: srv.Duration(sh.uncached, sh.output)}
			if !srv.Paced() { // an unpaced model's own work
				s.first, s.sample = 300*time.Microsecond, ms
			}
			for _, f := range noise {
				f(i, &s)
			}
			out = append(out, s)
		}
		return out
	}
	stall := func(i int, s *stepTiming) { // one step's end comes 50 ms late
		if i == 1 {
			s.sample += 50 * ms
		}
	}
	lateFirsts := func(i int, s *stepTiming) { // first tokens 30 ms late; the streams still end on time
		if i > 0 {
			s.first += 30 * ms
		}
	}
	lateFirst := func(i int, s *stepTiming) { // one of them
		if i == 1 {
			s.first += 30 * ms
		}
	}
	slowFirst := func(i int, s *stepTiming) { // the longest prompt's first token 6 ms late on a loaded machine, the others the server's own work (CI read it as a prefill rate)
		s.first = []time.Duration{6 * ms, 200 * time.Microsecond, 100 * time.Microsecond}[i]
	}
	loaded := func(i int, s *stepTiming) { // an unpaced server's work stretched: 10-13 ms a step, as measured from a fresh clone's tests
		s.first, s.sample = 4*ms, time.Duration(10+i)*ms
	}
	for _, tc := range []struct {
		name         string
		srv, assumed sampler.Timing
		noise        []func(int, *stepTiming)
		want         string // in the error; "" matches
		measured     sampler.Timing
	}{
		{name: "same", srv: tps(1000), assumed: tps(1000)},
		{name: "same, a stalled step", srv: tps(1000), assumed: tps(1000), noise: []func(int, *stepTiming){stall}},
		{name: "same, late first tokens", srv: tps(1000), assumed: tps(1000), noise: []func(int, *stepTiming){lateFirsts}},
		{name: "same, unpaced", srv: tps(0), assumed: tps(0)},
		{name: "same, unpaced on a loaded machine", srv: tps(0), assumed: tps(0), noise: []func(int, *stepTiming){loaded}},
		{name: "same, every knob", srv: sampler.Timing{TPS: 200, TTFT: 20 * ms, PrefillRate: 20000}, assumed: sampler.Timing{TPS: 200, TTFT: 20 * ms, PrefillRate: 20000}},
		{name: "slower", srv: tps(200), assumed: tps(1000), noise: []func(int, *stepTiming){stall},
			want: "the server at URL streams at ~200 tokens/s where --tps is 1000: pass --tps 200 (or serve with --tps 1000); ", measured: tps(200)},
		{name: "faster", srv: tps(4000), assumed: tps(1000),
			want: "streams at ~4000 tokens/s where --tps is 1000: pass --tps 4000 (or serve with --tps 1000); ", measured: tps(4000)},
		{name: "unpaced", srv: tps(0), assumed: tps(1000),
			want: "streams unpaced where --tps is 1000: pass --tps 0 (or serve with --tps 1000); ", measured: tps(0)},
		{name: "paced", srv: tps(1000), assumed: tps(0),
			want: "streams at ~1000 tokens/s where --tps is 0 (unpaced): pass --tps 1000 (or serve with --tps 0); ", measured: tps(1000)},
		{name: "ttft", srv: sampler.Timing{TPS: 1000, TTFT: 50 * ms}, assumed: tps(1000), noise: []func(int, *stepTiming){lateFirst},
			want:     "sends a step's first token after ~50ms where --ttft 0s and --prefill-rate 0 make it 0s: pass --ttft 50ms (or serve with --ttft 0s); ",
			measured: sampler.Timing{TPS: 1000, TTFT: 50 * ms}},
		{name: "no ttft", srv: tps(200), assumed: sampler.Timing{TPS: 200, TTFT: 40 * ms},
			want: "pass --ttft 0s (or serve with --ttft 40ms); ", measured: tps(200)},
		{name: "no ttft, on a loaded machine", srv: tps(200), assumed: sampler.Timing{TPS: 200, TTFT: 40 * ms}, noise: []func(int, *stepTiming){slowFirst},
			want: "pass --ttft 0s (or serve with --ttft 40ms); ", measured: tps(200)},
		{name: "prefill", srv: sampler.Timing{TPS: 1000, PrefillRate: 20000}, assumed: tps(1000),
			want: "pass --prefill-rate 20000 (or serve with --prefill-rate 0); ", measured: sampler.Timing{TPS: 1000, PrefillRate: 20000}},
		{name: "slower, with a ttft", srv: sampler.Timing{TPS: 200, TTFT: 50 * ms}, assumed: tps(1000),
			want:     "streams at ~200 tokens/s where --tps is 1000, and sends a step's first token after ~50ms where --ttft 0s and --prefill-rate 0 make it 0s: pass --tps 200 --ttft 50ms (or serve with --tps 1000 --ttft 0s); ",
			measured: sampler.Timing{TPS: 200, TTFT: 50 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := matchTiming("URL", tc.assumed, steps(tc.srv, tc.noise...))
			var te *TimingError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a server at %+v against %+v: %v", tc.srv, tc.assumed, err)
			case tc.want == "":
			case !errors.As(err, &te):
				t.Fatalf("a server at %+v against %+v: %v, want a *TimingError", tc.srv, tc.assumed, err)
			case !strings.Contains(err.Error(), tc.want) || te.Measured != tc.measured:
				t.Errorf("%v\nmeasured %+v; want %q in it and %+v", err, te.Measured, tc.want, tc.measured)
			}
		})
	}
}

// TestCheckTimingWithout: a server that sends no timings (not a tether, or
// one that leaves them out) is not checked: there is nothing to check.
func TestCheckTimingWithout(t *testing.T) {
	t.Parallel()
	turns := []clienttools.Turn{{Usage: protocol.Usage{InputTokens: 300, OutputTokens: 34}}, {Usage: protocol.Usage{InputTokens: 500, OutputTokens: 34}}}
	if err := checkTiming("URL", sampler.Timing{TPS: 1000}, turns); err != nil {
		t.Errorf("no timings: %v", err)
	}
}
