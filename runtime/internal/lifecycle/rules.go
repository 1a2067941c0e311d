package lifecycle

// Event is what can happen to a suspended rollout: its client's events, the
// connection it reports to, its loop's progress, its checkpoints, its
// timers, the server's shutdown.
type Event uint8

const (
	Park      Event = iota // the loop waits on its step's client calls
	Pause                  // the pause's response.done goes out
	Append                 // response.append with outputs for the pending calls
	Appended               // an append took items at the pause without answering it: some outputs, or steering
	Answered               // the last pending call has its output: the loop runs again
	Cancel                 // response.cancel
	Fork                   // response.fork
	Create                 // response.create on the rollout's lane
	Resume                 // response.resume: the sender's connection takes it over
	CaughtUp               // the resuming connection has what it missed
	Drop                   // the connection it reports to ends
	Timeout                // Suspension.Timeout passed on the pause
	Expire                 // the resume window passed while detached
	End                    // its loop returned
	Settle                 // its connection takes the result
	Shutdown               // the server's drain is over
	Steer                  // response.steer
	Hold                   // a write of its journal holds its frames back: a pause's (its response.done waits for it), or, running, an answer's (the step's frames wait)
	Written                // the write is in the store
	Unwritten              // the store did not take it: the frames go out all the same
	Fence                  // the store says another server has taken it over
	HandOver               // the server shuts down: released to its checkpoint
	Hibernate              // Suspension.HibernateAfter passed on the pause: released to its checkpoint
	Awake                  // the events queued while it woke are all taken
	numEvents
)

// NumEvents is how many events there are, for a table over them.
const NumEvents = int(numEvents)

func (e Event) String() string {
	return [...]string{"park", "pause", "append", "appended", "answered", "cancel", "fork", "create", "resume",
		"caught-up", "drop", "timeout", "expire", "end", "settle", "shutdown", "steer", "hold", "written",
		"unwritten", "fence", "hand-over", "hibernate", "awake"}[e]
}

// Verdict is what an event does in a state.
type Verdict uint8

const (
	Allow           Verdict = iota // the event applies: the state becomes the one Decide returns
	Ignore                         // nothing changes: a timer or a teardown that lost a race, or a rollout that sends nothing more
	RefuseNotFound                 // response_not_found: no such suspended response here
	RefuseNotParked                // response_not_suspended: it is not waiting for tool outputs
	RefuseAppended                 // response_not_suspended: a fork of a pause its client has appended to
	RefuseLaneBusy                 // stream_suspended: a create on a lane parked on its client
	RefuseLane                     // stream_id_mismatch: the rollout runs on another lane
	RefuseCompleted                // response_already_completed: a steer of a rollout that has ended
	RefuseNotActive                // steer_response_not_active: a steer of a rollout that left this server
	RefuseDurable                  // steering_not_supported: a steer of a durable rollout at a pause, whose checkpoint would not hold it
	Asleep                         // it is in its checkpoint: the event wakes it (a takeover on the sender's connection)
	Early                          // an append before the pause it answers, in the multi-agent beta's dialect: taken as the rollout parks
	numVerdicts
)

func (v Verdict) String() string {
	return [...]string{"allow", "ignore", "not-found", "not-parked", "appended", "lane-busy", "lane",
		"completed", "not-active", "durable", "asleep", "early"}[v]
}

// Refused reports whether the verdict refuses the event to its client.
func (v Verdict) Refused() bool { return v != Allow && v != Ignore && v != Asleep && v != Early }

// Sender is how the connection a client's event comes from stands to the
// rollout. Events of the rollout's own loop, its timers, its store and the
// server have the zero Sender.
type Sender struct {
	Here  bool // it is the connection the rollout reports to
	Lane  bool // the event names the rollout's lane
	Creds bool // it bears the credentials the rollout was created with
}

// Apply decides ev, sent by from, in s and, when the verdict is Allow,
// moves s to the state it leads to. It is the only way a State changes.
func (s *State) Apply(ev Event, from Sender) Verdict {
	v, next := Decide(*s, ev, from)
	if v == Allow {
		*s = next
	}
	return v
}

