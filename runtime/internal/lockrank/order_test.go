package lockrank

import (
	"slices"
	"testing"
)

// allRanks is every Rank type, to check that each has an entry of its own
// in order.
var allRanks = []Rank{
	SuspendedSet{}, ConnScope{}, Session{}, Rollout{}, Suspension{}, Server{},
	MCPServer{}, MCPConns{}, Store{}, Conversations{}, Checkpoints{}, Secrets{}, Cork{},
	Backgrounds{}, BackgroundStore{},
	Outbox{}, Admission{}, Stopper{}, Inbox{}, Recorder{}, Leases{}, Windows{}, BackgroundLog{},
}

// TestRanksHaveEntries: every Rank type has a rankID of its own, and every
// entry of order (but the zero one) belongs to one of them, named.
func TestRanksHaveEntries(t *testing.T) {
	t.Parallel()
	seen := map[rankID]Rank{}
	for _, r := range allRanks {
		id := r.id()
		if id <= 0 || int(id) >= len(order) {
			t.Errorf("%T: rankID %d has no entry in order", r, id)
			continue
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%T and %T share rankID %d", r, other, id)
		}
		seen[id] = r
		if order[id].name == "" {
			t.Errorf("%T: its entry in order has no name", r)
		}
	}
	if len(seen) != len(order)-1 {
		t.Errorf("%d Rank types for %d entries of order", len(seen), len(order)-1)
	}
}

// TestOrderIsAcyclicAndTransitive: each entry lists only ranks declared
// before it, none of them a leaf, so that no two ranks can each be taken
// under the other; and it lists every rank its listed ranks list, so that
// a lock taken under two that are nested is checked against both.
func TestOrderIsAcyclicAndTransitive(t *testing.T) {
	t.Parallel()
	for r := rankID(1); int(r) < len(order); r++ {
		e := order[r]
		if e.leaf && len(e.after) > 0 {
			t.Errorf("%s is a leaf with a list: a leaf is taken under any lock but a leaf", e.name)
		}
		for i, a := range e.after {
			switch {
			case a >= r:
				t.Errorf("%s lists %s, which is not declared before it", e.name, order[a].name)
			case order[a].leaf:
				t.Errorf("%s lists %s, a leaf: nothing is taken under a leaf", e.name, order[a].name)
			case slices.Contains(e.after[:i], a):
				t.Errorf("%s lists %s twice", e.name, order[a].name)
			}
			for _, b := range order[a].after {
				if !slices.Contains(e.after, b) {
					t.Errorf("%s lists %s, which lists %s, but does not list it", e.name, order[a].name, order[b].name)
				}
			}
		}
	}
}

// TestMayTake: the order as the check reads it, on the orders runtime's
// doc states.
func TestMayTake(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		held, taken Rank
		ok          bool
	}{
		{SuspendedSet{}, Suspension{}, true},
		{ConnScope{}, Session{}, true},
		{ConnScope{}, Suspension{}, true}, // connScope.mu -> session.mu -> suspension.mu, session.mu let go
		{Session{}, Suspension{}, true},
		{Rollout{}, Suspension{}, true},
		{Suspension{}, Outbox{}, true},
		{Rollout{}, Outbox{}, true},
		{Server{}, Admission{}, true},
		{Suspension{}, Session{}, false},
		{Suspension{}, Rollout{}, false},
		{Session{}, ConnScope{}, false},
		{Server{}, Suspension{}, false},
		{Session{}, Session{}, false},
		{Outbox{}, Suspension{}, false},
		{Outbox{}, Admission{}, false}, // a leaf under a leaf
		{Store{}, Outbox{}, true},
		{Suspension{}, Store{}, false},
	} {
		if got := mayTake(c.held.id(), c.taken.id()); got != c.ok {
			t.Errorf("mayTake(%s held, %s) = %v, want %v", order[c.held.id()].name, order[c.taken.id()].name, got, c.ok)
		}
	}
}
