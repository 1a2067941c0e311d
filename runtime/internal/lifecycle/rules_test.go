package lifecycle

import (
	"fmt"
	"testing"
)

// The expectations here are written apart from Decide, from what the
// runtime's doc says a suspended rollout does: a table of what each event
// does in each phase, the flags that change that, who may send what, and,
// over every state value, which parts of the state each event reads and
// writes.

const (
	same    = "="
	nothing = "-"
)

// events in Event's order, for the table's columns.
var events = []Event{Park, Pause, Append, Appended, Answered, Cancel, Fork, Create, Resume, CaughtUp, Drop, Timeout,
	Expire, End, Settle, Shutdown, Steer, Hold, Written, Unwritten, Fence, HandOver, Hibernate, Awake}

// byPhase is what each event does in each phase, the rollout reporting to a
// live connection (detached for expire), no flag set, the server writing no
// checkpoints; a client's event from that connection on the rollout's lane,
// a resume from another connection with the same credentials. A phase's
// name is where it moves ("=": it stays, its phase allowed), "-" that it is
// ignored, otherwise the verdict's name.
var byPhase = map[Phase][]string{
	//          park       pause     append        outputs  answered   cancel       fork          create       resume       caught-up drop  timeout    expire     end      settle     shutdown   steer          hold     written  unwritten fence     hand-over hibernate awake
	Running:    {"pausing", nothing, "not-parked", nothing, nothing, same, "not-parked", same, same, nothing, same, nothing, "expired", "ended", nothing, same, same, nothing, nothing, nothing, "fenced", nothing, nothing, nothing},
	Pausing:    {nothing, "parked", "not-parked", nothing, nothing, "running", "not-parked", same, same, nothing, same, nothing, "expired", "ended", nothing, "running", same, nothing, nothing, nothing, "fenced", nothing, nothing, nothing},
	Parked:     {nothing, nothing, same, same, "running", "running", same, "lane-busy", same, nothing, same, "running", "expired", "ended", nothing, "running", same, nothing, nothing, nothing, "fenced", nothing, nothing, nothing},
	Ended:      {nothing, nothing, "not-found", nothing, nothing, "not-found", "not-found", same, same, nothing, same, nothing, "expired", nothing, "settled", nothing, "completed", nothing, nothing, nothing, "fenced", nothing, nothing, nothing},
	Settled:    {nothing, nothing, "not-found", nothing, nothing, "not-found", "not-found", same, "not-found", nothing, same, nothing, nothing, nothing, nothing, nothing, "completed", nothing, nothing, nothing, nothing, nothing, nothing, nothing},
	Expired:    {nothing, nothing, "not-found", nothing, nothing, "not-found", "not-found", same, "not-found", nothing, same, nothing, nothing, nothing, nothing, nothing, "completed", nothing, nothing, nothing, nothing, nothing, nothing, nothing},
	Fenced:     {nothing, nothing, nothing, nothing, nothing, nothing, "not-found", same, same, nothing, same, nothing, nothing, nothing, "settled", nothing, "not-active", nothing, nothing, nothing, nothing, nothing, nothing, nothing},
	HandedOver: {nothing, nothing, nothing, nothing, nothing, nothing, "not-found", same, same, nothing, same, nothing, nothing, nothing, "settled", nothing, "not-active", nothing, nothing, nothing, nothing, nothing, nothing, nothing},
	Hibernated: {nothing, nothing, "asleep", nothing, nothing, "asleep", "not-found", same, same, nothing, same, nothing, nothing, nothing, "settled", nothing, "not-active", nothing, nothing, nothing, nothing, nothing, nothing, nothing},
}

var (
	here      = Sender{Here: true, Lane: true, Creds: true}
	resumer   = Sender{Lane: true, Creds: true}
	otherConn = Sender{Lane: true, Creds: true} // another connection's client event
	otherLane = Sender{Here: true, Creds: true}
)