// Decide is what ev, sent by from, does in s: its verdict and, when it is
// Allow, the state it leads to.
//
// A client's append, cancel and fork come from the connection the rollout
// reports to, on its lane: from any other connection they are refused as
// response_not_found, on another lane as stream_id_mismatch. An append
// before the pause is refused, but in the multi-agent beta's dialect
// (early), where it waits for the pause (Early). A resume comes from
// another connection with the same credentials. A create is refused
// only on the lane of a rollout parked on the sender's connection. Drops and
// settles from a connection the rollout no longer reports to, and the
// resume window's end once it is attached again, lost a race: ignored. A
// rollout that left for its checkpoint (Phase.Released) takes nothing from
// its client here; one that hibernated is woken by its lane's append or
// cancel.
func Decide(s State, ev Event, from Sender) (Verdict, State) {
	p := s.phase
	switch ev {
	case Park:
		if p != Running {
			return Ignore, s
		}
		s.phase, s.announced = Pausing, false
	case Pause:
		if p != Pausing || s.holding != notHeld {
			return Ignore, s
		}
		s.phase = Parked
	case Append, Cancel, Fork:
		switch {
		case p == Hibernated && ev != Fork && from.Lane:
			return Asleep, s
		case (p == Fenced || p == HandedOver) && ev != Fork:
			return Ignore, s
		case !from.Here || p >= Ended && (p != Hibernated || ev == Fork): // a fork of a hibernated rollout: its state is in its checkpoint
			return RefuseNotFound, s
		case !from.Lane:
			return RefuseLane, s
		}
		switch ev {
		case Append:
			switch {
			case p < Parked && s.early: // its client saw the call: the pause comes
				return Early, s
			case p != Parked:
				return RefuseNotParked, s
			}
		case Cancel:
			s.phase = Running // aborted: it runs to its end, and takes no more outputs
		case Fork:
			switch {
			case p != Parked:
				return RefuseNotParked, s
			case s.appended:
				return RefuseAppended, s
			}
		}
	case Appended:
		if p != Parked {
			return Ignore, s
		}
		s.appended = true
	case Answered:
		if p != Parked {
			return Ignore, s
		}
		s.phase, s.durable, s.appended = Running, false, false
	case Create:
		if from.Here && p == Parked {
			return RefuseLaneBusy, s
		}
	case Resume:
		if from.Here || !from.Creds || p == Settled || p == Expired {
			return RefuseNotFound, s
		}
		s.link = replaying
	case CaughtUp:
		if s.link != replaying {
			return Ignore, s
		}
		s.link = live
	case Drop:
		if !from.Here {
			return Ignore, s
		}
		s.link = detached
	case Timeout:
		if p != Parked {
			return Ignore, s
		}
		s.phase = Running // aborted: it runs to its end, and takes no more outputs
	case Expire:
		if s.link != detached || !p.Held() {
			return Ignore, s
		}
		s.phase = Expired
	case End:
		if p > Parked {
			return Ignore, s
		}
		s.phase = Ended
	case Settle:
		if !from.Here || p != Ended && !p.Released() {
			return Ignore, s
		}
		s.phase = Settled
	case Shutdown:
		if p > Parked {
			return Ignore, s
		}
		s.phase = Running // it runs to its end: it takes no more outputs
	case Steer:
		switch {
		case !from.Here:
			return RefuseNotFound, s
		case p.Released():
			return RefuseNotActive, s
		case p >= Ended:
			return RefuseCompleted, s
		case p != Running && s.checkpoints:
			return RefuseDurable, s
		}
	case Hold:
		if !s.checkpoints || p > Pausing || s.holding != notHeld {
			return Ignore, s
		}
		s.holding = heldPause
		if p == Running { // answered: the step it starts runs
			s.holding = heldAnswer
		}
	case Written:
		if s.holding == notHeld {
			return Ignore, s
		}
		s.durable = s.holding == heldPause // an answer's leaves no pause durable: the step runs
		s.holding, s.checkpointed = notHeld, true
	case Unwritten:
		if s.holding == notHeld {
			return Ignore, s
		}
		s.holding = notHeld
	case Fence:
		if !p.Held() {
			return Ignore, s
		}
		s.phase, s.holding = Fenced, notHeld
	case HandOver:
		if p != Pausing && p != Parked || !s.durable || s.holding != notHeld {
			return Ignore, s
		}
		s.phase = HandedOver
	case Hibernate:
		if p != Parked || !s.durable || s.link == replaying || s.waking || s.appended {
			return Ignore, s
		}
		s.phase = Hibernated
	case Awake:
		if !s.waking {
			return Ignore, s
		}
		s.waking = false
	}
	return Allow, s
}
