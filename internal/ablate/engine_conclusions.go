package ablate

import (
	"fmt"
	"slices"
	"strings"
)

// An engine-model run ends with what it found, in sentences the run
// writes itself (EngineRun.Conclusions), so that a reader of the table does
// not have to: per design, the policy that shortens rollouts most against
// discarding, at which loads and by how much; and where pinning makes them
// longer. A ratio of two cells is taken seed by seed (the seeds start the
// clients alike in every cell), its interval over the seeds; a gain or a
// loss is told only where its interval excludes 1.

// gain is one cell's completion time against another's at one load: how
// many times shorter (above 1) or longer (below 1) it is, with its 95%
// interval.
type gain struct {
	clients int
	policy  string
	x       float64
	ci      [2]float64
}

// clear reports whether the interval excludes 1.
func (g gain) clear() bool { return g.ci[0] > 1 || g.ci[1] < 1 }

// String is "1.76× (1.74–1.78)".
func (g gain) String() string { return fmt.Sprintf("%.2f× (%.2f–%.2f)", g.x, g.ci[0], g.ci[1]) }

// against is how many times shorter c's completion time is than base's,
// seed by seed.
func against(base, c EngineCell) gain {
	var ratios []float64
	for i := range min(len(base.JCTSeeds), len(c.JCTSeeds)) {
		if c.JCTSeeds[i] > 0 {
			ratios = append(ratios, base.JCTSeeds[i]/c.JCTSeeds[i])
		}
	}
	return gain{clients: c.Clients, policy: c.Policy, x: mean(ratios), ci: bootstrapCI(ratios, mean)}
}

// conclusions are the run's sentences: two a design.
func (r *EngineRun) conclusions() []string {
	var designs []string
	for _, c := range r.Cells {
		if !slices.Contains(designs, c.Design) {
			designs = append(designs, c.Design)
		}
	}
	var out []string
	for _, d := range designs {
		out = append(out, r.best(d), r.pinLoses(d))
	}
	return out
}

// cell is the design's cell of that policy and load.
func (r *EngineRun) cell(design, policy string, clients int) (EngineCell, bool) {
	for _, c := range r.Cells {
		if c.Design == design && c.Policy == policy && c.Clients == clients {
			return c, true
		}
	}
	return EngineCell{}, false
}

// loads are the design's numbers of clients, in order.
func (r *EngineRun) loads(design string) []int {
	var ns []int
	for _, c := range r.Cells {
		if c.Design == design && !slices.Contains(ns, c.Clients) {
			ns = append(ns, c.Clients)
		}
	}
	slices.Sort(ns)
	return ns
}

// best is the sentence of the policy that shortens the design's rollouts
// most against discarding, load by load: runs of loads with the same best
// policy, its gain at the first and last of them.
func (r *EngineRun) best(design string) string {
	var gains []gain // the best at each load; clients only where none is clearly better than discarding
	for _, n := range r.loads(design) {
		base, ok := r.cell(design, "discard", n)
		if !ok {
			continue
		}
		var top gain
		for _, c := range r.Cells {
			if c.Design != design || c.Clients != n || c.Policy == "discard" {
				continue
			}
			if g := against(base, c); g.clear() && g.x > 1 && g.x > top.x {
				top = g
			}
		}
		top.clients = n
		gains = append(gains, top)
	}
	var parts []string
	for i := 0; i < len(gains); {
		j := i
		for j+1 < len(gains) && gains[j+1].policy == gains[i].policy {
			j++
		}
		first, last := gains[i], gains[j]
		span := loadSpan(first.clients, last.clients)
		switch {
		case first.policy == "":
			parts = append(parts, fmt.Sprintf("at %s no policy is faster than discard beyond its interval", span))
		case i == j:
			parts = append(parts, fmt.Sprintf("at %s %s is fastest, %s faster than discard", span, first.policy, first))
		default:
			parts = append(parts, fmt.Sprintf("at %s %s is fastest, %s faster than discard at %d and %s at %d",
				span, first.policy, first, first.clients, last, last.clients))
		}
		i = j + 1
	}
	return fmt.Sprintf("%s: %s (rollout completion time, %s).", design, strings.Join(parts, "; "), r.seedsNote())
}

// pinLoses is the sentence of where a pin policy makes the design's
// rollouts longer than discarding in the same order of admission.
func (r *EngineRun) pinLoses(design string) string {
	var parts []string
	for _, pol := range r.policies(design) {
		if !strings.HasPrefix(pol, "pin") {
			continue
		}
		discard := "discard"
		if _, order, ok := strings.Cut(pol, ", "); ok {
			discard += ", " + order
		}
		var lost []gain
		for _, n := range r.loads(design) {
			base, ok1 := r.cell(design, discard, n)
			c, ok2 := r.cell(design, pol, n)
			if g := against(base, c); ok1 && ok2 && g.clear() && g.x < 1 {
				lost = append(lost, g)
			}
		}
		switch len(lost) {
		case 0:
		case 1:
			parts = append(parts, fmt.Sprintf("%s loses to %s at %d rollouts (%s as fast)", pol, discard, lost[0].clients, lost[0]))
		default:
			first, last := lost[0], lost[len(lost)-1]
			parts = append(parts, fmt.Sprintf("%s loses to %s at %s (%s as fast at %d, %s at %d)",
				pol, discard, loadList(lost), first, first.clients, last, last.clients))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s: pinning never makes rollouts longer than discarding here.", design)
	}
	return fmt.Sprintf("%s: %s.", design, strings.Join(parts, "; "))
}

// policies are the design's policies, in the run's order.
func (r *EngineRun) policies(design string) []string {
	var ps []string
	for _, c := range r.Cells {
		if c.Design == design && !slices.Contains(ps, c.Policy) {
			ps = append(ps, c.Policy)
		}
	}
	return ps
}

// seedsNote says what the intervals are over.
func (r *EngineRun) seedsNote() string {
	return fmt.Sprintf("95%% intervals over %d runs a cell", r.Seeds)
}

// loadSpan is "8 rollouts" or "8–64 rollouts".
func loadSpan(a, b int) string {
	if a == b {
		return fmt.Sprintf("%d rollout%s", a, plural(a))
	}
	return fmt.Sprintf("%d–%d rollouts", a, b)
}

// loadList is "8, 16 and 64 rollouts".
func loadList(gs []gain) string {
	var ns []string
	for _, g := range gs {
		ns = append(ns, fmt.Sprint(g.clients))
	}
	if len(ns) == 1 {
		return ns[0] + " rollouts"
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1] + " rollouts"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