// canonical is the state byPhase starts from.
func canonical(p Phase) State { return State{phase: p, link: live} }

// outcome is what ev from f does to s, as the tables write it; it also
// checks that a refused or ignored event changes nothing.
func outcome(t *testing.T, s State, ev Event, f Sender) string {
	t.Helper()
	before := s
	v := s.Apply(ev, f)
	switch {
	case v != Allow:
		if s != before {
			t.Errorf("%v in %+v: %v, and the state moved to %+v", ev, before, v, s)
		}
		if v == Ignore {
			return nothing
		}
		return v.String()
	case s.phase == before.phase:
		return same
	}
	return s.phase.String()
}

func TestByPhase(t *testing.T) {
	t.Parallel()
	if len(byPhase) != NumPhases || len(events) != NumEvents {
		t.Fatalf("the table covers %d phases and %d events; there are %d and %d", len(byPhase), len(events), NumPhases, NumEvents)
	}
	for p, row := range byPhase {
		if len(row) != NumEvents {
			t.Fatalf("%v: %d columns, want %d", p, len(row), NumEvents)
		}
		for i, ev := range events {
			s, f := canonical(p), Sender{}
			switch ev {
			case Append, Cancel, Fork, Create, Drop, Settle, Steer:
				f = here
			case Resume:
				f = resumer
			case Expire:
				s.link = detached
			}
			if got := outcome(t, s, ev, f); got != row[i] {
				t.Errorf("%v, %v: %s, want %s", p, ev, got, row[i])
			}
		}
	}
}

// TestFlags: what each flag, and the link, change of byPhase.
func TestFlags(t *testing.T) {
	t.Parallel()
	with := func(p Phase, set func(*State)) State {
		s := canonical(p)
		set(&s)
		return s
	}
	durable := func(s *State) { s.checkpoints, s.checkpointed, s.durable = true, true, true }
	cases := []struct {
		name string
		s    State
		ev   Event
		f    Sender
		want string
		then func(State) bool // the parts the event wrote, when it applied
	}{
		{"a server that checkpoints holds the pause for its write", with(Pausing, func(s *State) { s.checkpoints = true }), Hold, Sender{}, same, func(s State) bool { return s.holding != notHeld }},
		{"a held pause does not go out", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldPause }), Pause, Sender{}, nothing, nil},
		{"a pause held twice", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldPause }), Hold, Sender{}, nothing, nil},
		{"the written pause is durable", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldPause }), Written, Sender{}, same,
			func(s State) bool { return s.holding == notHeld && s.checkpointed && s.durable }},
		{"an answer's write holds the step's frames", with(Running, func(s *State) { s.checkpoints = true }), Hold, Sender{}, same, func(s State) bool { return s.holding == heldAnswer }},
		{"the written answer makes no pause durable, whatever the step came to", with(Pausing, func(s *State) { s.checkpoints, s.checkpointed, s.holding = true, true, heldAnswer }), Written, Sender{}, same,
			func(s State) bool { return s.holding == notHeld && s.checkpointed && !s.durable }},
		{"the step's next pause waits for its answer's write", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldAnswer }), Pause, Sender{}, nothing, nil},
		{"an unwritten pause goes out all the same", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldPause }), Unwritten, Sender{}, same,
			func(s State) bool { return s.holding == notHeld && !s.checkpointed && !s.durable }},
		{"fenced while its pause is written", with(Pausing, func(s *State) { s.checkpoints, s.holding = true, heldPause }), Fence, Sender{}, "fenced", func(s State) bool { return s.holding == notHeld }},
		{"a running durable rollout is steered", with(Running, func(s *State) { s.checkpoints = true }), Steer, here, same, nil},
		{"a durable rollout's pause is not steered", with(Parked, durable), Steer, here, "durable", nil},
		{"nor the pause it comes to", with(Pausing, func(s *State) { s.checkpoints = true }), Steer, here, "durable", nil},
		{"a durable pause is handed over", with(Parked, durable), HandOver, Sender{}, "handed-over", nil},
		{"as it is written, while the server drains", with(Pausing, durable), HandOver, Sender{}, "handed-over", nil},
		{"not while its write is held", with(Pausing, func(s *State) { durable(s); s.holding = heldPause }), HandOver, Sender{}, nothing, nil},
		{"a durable pause hibernates", with(Parked, durable), Hibernate, Sender{}, "hibernated", nil},
		{"detached too", with(Parked, func(s *State) { durable(s); s.link = detached }), Hibernate, Sender{}, "hibernated", nil},
		{"not while a client catches up", with(Parked, func(s *State) { durable(s); s.link = replaying }), Hibernate, Sender{}, nothing, nil},
		{"not while a wake's events are taken", with(Parked, func(s *State) { durable(s); s.waking = true }), Hibernate, Sender{}, nothing, nil},
		{"not with items appended", with(Parked, func(s *State) { durable(s); s.appended = true }), Hibernate, Sender{}, nothing, nil},
		{"answered, the pause is no longer durable", with(Parked, func(s *State) { durable(s); s.appended = true }), Answered, Sender{}, "running",
			func(s State) bool { return s.checkpointed && !s.durable && !s.appended }},
		{"items appended", canonical(Parked), Appended, Sender{}, same, func(s State) bool { return s.appended }},
		{"a fork of a pause appended to", with(Parked, func(s *State) { s.appended = true }), Fork, here, "appended", nil},
		{"a wake's events all taken", with(Parked, func(s *State) { s.waking = true }), Awake, Sender{}, same, func(s State) bool { return !s.waking }},
		{"a silent first park", with(Running, func(s *State) { s.announced = true }), Park, Sender{}, "pausing", func(s State) bool { return !s.announced }},
		{"a resumed client catches up", with(Parked, func(s *State) { s.link = replaying }), CaughtUp, Sender{}, same, func(s State) bool { return s.link == live }},
		{"a resume replays", canonical(Parked), Resume, resumer, same, func(s State) bool { return s.link == replaying }},
		{"a drop detaches", canonical(Ended), Drop, here, same, func(s State) bool { return s.link == detached }},
		{"the resume window of a rollout attached again", canonical(Parked), Expire, Sender{}, nothing, nil},
		{"the beta's client answers a call before the pause: the append waits for it", with(Running, func(s *State) { s.early = true }), Append, here, "early", nil},
		{"or while the pause is written", with(Pausing, func(s *State) { s.early = true }), Append, here, "early", nil},
		{"at the pause it is taken", with(Parked, func(s *State) { s.early = true }), Append, here, same, nil},
		{"not once the rollout ended", with(Ended, func(s *State) { s.early = true }), Append, here, "not-found", nil},
		{"nor from another connection", with(Running, func(s *State) { s.early = true }), Append, otherConn, "not-found", nil},
		{"the resume window of a rollout catching up", with(Parked, func(s *State) { s.link = replaying }), Expire, Sender{}, nothing, nil},
	}
	for _, c := range cases {
		s := c.s
		if got := outcome(t, s, c.ev, c.f); got != c.want {
			t.Errorf("%s: %v in %+v: %s, want %s", c.name, c.ev, c.s, got, c.want)
			continue
		}
		if c.then != nil {
			s.Apply(c.ev, c.f)
			if !c.then(s) {
				t.Errorf("%s: %v in %+v left %+v", c.name, c.ev, c.s, s)
			}
		}
	}
}

// TestSenders: who may send a client's event.
func TestSenders(t *testing.T) {
	t.Parallel()
	for p := range numPhases {
		col := func(ev Event) string { return byPhase[p][ev] }
		for _, ev := range []Event{Append, Cancel, Fork} {
			wantOther := "not-found"
			if c := col(ev); c == nothing || c == "asleep" {
				wantOther = c // ignored, or woken, whoever sends it on its lane
			}
			if got := outcome(t, canonical(p), ev, otherConn); got != wantOther {
				t.Errorf("%v, %v from another connection: %s, want %s", p, ev, got, wantOther)
			}
			wantLane := "lane"
			if c := col(ev); c == "not-found" || c == nothing {
				wantLane = c // gone is gone, whatever the lane; ignored is ignored
			}
			if got := outcome(t, canonical(p), ev, otherLane); got != wantLane {
				t.Errorf("%v, %v on another lane: %s, want %s", p, ev, got, wantLane)
			}
		}
		if got := outcome(t, canonical(p), Steer, otherConn); got != "not-found" {
			t.Errorf("%v, a steer from another connection: %s, want not-found", p, got)
		}
		if got, want := outcome(t, canonical(p), Steer, Sender{Here: true}), col(Steer); got != want {
			t.Errorf("%v, a steer naming no lane: %s, want %s", p, got, want)
		}
		if got := outcome(t, canonical(p), Create, otherConn); got != same {
			t.Errorf("%v, a create from another connection: %s, want it queued", p, got)
		}
		if got := outcome(t, canonical(p), Resume, here); got != "not-found" {
			t.Errorf("%v, a resume from the connection it reports to: %s, want not-found", p, got)
		}
		if got := outcome(t, canonical(p), Resume, Sender{Lane: true}); got != "not-found" {
			t.Errorf("%v, a resume with other credentials: %s, want not-found", p, got)
		}
		for _, ev := range []Event{Drop, Settle} {
			if got := outcome(t, canonical(p), ev, otherConn); got != nothing {
				t.Errorf("%v, %v from a connection it does not report to: %s, want it ignored", p, ev, got)
			}
		}
	}
}

// part is one part of a State, for the properties over every state.
type part struct {
	name string
	get  func(State) int
	set  func(*State, int)
	n    int // its values: 0 … n-1
}

var parts = []part{
	{"phase", func(s State) int { return int(s.phase) }, func(s *State, v int) { s.phase = Phase(v) }, NumPhases},
	{"link", func(s State) int { return int(s.link) }, func(s *State, v int) { s.link = linkState(v) }, int(numLinks)},
	flag("checkpoints", func(s *State) *bool { return &s.checkpoints }),
	{"holding", func(s State) int { return int(s.holding) }, func(s *State, v int) { s.holding = hold(v) }, int(numHolds)},
	flag("checkpointed", func(s *State) *bool { return &s.checkpointed }),
	flag("durable", func(s *State) *bool { return &s.durable }),
	flag("appended", func(s *State) *bool { return &s.appended }),
	flag("waking", func(s *State) *bool { return &s.waking }),
	flag("announced", func(s *State) *bool { return &s.announced }),
	flag("early", func(s *State) *bool { return &s.early }),
}

func flag(name string, f func(*State) *bool) part {
	return part{name, func(s State) int {
		if *f(&s) {
			return 1
		}
		return 0
	}, func(s *State, v int) { *f(s) = v == 1 }, 2}
}

// reads and writes are, per event, the parts of the state its verdict
// depends on (with its sender, for a client's event) and those it may
// change.
var (
	reads = map[Event][]string{
		Park: {"phase"}, Pause: {"phase", "holding"}, Append: {"phase", "early"}, Appended: {"phase"}, Answered: {"phase"},
		Cancel: {"phase"}, Fork: {"phase", "appended"}, Create: {"phase"}, Resume: {"phase"}, CaughtUp: {"link"},
		Drop: {}, Timeout: {"phase"}, Expire: {"phase", "link"}, End: {"phase"}, Settle: {"phase"}, Shutdown: {"phase"},
		Steer: {"phase", "checkpoints"}, Hold: {"phase", "checkpoints", "holding"}, Written: {"holding"}, Unwritten: {"holding"},
		Fence: {"phase"}, HandOver: {"phase", "durable", "holding"}, Hibernate: {"phase", "durable", "link", "waking", "appended"},
		Awake: {"waking"},
	}
	writes = map[Event][]string{
		Park: {"phase", "announced"}, Pause: {"phase"}, Appended: {"appended"}, Answered: {"phase", "durable", "appended"},
		Cancel: {"phase"}, Resume: {"link"}, CaughtUp: {"link"}, Drop: {"link"}, Timeout: {"phase"}, Expire: {"phase"},
		End: {"phase"}, Settle: {"phase"}, Shutdown: {"phase"}, Hold: {"holding"}, Written: {"holding", "checkpointed", "durable"},
		Unwritten: {"holding"}, Fence: {"phase", "holding"}, HandOver: {"phase"}, Hibernate: {"phase"}, Awake: {"waking"},
	}
)

// everyState calls f with every State value.
func everyState(f func(State)) {
	var walk func(i int, s State)
	walk = func(i int, s State) {
		if i == len(parts) {
			f(s)
			return
		}
		for v := range parts[i].n {
			parts[i].set(&s, v)
			walk(i+1, s)
		}
	}
	walk(0, State{})
}

// TestEveryState: over every state value, event and sender, an event
// refused or ignored changes nothing, one applied changes only its own
// parts, and what it does depends on no part it does not read.
func TestEveryState(t *testing.T) {
	t.Parallel()
	if len(reads) != NumEvents || len(events) != NumEvents {
		t.Fatalf("reads covers %d events; there are %d", len(reads), NumEvents)
	}
	has := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	var senders []Sender
	for i := range 8 {
		senders = append(senders, Sender{Here: i&1 != 0, Lane: i&2 != 0, Creds: i&4 != 0})
	}
	states, failures := 0, 0
	everyState(func(s State) {
		states++
		for _, ev := range events {
			for _, f := range senders {
				v, next := Decide(s, ev, f)
				if v != Allow && next != s {
					t.Errorf("%v from %+v in %+v: %v, and the state moved to %+v", ev, f, s, v, next)
				}
				for _, p := range parts {
					if !has(writes[ev], p.name) && p.get(next) != p.get(s) {
						t.Errorf("%v in %+v wrote %s: %+v", ev, s, p.name, next)
					}
					if has(reads[ev], p.name) {
						continue
					}
					for x := range p.n {
						s2 := s
						p.set(&s2, x)
						v2, next2 := Decide(s2, ev, f)
						p.set(&next2, p.get(next)) // the part itself may differ, as it did before
						if v2 != v || v == Allow && next2 != next {
							if failures++; failures < 20 {
								t.Errorf("%v from %+v depends on %s, which it does not read: %v in %+v, %v with %s=%d", ev, f, p.name, v, s, v2, p.name, x)
							}
						}
					}
				}
			}
		}
	})
	if want := 9 * 3 * 3 * 128; states != want { // phases, links, holds, seven flags
		t.Errorf("%d states walked, want %d", states, want)
	}
}

func Example() {
	s := New(false, false)
	s.Apply(Park, Sender{})
	s.Apply(Pause, Sender{})
	fmt.Println(s.Phase(), s.Apply(Create, Sender{Here: true, Lane: true}))
	fmt.Println(s.Apply(Append, Sender{Here: true, Lane: true}), s.Phase())
	s.Apply(Answered, Sender{})
	fmt.Println(s.Phase())
	// Output:
	// parked lane-busy
	// allow parked
	// running
}

// TestLeased: over every state value, the lease is held exactly while the
// rollout has a journal, this server runs it, and it is running or
// followed by a connection.
func TestLeased(t *testing.T) {
	t.Parallel()
	held := 0
	everyState(func(s State) {
		want := s.checkpointed && (s.phase == Running || s.phase == Pausing || s.phase == Parked && s.link != detached)
		if s.Leased() != want {
			t.Errorf("%+v: Leased %v, want %v", s, s.Leased(), want)
		}
		if want {
			held++
		}
	})
	if held == 0 {
		t.Error("no state holds a lease")
	}
}
